"""Hierarchical census group sizes (Fioretto, Van Hentenryck, Zhu; spec hierarchical-census.md)."""

from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.release import CensusRelease
from dpcube.mechanisms.census.table import GroupSizeTable, group_sizes

__all__ = ["CensusHierarchy", "CensusRelease", "GroupSizeTable", "RegionHierarchy", "group_sizes"]
