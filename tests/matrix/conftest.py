"""Fixtures of the matrix-mechanism tests.

LSA is dominated by dense BLAS calls on matrices of a few hundred rows; under ``pytest -n 2`` on two
cores a multi-threaded OpenBLAS in each worker oversubscribes the CPU and runs several times slower,
so the tests of this directory pin the BLAS libraries loaded by numpy/scipy to one thread.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import scipy


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
