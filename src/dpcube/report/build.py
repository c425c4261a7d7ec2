"""The report of one release: :func:`build_report` (HTML text) and :func:`write_report` (the file).

Where it goes: ``<release directory>/report.html`` by default (beside ``report.md``), or any
file named by ``out``. A release directory holds only what the guarantee covers, and the report
is post-processing of the loaded release alone (its noisy tables and manifest; never the
in-memory object that carried the curator's exact log), so it belongs there;
:func:`dpcube.release.base.check_output_directory` counts it as the release's own file only when
it carries dpcube's keyed mark (:func:`dpcube.release.base.is_dpcube_report`). The same mark
guards every write: a file of that name that dpcube did not write is never overwritten.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from dpcube.errors import ReleaseError, UsageError
from dpcube.files import write_atomic
from dpcube.release.base import (
    REPORT,
    REPORT_HTML,
    Release,
    is_dpcube_report,
    load_release,
)
from dpcube.release.marks import forget_written, remember_written, written_sha256
from dpcube.release.uncertainty import MIN_RUNS, uncertainty_kind
from dpcube.report import sections
from dpcube.report.html import esc, page
from dpcube.report.sections import ReportOptions


def _library_version() -> str:
    from dpcube.version import __version__

    return __version__


def build_report(
    release: Release,
    *,
    level: float = 0.95,
    runs: int | None = None,
    seed: int | None = None,
    default_runs: int = sections.REPORT_RUNS,
    bootstrap_budget_s: float | None = None,
    markdown_link: str | None = None,
    served_name: str | None = None,
) -> str:
    """The HTML report of ``release`` (pure: from what the release holds, no data access).

    Pass a release read back by :func:`dpcube.load_release`: it holds only what the guarantee
    covers. ``level``: the intervals' confidence level; ``runs``/``seed``: the bootstrap's
    replicates and their seed, for releases whose error is bootstrapped (every figure shares
    them; ``runs=None``: the replicates saved with the release, else ``default_runs``);
    ``bootstrap_budget_s``: when set, a bootstrap whose replicates would take more CPU seconds
    (one is timed) is skipped: the figures then show the noise sd, labelled "noise sd only, NOT
    the error" (``dpcube release``'s report; ``dpcube report`` always bootstraps);
    ``markdown_link``: a relative link to the release's ``report.md``, shown in the header;
    ``served_name``: the name ``dpcube serve`` gives the release (its folder name): the header
    then links to the explorer page for it, a link shown only when the page is served over HTTP.
    """
    if not 0.0 < level < 1.0:
        raise UsageError(f"--level must be a confidence level between 0 and 1, got {level}")
    for given in (runs, default_runs):
        if given is not None and given < MIN_RUNS:
            raise UsageError(
                f"--runs must be at least {MIN_RUNS} (bootstrap replicates), got {given}"
            )
    options = ReportOptions(level=level, runs=runs, seed=seed, default_runs=default_runs)
    m = release.metadata
    error_kind, kind_reason = uncertainty_kind(release)
    wanted, _ = sections.bootstrap_arguments(release, options)
    if error_kind == "bootstrap" and bootstrap_budget_s is not None and wanted is not None:
        cost = wanted * replicate_seconds(release, seed)
        if cost > bootstrap_budget_s:
            options = replace(options, skipped_bootstrap_s=cost)
            kind_reason += (
                f" (skipped in this report: {wanted} re-runs would take about {cost:.0f} CPU s; "
                "the figures show the noise sd only; dpcube report REL computes it)"
            )
    written = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    body: list[str] = [
        f"<h1>dpcube release report: {esc(m.mechanism)}, epsilon = {esc(f'{m.epsilon:g}')}</h1>",
        f'<p class="note">Release <code>{esc(m.release_id)}</code>; report written {esc(written)} '
        f"by dpcube {esc(_library_version())} from the saved release alone (its noisy tables and "
        "manifest): every figure is post-processing of the release, covered by its guarantee."
        + (
            f' See also <a href="{esc(markdown_link)}">{esc(markdown_link)}</a>.'
            if markdown_link
            else ""
        )
        + "</p>",
        *([explorer_link(served_name)] if served_name else []),
        sections.guarantee_section(release, options, kind_reason),
    ]
    kind = release.kind
    parts = release.report_parts(sections.MAX_TABLE_ROWS)
    body.extend(sections.report_part(release, part, options) for part in parts)
    if not parts:
        body.append(
            f'<section id="other"><p class="note">No pictures for a {esc(kind)!s} release yet; '
            "its labelled table: <code>dpcube export</code>.</p></section>"
        )
    plan = m.report.get("plan")
    if isinstance(plan, dict):
        body.append(sections.plan_section(plan))
    title = f"dpcube release {m.release_id}"
    meta = {
        "dpcube-mechanism": m.mechanism,
        "dpcube-release-kind": kind,
        "dpcube-for-publication": "yes" if m.for_publication else "no",
    }
    return page(title, m.release_id, meta, "".join(body))


def replicate_seconds(release: Release, seed: int | None) -> float:
    """CPU seconds of one bootstrap replicate of ``release`` (the mechanism re-run once on the
    release itself; post-processing, no budget spent)."""
    start = time.process_time()
    world = release.bootstrap_world()
    world.replicate(np.random.default_rng(seed))
    return time.process_time() - start


def report_target(release_dir: Path, out: str | os.PathLike[str] | None) -> Path:
    """Where the report of ``release_dir`` goes, refused (one line, before any work) when that
    would overwrite a file dpcube did not write, or cannot be written."""
    target = Path(out) if out is not None else release_dir / REPORT_HTML
    if target.is_dir():
        raise UsageError(f"--out {str(target)!r} is a directory; give a file name (report.html)")
    if target.exists() and not is_dpcube_report(target):
        raise UsageError(
            f"{str(target)!r} exists and was not written by dpcube report; refusing to "
            "overwrite it (move it, or pass --out FILE)"
        )
    if not target.parent.is_dir():
        raise UsageError(f"--out {str(target)!r}: directory {str(target.parent)!r} does not exist")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise UsageError(
            f"cannot write {str(target)!r}: {str(target.parent)!r} is not writable (pass --out "
            "FILE in a writable directory)"
        )
    return target


def explorer_link(served_name: str) -> str:
    """A link to the explorer (``/?release=NAME`` of ``dpcube serve``), hidden in a report opened
    as a file (no server to link to), where the paragraph says how to start one instead.

    >>> "/?release=my%20release" in explorer_link("my release")
    True
    """
    from urllib.parse import quote

    href = "/?release=" + quote(served_name, safe="")
    return (
        '<p class="note" id="explorer-note">Query this release interactively: '
        f"<code>dpcube serve {esc(served_name)}</code> serves it with a browser explorer"
        f'<span id="explorer-link" hidden>: <a href="{esc(href)}">open it in the explorer</a>'
        "</span>.</p>\n<script>if (location.protocol.startsWith('http')) "
        "document.getElementById('explorer-link').hidden = false;</script>"
    )


def write_report(
    release_dir: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    level: float = 0.95,
    runs: int | None = None,
    seed: int | None = None,
    default_runs: int = sections.REPORT_RUNS,
    bootstrap_budget_s: float | None = None,
) -> Path:
    """Load the release in ``release_dir``, build its report and write it atomically to ``out``
    (default ``<release_dir>/report.html``); return the path. Refuses to overwrite a file
    dpcube did not write. The other arguments: as :func:`build_report`."""
    directory = Path(release_dir)
    if not directory.is_dir():
        raise ReleaseError(f"{str(directory)!r} is not a release directory (no such directory)")
    target = report_target(directory, out)
    release = load_release(directory)
    link = REPORT if target.parent.resolve() == directory.resolve() else None
    text = build_report(
        release, level=level, runs=runs, seed=seed, default_runs=default_runs,
        bootstrap_budget_s=bootstrap_budget_s, markdown_link=link, served_name=directory.name,
    )  # fmt: skip
    report_target(directory, out)  # again, right before writing (the build takes a while)
    data = text.encode("utf-8")
    earlier = written_sha256(target)
    digest = hashlib.sha256(data).hexdigest()
    remember_written(target, digest)  # dpcube's mark: how a later write or save knows the file
    write_atomic(target, data)
    if earlier is not None and earlier != digest:
        forget_written(target, earlier)
    return target


__all__ = ["build_report", "report_target", "write_report"]
