"""One BLAS thread for the iterative strategy optimisers, whose products are small.

The optimisers (OPT_0 / OPT_⊗ / OPT_M in :mod:`dpcube.mechanisms.matrix.optimize`, LSA in
:mod:`dpcube.mechanisms.matrix.lsa`) run thousands of products of matrices with a few hundred to
a few thousand rows. A multi-threaded BLAS gains little on products that size, and OpenBLAS's
threads busy-wait between calls: on a 2-core machine with one core taken by another job,
``dpcube plan --workload allrange:1024 --epsilon 1`` took 120 s of wall time (166 CPU s) with the
default two BLAS threads against 28 s with one (``opt`` alone 44 s against 16 s). The
limit applies only while the decorated function runs (``threadpoolctl``), so the dense solves
elsewhere keep every thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from threadpoolctl import threadpool_limits

P = ParamSpec("P")
R = TypeVar("R")


def single_blas_thread(func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` with the BLAS libraries limited to one thread, restored afterwards.

    >>> import numpy  # loads numpy's BLAS, so threadpoolctl sees it
    >>> from threadpoolctl import threadpool_info
    >>> def blas_threads():
    ...     return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    >>> single_blas_thread(blas_threads)()
    {1}
    >>> blas_threads() == single_blas_thread(blas_threads)() or blas_threads() != {1}
    True
    """

    @functools.wraps(func)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        with threadpool_limits(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return limited


__all__ = ["single_blas_thread"]
