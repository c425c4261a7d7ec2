"""``dpcube report REL [--out FILE] [--level 0.95] [--runs N] [--bootstrap-seed S]``: write the
release's HTML report and print its path (registered in :data:`dpcube.registry.COMMANDS`).

The report itself is the library's (:func:`dpcube.report.write_report`, below the front ends),
which ``dpcube release`` calls as well; this module is only its command line."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from dpcube.errors import UsageError
from dpcube.report import REPORT_RUNS


def cmd_report(args: argparse.Namespace) -> int:
    from dpcube.report import write_report

    if not 0.0 < args.level < 1.0 or math.isnan(args.level):
        raise UsageError(
            f"--level must be a confidence level between 0 and 1 (e.g. 0.95), got {args.level}"
        )
    path = write_report(
        args.release, args.out, level=args.level, runs=args.runs, seed=args.bootstrap_seed
    )
    print(path)
    if args.runs is not None or args.bootstrap_seed is not None:
        from dpcube.release.base import load_release
        from dpcube.release.uncertainty import uncertainty_kind

        kind, _ = uncertainty_kind(load_release(args.release))
        if kind != "bootstrap":  # a flag is never silently ignored
            print(
                f"note: --runs/--bootstrap-seed have no effect here: this release's error is "
                f"{kind}, not a bootstrap",
                file=sys.stderr,
            )
    return 0


def register(sub: Any) -> None:
    """Add ``dpcube report`` to the sub-command parsers."""
    p = sub.add_parser(
        "report",
        help="write a release's self-contained HTML report (figures with error bars)",
        description="Write one self-contained HTML file (no network access needed to view it) "
        "showing what was released, under which guarantee, with error bars; print its path.",
    )
    p.add_argument("release", help="release directory")
    p.add_argument(
        "--out", default=None, metavar="FILE", help="where to write it (default: REL/report.html)"
    )
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals")
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help="bootstrap replicates for releases whose error is bootstrapped (default: those saved "
        f"with the release, else {REPORT_RUNS}; at least 20)",
    )
    p.add_argument(
        "--bootstrap-seed", type=int, default=None, help="seed the bootstrap (a reproducible file)"
    )
    p.set_defaults(func=cmd_report)
