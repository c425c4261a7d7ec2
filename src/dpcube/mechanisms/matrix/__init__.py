"""The matrix mechanism, the singular value bound and the Level Selection Algorithm
(C. Li and G. Miklau, "Efficient Batch Query Answering Under Differential Privacy", 2011
preprint, UMass Amherst; arXiv:1103.1367).

- :mod:`.workloads`: AllRange, prefix, marginals, AllPredicate, sampled ranges, files of queries;
- :mod:`.strategies`: identity, hierarchical, Haar wavelet, Kronecker, eigen, Hadamard optimal;
- :mod:`.bound`: svdb and the error formulas (Eq. 1 and 4);
- :mod:`.lsa`: LSA with the exact fast candidate evaluation; :mod:`.scaling`: separation and
  generalization;
- :mod:`.mechanism`: :class:`MatrixMechanism` (registered as ``matrix``) and its variance model;
- :mod:`.plan`: ``dpcube plan``.
"""

from dpcube.mechanisms.matrix.mechanism import (
    STRATEGIES,
    MatrixMechanism,
    MatrixVariance,
    make_strategy,
)

__all__ = ["STRATEGIES", "MatrixMechanism", "MatrixVariance", "make_strategy"]
