"""Shared test fixtures, and one BLAS thread per test worker.

Under ``pytest -n 2`` on two cores a multi-threaded OpenBLAS in each worker oversubscribes the CPU
and dense linear algebra (LSA, least squares) runs several times slower, so the BLAS libraries
bundled with numpy and scipy are pinned to one thread for the whole suite.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import pytest
import scipy

REPO = Path(__file__).resolve().parent.parent


def _single_thread_blas() -> None:
    for package in (np, scipy):
        libs = Path(package.__file__).resolve().parent.parent / f"{package.__name__}.libs"
        for lib in libs.glob("*openblas*"):
            handle = ctypes.CDLL(str(lib))
            for symbol in (
                "scipy_openblas_set_num_threads64_",
                "scipy_openblas_set_num_threads",
                "openblas_set_num_threads64_",
                "openblas_set_num_threads",
            ):
                setter = getattr(handle, symbol, None)
                if setter is not None:
                    setter(1)
                    break


_single_thread_blas()


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


@pytest.fixture(autouse=True)
def _private_dpcube_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test gets its own ``$DPCUBE_HOME``: ledgers (keyed by the data's fingerprint) and
    their index never leak between tests or into the user's ``~/.dpcube``."""
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path_factory.mktemp("dpcube-home")))
