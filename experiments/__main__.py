"""``python -m experiments``: list the experiments; ``python -m experiments NAME ARGS...`` runs
one, as ``python -m experiments.NAME ARGS...`` does."""

from __future__ import annotations

import importlib
import sys

from experiments import RUNNABLE, run_command, summary


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "list"):
        width = max(len(name) for name in RUNNABLE)
        print("The papers' experiments (python -m experiments.NAME --help for each one's options):")
        for name in RUNNABLE:
            print(f"  {name:<{width}}  {summary(name)}")
        return 0
    name = args[0].replace("-", "_")
    if name not in RUNNABLE:
        print(
            f"error: unknown experiment {args[0]!r}; known: {', '.join(RUNNABLE)}",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(f"experiments.{name}")
    return run_command(module.main, args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
