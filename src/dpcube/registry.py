"""Names of the pluggable parts, mapped to where they live (imported on first use).

Add one line here when you add a mechanism, a release kind, a variance model or a
sub-command; the CLI, ``load_release``, the bootstrap and the conformance suite read these maps.

The maps hold strings and this module imports nothing of dpcube, so it sits at the bottom layer
(docs/architecture.md): a release turns the names its manifest stores (its kind, its variance
model, the mechanism that made it) back into classes here without importing the layers above it.
A class is imported only when its name is resolved, which also keeps ``dpcube --version`` from
loading any mechanism.
"""

from __future__ import annotations

import importlib
from typing import Any

#: ``--mechanism`` name -> mechanism class.
MECHANISMS: dict[str, str] = {
    "identity": "dpcube.mechanisms.identity:Identity",
    "matrix": "dpcube.mechanisms.matrix.mechanism:MatrixMechanism",
    "htf": "dpcube.mechanisms.spatial.htf:HTF",
    "ug": "dpcube.mechanisms.spatial.grids:UniformGrid",
    "ag": "dpcube.mechanisms.spatial.grids:AdaptiveGrid",
    "quadtree": "dpcube.mechanisms.spatial.trees:QuadTree",
    "kdtree": "dpcube.mechanisms.spatial.trees:KDTree",
    "privtree": "dpcube.mechanisms.spatial.privtree:PrivTree",
    "uniform": "dpcube.mechanisms.spatial.grids:Uniform",
    "singular": "dpcube.mechanisms.spatial.grids:Singular",
    "datacube": "dpcube.mechanisms.datacube:DataCube",
    "census-hierarchy": "dpcube.mechanisms.census.mechanism:CensusHierarchy",
    "privelet": "dpcube.mechanisms.privelet.mechanism:Privelet",
    "privelet-plus": "dpcube.mechanisms.privelet.mechanism:PriveletPlus",
    "auto": "dpcube.planning.auto:AutoMechanism",
}

#: ``kind`` in a release manifest -> Release subclass.
RELEASE_KINDS: dict[str, str] = {
    "cells": "dpcube.release.cells:CellRelease",
    "census_hierarchy": "dpcube.mechanisms.census.release:CensusRelease",
    "spatial_leaves": "dpcube.mechanisms.spatial.release:LeafRelease",
    "cuboids": "dpcube.mechanisms.datacube.release:CuboidRelease",
}

#: ``kind`` of a variance model in a manifest -> VarianceModel subclass.
VARIANCE_MODELS: dict[str, str] = {
    "uniform_cell": "dpcube.release.variance:UniformCellVariance",
    "matrix": "dpcube.mechanisms.matrix.mechanism:MatrixVariance",
    "privelet": "dpcube.mechanisms.privelet.mechanism:PriveletVariance",
}

#: Extra ``dpcube`` sub-commands -> a function ``register(subparsers)`` that adds the sub-command
#: and sets ``func`` (``handler(args) -> int``) as its default.
COMMANDS: dict[str, str] = {
    "plan": "dpcube.cli.plan:register",
    "export": "dpcube.cli.export:register",
    "audit": "dpcube.cli.audit:register",
    "serve": "dpcube.serve.cli:register",
    "report": "dpcube.cli.report:register",
}


def resolve(table: dict[str, str], name: str, what: str) -> Any:
    """Import and return the object registered under ``name``."""
    try:
        target = table[name]
    except KeyError:
        raise KeyError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
