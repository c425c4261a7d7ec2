"""dpcube: differentially private counts with the least error a privacy budget allows.

The public names are imported lazily, so ``import dpcube`` stays fast and a mechanism's
dependencies load only when it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Schema": "dpcube.schema",
    "Hierarchy": "dpcube.schema",
    "Histogram": "dpcube.histogram",
    "histogram": "dpcube.histogram",
    "SQL": "dpcube.engine.duckdb_engine",
    "Mechanism": "dpcube.mechanisms.base",
    "Identity": "dpcube.mechanisms.identity",
    "Release": "dpcube.release.base",
    "load_release": "dpcube.release.base",
    "BudgetLedger": "dpcube.privacy.ledger",
    "NO_NOISE": "dpcube.privacy.random",
    "DPCubeError": "dpcube.errors",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dpcube' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = sorted(_EXPORTS)
