"""Implicit linear operators and Gram-matrix solves (shared by the linear-query mechanisms).

- :mod:`dpcube.linalg.operators`: identity, total, prefix, explicit (sparse/dense), weighted,
  vertical stack, sum and Kronecker operators with products both ways, Gram matrices and column
  L1/L2 norms (sensitivities);
- :mod:`dpcube.linalg.solve`: :class:`GramSolver` (Cholesky, pseudo-inverse, per-axis Kronecker,
  marginal algebra) and :func:`least_squares`;
- :mod:`dpcube.linalg.boxes`: :class:`BoxGram`, the Gram of box queries kept as the boxes (a sum of
  Kronecker products of intervals: products, traces and per-axis Grams without an n x n matrix),
  and the summed-area helpers ``prefix_sums`` / ``box_sums``;
- :mod:`dpcube.linalg.marginal`: :class:`MarginalSpectrum`, Grams ``Σ_S w_S ⊗ᵢ (I or J)`` by their
  eigenvalues on the common eigenspaces (stacks of marginals, marginal workloads).
"""

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
