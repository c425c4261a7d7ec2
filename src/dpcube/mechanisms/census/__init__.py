"""Hierarchical census group sizes (Fioretto, Van Hentenryck, Zhu, "Differential Privacy of
Hierarchical Census Data: An Optimization Approach", Artificial Intelligence 296, 2021)."""

from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.release import CensusRelease
from dpcube.mechanisms.census.table import GroupSizeTable, group_sizes

__all__ = ["CensusHierarchy", "CensusRelease", "GroupSizeTable", "RegionHierarchy", "group_sizes"]
