"""Implicit linear operators and Gram-matrix solves (shared by the linear-query mechanisms).

- :mod:`dpcube.linalg.operators`: identity, total, prefix, explicit (sparse/dense), weighted,
  vertical stack, sum and Kronecker operators with products both ways, Gram matrices and column
  L1/L2 norms (sensitivities);
- :mod:`dpcube.linalg.solve`: :class:`GramSolver` (Cholesky, pseudo-inverse, per-axis Kronecker,
  marginal algebra) and :func:`least_squares`;
- :mod:`dpcube.linalg.boxes`: :class:`BoxGram`, the Gram of box queries kept as the boxes (a sum of
  Kronecker products of intervals: products, traces and per-axis Grams without an n x n matrix),
  on the summed-area helpers of :mod:`dpcube.linalg.summed_area` (``prefix_sums`` / ``box_sums``,
  numpy only);
- :mod:`dpcube.linalg.marginal`: :class:`MarginalSpectrum`, Grams ``Σ_S w_S ⊗ᵢ (I or J)`` by their
  eigenvalues on the common eigenspaces (stacks of marginals, marginal workloads).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use (PEP 562): scipy stays out of light paths
    from dpcube.linalg.boxes import BoxGram
    from dpcube.linalg.marginal import MarginalSpectrum
    from dpcube.linalg.operators import (
        Explicit,
        Identity,
        Kronecker,
        LinearOperator,
        Prefix,
        Sum,
        Total,
        VStack,
        Weighted,
        box_rows,
        kron_matvec,
    )
    from dpcube.linalg.solve import GramSolver, least_squares

_LAZY = {
    "BoxGram": "dpcube.linalg.boxes",
    "MarginalSpectrum": "dpcube.linalg.marginal",
    "Explicit": "dpcube.linalg.operators",
    "Identity": "dpcube.linalg.operators",
    "Kronecker": "dpcube.linalg.operators",
    "LinearOperator": "dpcube.linalg.operators",
    "Prefix": "dpcube.linalg.operators",
    "Sum": "dpcube.linalg.operators",
    "Total": "dpcube.linalg.operators",
    "VStack": "dpcube.linalg.operators",
    "Weighted": "dpcube.linalg.operators",
    "box_rows": "dpcube.linalg.operators",
    "kron_matvec": "dpcube.linalg.operators",
    "GramSolver": "dpcube.linalg.solve",
    "least_squares": "dpcube.linalg.solve",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dpcube.linalg' has no attribute {name!r}")


__all__ = [
    "BoxGram",
    "Explicit",
    "GramSolver",
    "Identity",
    "Kronecker",
    "LinearOperator",
    "MarginalSpectrum",
    "Prefix",
    "Sum",
    "Total",
    "VStack",
    "Weighted",
    "box_rows",
    "kron_matvec",
    "least_squares",
]
