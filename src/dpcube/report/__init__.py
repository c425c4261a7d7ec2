"""``dpcube report REL``: one self-contained HTML file per release.

:func:`build_report` turns a loaded release into HTML (the guarantee, then the pictures its kind
calls for, each with its uncertainty); :func:`write_report` writes it atomically, by default to
``<release directory>/report.html``. Viewable offline: Plotly's JavaScript is inlined from the
``plotly`` wheel, nothing is fetched. See docs/report.md.
"""

from __future__ import annotations

from dpcube.report.build import build_report, report_target, write_report
from dpcube.report.sections import RELEASE_BOOTSTRAP_BUDGET_S, RELEASE_REPORT_RUNS, REPORT_RUNS

__all__ = [
    "RELEASE_BOOTSTRAP_BUDGET_S",
    "RELEASE_REPORT_RUNS",
    "REPORT_RUNS",
    "build_report",
    "report_target",
    "write_report",
]
