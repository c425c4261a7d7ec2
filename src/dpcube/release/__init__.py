"""Releases: noisy tables that answer queries, their variance models, and their on-disk form."""

from dpcube.release.base import Release, ReleaseMetadata, load_release
from dpcube.release.cells import CellRelease
from dpcube.release.variance import UniformCellVariance, VarianceModel

__all__ = [
    "CellRelease",
    "Release",
    "ReleaseMetadata",
    "UniformCellVariance",
    "VarianceModel",
    "load_release",
]
