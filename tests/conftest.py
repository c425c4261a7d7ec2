"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path | None:
    """``$DPCUBE_DATA_DIR`` or ``../shared/data`` beside the repository, if it exists."""
    env = os.environ.get("DPCUBE_DATA_DIR")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture
def data_dir() -> Path:
    """The real data sets; tests that use this fixture skip cleanly when they are absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is absent (set DPCUBE_DATA_DIR)")
    return path
