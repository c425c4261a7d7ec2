"""dpcube: differentially private counts with the least error a privacy budget allows.

The public names are imported lazily, so ``import dpcube`` stays fast and a mechanism's
dependencies load only when it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported eagerly: the function ``histogram`` shares its name with its module, and a lazy export
# would be shadowed by the module as soon as anything imported ``dpcube.histogram``.
from dpcube.histogram import Histogram as Histogram
from dpcube.histogram import histogram as histogram
from dpcube.version import __version__ as __version__

_EXPORTS: dict[str, str] = {
    "Schema": "dpcube.schema",
    "Hierarchy": "dpcube.schema",
    "SQL": "dpcube.engine.duckdb_engine",
    "Mechanism": "dpcube.mechanisms.base",
    "Identity": "dpcube.mechanisms.identity",
    "MatrixMechanism": "dpcube.mechanisms.matrix.mechanism",
    "DAWA": "dpcube.mechanisms.matrix.dawa",
    "CensusHierarchy": "dpcube.mechanisms.census",
    "GroupSizeTable": "dpcube.mechanisms.census",
    "group_sizes": "dpcube.mechanisms.census",
    "RegionHierarchy": "dpcube.mechanisms.census",
    **{
        n: "dpcube.mechanisms.spatial"
        for n in (
            "HTF",
            "UniformGrid",
            "AdaptiveGrid",
            "QuadTree",
            "KDTree",
            "PrivTree",
            "Uniform",
            "Singular",
            "bound_contributions",
        )
    },
    "DataCube": "dpcube.mechanisms.datacube",
    "CubeSource": "dpcube.mechanisms.datacube",
    "Privelet": "dpcube.mechanisms.privelet.mechanism",
    "PriveletPlus": "dpcube.mechanisms.privelet.mechanism",
    "Release": "dpcube.release.base",
    "load_release": "dpcube.release.base",
    "answer_uncertainty": "dpcube.release.uncertainty",
    "format_answer": "dpcube.release.uncertainty",
    "Uncertainty": "dpcube.release.uncertainty",
    "BudgetLedger": "dpcube.privacy.ledger",
    "ledger_for": "dpcube.privacy.accounting",
    "NO_NOISE": "dpcube.privacy.random",
    "DPCubeError": "dpcube.errors",
    "plan": "dpcube.planning.plan",
    "plan_mechanisms": "dpcube.planning.plan",
    "AutoMechanism": "dpcube.planning.auto",
    "auto_mechanism": "dpcube.planning.auto",
    "Publication": "dpcube.planning.publication",
    "release_publication": "dpcube.planning.publication",
    "load_publication": "dpcube.planning.publication",
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


__all__ = sorted([*_EXPORTS, "Histogram", "histogram"])
