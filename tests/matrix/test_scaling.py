"""Spec §10.6 (T33-T35): workload separation, workload generalization, sampled workloads.
Run-time parts of T33/T34 are benchmarks (benchmarks/matrix), not tests."""

from __future__ import annotations

import numpy as np
import pytest

from dpcube.linalg import Identity
from dpcube.mechanisms.matrix.bound import gaussian_error, svdb
from dpcube.mechanisms.matrix.lsa import lsa
from dpcube.mechanisms.matrix.scaling import generalization_blocks, generalized_lsa, separated_lsa
from dpcube.mechanisms.matrix.workloads import (
    allrange,
    allrange_gram_1d,
    marginal_ranges,
    random_ranges,
)

SEPARATION_SVDB = {4: 50.336, 8: 266.16}
SEPARATION_RATIO = {4: 1.029, 8: 1.039}


@pytest.mark.parametrize("d", [4, 8])
def test_t33_separation(d: int) -> None:
    w = marginal_ranges((d, d))
    bound = svdb(w.gram)
    assert bound == pytest.approx(SEPARATION_SVDB[d], rel=1e-4)
    sep = separated_lsa([(0, allrange_gram_1d(d)), (1, allrange_gram_1d(d))], (d, d))
    a = sep.strategy.operator
    np.testing.assert_allclose(a.column_l2_squared(), sep.sensitivity_squared)
    joint = gaussian_error(w.gram, a)
    assert joint / bound == pytest.approx(SEPARATION_RATIO[d], abs=2e-3)
    assert joint / bound <= 1.06
    full = lsa(w.gram.dense(), (d, d))
    assert joint <= 1.05 * full.error


@pytest.mark.parametrize("n", [64])
def test_t34_generalization(n: int) -> None:
    w = random_ranges(416, (n,), seed=1, bias="extremes")
    g = w.gram.dense()
    assert generalization_blocks(n) == 4
    r = generalized_lsa(g, n)
    a = r.strategy.operator
    norms = a.column_l2_squared()
    np.testing.assert_allclose(norms, norms.max(), rtol=1e-12)
    assert np.linalg.matrix_rank(a.dense()) == n
    err = gaussian_error(w.gram, a)
    assert svdb(w.gram) * (1 - 1e-9) <= err <= gaussian_error(w.gram, Identity(n))


def _complexity(sample_dims: tuple[int, ...], m: int, bias: str | None) -> float:
    full = allrange(sample_dims)
    sample = random_ranges(m, sample_dims, seed=7, bias=bias)
    return (svdb(sample.gram) / m) / (svdb(full.gram) / full.size)


@pytest.mark.parametrize("dims", [(1024,), (32, 32), (16, 8, 8)])
def test_t35_sampling(dims: tuple[int, ...]) -> None:
    uniform = _complexity(dims, 10_000, None)
    assert 0.97 <= uniform <= 1.0 + 1e-9
    assert _complexity(dims, 1000, "extremes") < _complexity(dims, 1000, None)
