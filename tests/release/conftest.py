"""Shared set-up of the release tests."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def clustered_grid() -> np.ndarray:
    """A 32 x 32 grid of 5,000 synthetic, tightly clustered points (normal around (9.6, 9.6),
    sd 0.96 cells): the leaves the rectangles cut hold clustered points."""
    side = 32
    rng = np.random.default_rng(1)
    pts = np.clip(rng.normal(side * 0.3, side * 0.03, size=(5000, 2)), 0, side - 1)
    grid = np.zeros((side, side), dtype=np.int64)
    np.add.at(grid, (pts[:, 0].astype(int), pts[:, 1].astype(int)), 1)
    return grid
