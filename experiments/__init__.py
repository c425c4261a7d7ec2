"""The papers' experiments, reproduced beside the product (not part of the installed package).

Run from a source checkout: ``python -m experiments`` lists them, ``python -m experiments.NAME
--help`` (or ``python -m experiments NAME --help``) runs one; the results and their comparison
with the papers are in ``experiments/docs/``. The figures need the ``research`` extra
(matplotlib).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from dpcube.errors import DPCubeError

#: The experiments with a command line, by module name.
RUNNABLE = (
    "census",
    "coverage",
    "coverage_empty",
    "coverage_shift",
    "coverage_worlds",
    "datacube",
    "integer",
    "leaderboard",
    "matrix",
    "privelet",
    "quadtree_height",
    "spatial",
)


def summary(name: str) -> str:
    """The first line of an experiment's docstring, without its command, read without importing
    the module (the listing stays fast)."""
    source = (Path(__file__).resolve().parent / f"{name}.py").read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    prefix = f"``python -m experiments.{name}``: "
    return first.removeprefix(prefix)


def run_command(main: Callable[[list[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """Run an experiment's ``main`` as a command: a bad flag or bad data prints one line naming
    it and exits 2, as the ``dpcube`` command does (``--debug`` shows the traceback)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
    try:
        return main(args)
    except DPCubeError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted", file=sys.stderr)
        return 130
