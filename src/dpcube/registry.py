"""Names of the pluggable parts, mapped to where they live (imported on first use).

Add one line here when you add a mechanism, a release kind, a variance model or a
``dpcube bench`` experiment; the CLI, ``load_release`` and the conformance suite read these maps.
"""

from __future__ import annotations

import importlib
from typing import Any

#: ``--mechanism`` name -> mechanism class.
MECHANISMS: dict[str, str] = {
    "identity": "dpcube.mechanisms.identity:Identity",
}

#: ``kind`` in a release manifest -> Release subclass.
RELEASE_KINDS: dict[str, str] = {
    "cells": "dpcube.release.cells:CellRelease",
}

#: ``kind`` of a variance model in a manifest -> VarianceModel subclass.
VARIANCE_MODELS: dict[str, str] = {
    "uniform_cell": "dpcube.release.variance:UniformCellVariance",
}

#: ``dpcube bench NAME`` -> a function ``main(argv: list[str]) -> int``.
BENCHMARKS: dict[str, str] = {}

#: Extra ``dpcube`` sub-commands -> a function ``register(subparsers)`` that adds the sub-command
#: and sets ``func`` (``handler(args) -> int``) as its default.
COMMANDS: dict[str, str] = {}


def resolve(table: dict[str, str], name: str, what: str) -> Any:
    """Import and return the object registered under ``name``."""
    try:
        target = table[name]
    except KeyError:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
