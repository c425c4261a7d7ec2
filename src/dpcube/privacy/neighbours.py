"""Neighbour notions: which pairs of data sets differential privacy must make indistinguishable.

- ``add_remove``: one data set is the other plus one record (unbounded DP). On a histogram one
  cell changes by 1: L1 and L2 sensitivity of the identity query are 1.
- ``replace``: one record's value is changed (bounded DP; the number of records n is public). On
  a histogram one cell loses 1 and another gains 1: L1 sensitivity 2, L2 sensitivity sqrt(2).

>>> Neighbour.parse("replace").histogram_sensitivity("l1")
2.0
"""

from __future__ import annotations

import math
from enum import StrEnum

from dpcube.errors import BudgetError


class Neighbour(StrEnum):
    ADD_REMOVE = "add_remove"
    REPLACE = "replace"

    @classmethod
    def parse(cls, value: str | Neighbour) -> Neighbour:
        try:
            return cls(value)
        except ValueError:
            raise BudgetError(
                f"unknown neighbour notion {value!r}; use 'add_remove' or 'replace'"
            ) from None

    def histogram_sensitivity(self, norm: str) -> float:
        """Sensitivity of the identity query on a histogram (the count of every cell)."""
        if norm == "l1":
            return 1.0 if self is Neighbour.ADD_REMOVE else 2.0
        if norm == "l2":
            return 1.0 if self is Neighbour.ADD_REMOVE else math.sqrt(2.0)
        raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")
