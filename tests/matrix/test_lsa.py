"""The Level Selection Algorithm (Li and Miklau, "Efficient Batch Query Answering Under Differential
Privacy", 2011 preprint, Secs. 4.1-4.2, Program 4.1): its output structure, exact small runs, the
paper's Example 4.1 and the error / singular value bound ratios of its Sec. 5."""

from __future__ import annotations

import numpy as np
import pytest

from dpcube.linalg import Explicit, Identity
from dpcube.mechanisms.matrix.bound import gaussian_error, svdb
from dpcube.mechanisms.matrix.lsa import lsa
from dpcube.mechanisms.matrix.strategies import hierarchical, kron, wavelet
from dpcube.workloads import (
    allpredicate,
    allrange,
    allrange_gram_1d,
    random_ranges,
)


def _levels(r) -> list[list[list[int]]]:
    return [lvl.reshape(-1, 2).tolist() for lvl in r.levels]


def test_structure_and_t24_incremental_error() -> None:
    for dims in ((16,), (2, 2, 2, 2), (4, 4)):
        w = allrange(dims)
        r = lsa(w.gram.dense(), dims)
        rows = r.all_boxes()
        n = w.n
        cells = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
        np.testing.assert_array_equal(rows[:n, :, 0], cells)
        np.testing.assert_array_equal(rows[:n, :, 1], cells)
        for level in r.levels:
            cover = np.zeros(dims, dtype=int)
            for box in level:
                cover[tuple(slice(lo, hi + 1) for lo, hi in box)] += 1
            assert np.all(cover == 1), "a level must partition the cells"
        a = r.strategy().operator
        np.testing.assert_allclose(a.column_l2_squared(), r.levels_count, rtol=1e-12)
        explicit = r.levels_count * np.trace(np.linalg.solve(a.gram().dense(), w.gram.dense()))
        assert r.error == pytest.approx(explicit, rel=1e-8)
        uncompressed = Explicit(_dense_rows(rows, dims))
        assert gaussian_error(w.gram, uncompressed) == pytest.approx(explicit, rel=1e-8)


def _dense_rows(rows: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    out = np.zeros((len(rows), *dims))
    for i, box in enumerate(rows):
        out[(i, *(slice(lo, hi + 1) for lo, hi in box))] = 1.0
    return out.reshape(len(rows), -1)


def test_small_exact_runs() -> None:
    r4 = lsa(allrange_gram_1d(4), (4,))
    assert _levels(r4) == [[[0, 1], [2, 3]], [[0, 0], [1, 2], [3, 3]]]
    assert (r4.levels_count, r4.rows_count, r4.distinct_count) == (3, 9, 7)
    assert r4.error == pytest.approx(186 / 11, rel=1e-9)
    assert r4.rejected is not None
    r8 = lsa(allrange_gram_1d(8), (8,))
    assert _levels(r8) == [
        [[0, 0], [1, 3], [4, 6], [7, 7]],
        [[0, 1], [2, 2], [3, 4], [5, 5], [6, 7]],
        [[0, 0], [1, 1], [2, 5], [6, 6], [7, 7]],
        [[0, 2], [3, 3], [4, 4], [5, 7]],
        [[0, 0], [1, 6], [7, 7]],
        [[i, i] for i in range(8)],
    ]
    assert (r8.levels_count, r8.rows_count, r8.distinct_count) == (7, 37, 17)
    assert r8.error == pytest.approx(82.287910, rel=1e-7)
    r16 = lsa(allrange_gram_1d(16), (16,))
    assert (r16.levels_count, r16.rows_count, r16.distinct_count) == (15, 129, 53)
    assert r16.error == pytest.approx(418.717231, rel=1e-8)
    r32 = lsa(allrange_gram_1d(32), (32,))
    assert (r32.levels_count, r32.rows_count, r32.distinct_count) == (19, 286, 109)
    assert r32.error == pytest.approx(2190.737748, rel=1e-8)


#: Error / svdb after each accepted level of LSA as the paper writes it, on AllRange(512): the
#: curve of the paper's Fig. 1, as a reference run of Program 4.1 printed it.
FIG1 = [
    16.909,
    2.7693,
    2.2711,
    2.2079,
    1.5534,
    1.5184,
    1.4407,
    1.3588,
    1.3158,
    1.2930,
    1.2575,
    1.2482,
    1.2192,
    1.2083,
    1.2037,
    1.1872,
    1.1845,
    1.1670,
    1.1517,
    1.1424,
    1.1420,
    1.1300,
    1.1218,
    1.1178,
    1.1140,
    1.1136,
    1.1132,
    1.1023,
    1.0979,
    1.0940,
    1.0933,
    1.0892,
    1.0845,
]
FIG1_BOXES = [
    30,
    34,
    18,
    234,
    110,
    105,
    189,
    105,
    149,
    183,
    73,
    195,
    54,
    92,
    170,
    51,
    244,
    192,
    133,
    62,
    180,
    154,
    92,
    133,
    83,
    92,
    289,
    192,
    150,
    44,
    170,
    232,
]


def test_example_4_1_allrange_512() -> None:
    r = lsa(allrange_gram_1d(512), (512,))
    assert (r.levels_count, r.rows_count, r.distinct_count) == (33, 4746, 1931)
    bound = svdb(allrange((512,)).gram)
    assert r.error / bound == pytest.approx(1.0845, abs=5e-5)
    np.testing.assert_allclose(np.array(r.errors) / bound, FIG1, atol=6e-4)
    assert [len(level) for level in r.levels] == FIG1_BOXES
    assert r.rejected is not None and len(r.rejected) == 98


def test_allrange_64() -> None:
    r = lsa(allrange_gram_1d(64), (64,))
    assert r.error / svdb(allrange((64,)).gram) == pytest.approx(1.0796, abs=0.002)
    assert (r.levels_count, r.rows_count, r.distinct_count) == (16, 405, 187)


def test_small_multi_dimensional() -> None:
    w = allrange((2, 2, 2, 2))
    r = lsa(w.gram.dense(), w.dims)
    assert (r.levels_count, r.rows_count, r.distinct_count) == (5, 52, 36)
    # Same counts as a reference run's 1.0534; the levels differ by a tie (the first level ties
    # the identity's error and is accepted: Program 4.1 accepts a level whose error is "≤"), worth
    # 5e-4.
    assert r.error / svdb(w.gram) == pytest.approx(1.0534, abs=1e-3)
    w = allrange((4, 4, 4))
    r = lsa(w.gram.dense(), w.dims)
    ratio = r.error / svdb(w.gram)
    assert ratio == pytest.approx(1.034, abs=0.005)
    kron_h = gaussian_error(w.gram, kron([hierarchical(4)] * 3).operator) / svdb(w.gram)
    kron_y = gaussian_error(w.gram, kron([wavelet(4)] * 3).operator) / svdb(w.gram)
    assert ratio < kron_y < kron_h
    assert ratio < 1.1


def test_tied_first_level_is_judged_on_its_exact_error() -> None:
    # On AllRange(2,...,2) the first level exactly ties the identity (s·T = (s+1)·T_l) and the
    # paper's "≤" accepts it. The level's error is recomputed by Cholesky before the test: the
    # Woodbury-accumulated value drifted above the tie on 2^8 and 2^10 and LSA stopped at the
    # identity (1.741 / 2.000 x svdb) instead of 1.179 / 1.064.
    w = allrange((2,) * 8)
    r = lsa(w.gram.dense(), w.dims)
    ratios = np.array(r.errors) / svdb(w.gram)
    assert ratios[1] == pytest.approx(ratios[0], rel=1e-9)
    assert r.levels_count >= 3
    assert ratios[-1] < 1.2


def _kronecker_ratios(dims: tuple[int, ...]) -> tuple[float, float]:
    w = allrange(dims)
    bound = svdb(w.gram)
    y = gaussian_error(w.gram, kron([wavelet(d) for d in dims]).operator) / bound
    h = gaussian_error(w.gram, kron([hierarchical(d) for d in dims]).operator) / bound
    return y, h


#: A reference run of Program 4.1 as written (P = 1) on AllRange(32,32): 1.110 after 56 levels,
#: 1.098 after 65, stopped at 75 levels with 1.0885 (the paper's Example 3.1 reports 1.08).
SPEC_32X32_TRAJECTORY = {56: 1.110, 65: 1.098, 75: 1.0885}


def test_allrange_32x32() -> None:
    w = allrange((32, 32))
    bound = svdb(w.gram)
    r = lsa(w.gram.dense(), w.dims)
    ratios = np.array(r.errors) / bound
    # The reference run and ours take the same levels up to its stopping point (checked to its
    # printed precision) ...
    for levels, expected in SPEC_32X32_TRAJECTORY.items():
        assert ratios[levels - 1] == pytest.approx(expected, abs=6e-4)
    # ... but our 76th level improves (1.0881) where the reference run's was rejected: which level is
    # rejected first depends on how exact ties between mirror-image splits are broken
    # (experiments/docs/matrix-mechanism.md, tie-window table). Running longer only lowers the
    # error (checked below), so the reference run's 1.0885 stays an upper bound and the paper's
    # 1.08 is met.
    assert r.levels_count >= 75
    assert ratios[-1] <= ratios[74]
    assert 1.0 < ratios[-1] <= 1.0885 + 0.01
    assert ratios[-1] == pytest.approx(1.08, abs=0.01)
    kron_y, kron_h = _kronecker_ratios((32, 32))
    assert (kron_y, kron_h) == pytest.approx((1.819, 2.923), abs=1e-3)
    assert ratios[-1] < kron_y / 1.5


def test_allrange_16x8x8() -> None:
    w = allrange((16, 8, 8))
    bound = svdb(w.gram)
    assert bound == pytest.approx(2.535404e6, rel=1e-6)
    r = lsa(w.gram.dense(), w.dims)
    ratio = r.error / bound
    # A reference run: 1.078 (113 levels); the paper: 1.07. Under our deterministic tie rule the run stops at
    # 80 levels with 1.0924; other tie windows give 1.066-1.092 with 80-189 levels (docs/
    # experiments/matrix-mechanism.md). Asserted: within 0.03 of the paper, far below Kronecker.
    assert r.levels_count >= 40
    assert 1.0 < ratio <= 1.07 + 0.03
    kron_y, kron_h = _kronecker_ratios((16, 8, 8))
    assert (kron_y, kron_h) == pytest.approx((1.773, 3.571), abs=1e-3)
    assert ratio < kron_y / 1.5


def test_never_worse_than_identity_and_above_bound() -> None:
    for seed, dims in enumerate(((16,), (32,), (4, 4), (6, 5))):
        w = random_ranges(30, dims, seed=seed)
        r = lsa(w.gram.dense(), dims)
        ident = gaussian_error(w.gram, Identity(w.n))
        assert r.errors[0] == pytest.approx(ident, rel=1e-9)
        assert r.error <= ident * (1 + 1e-12)
        assert r.error >= svdb(w.gram) * (1 - 1e-9)


def test_equivalent_workloads_give_identical_output() -> None:
    w = random_ranges(40, (16,), seed=3)
    rows = w.rows.dense()
    perm = rows[np.random.default_rng(0).permutation(len(rows))]
    dup = np.vstack([rows, rows[:5]])
    merged = np.vstack([np.sqrt(2) * rows[:5], rows[5:]])
    base = lsa(rows.T @ rows, (16,))
    for other in (perm,):
        r = lsa(other.T @ other, (16,))
        assert _levels(r) == _levels(base)
    r_dup, r_merged = lsa(dup.T @ dup, (16,)), lsa(merged.T @ merged, (16,))
    assert _levels(r_dup) == _levels(r_merged)
    assert r_dup.error == pytest.approx(r_merged.error, rel=1e-12)


def test_level_bound_semantics() -> None:
    g = allrange_gram_1d(32)
    full = lsa(g, (32,))
    assert lsa(g, (32,), k=1).levels == []
    assert full.stop_reason == "rejected" and full.summary()["stop_reason"] == "rejected"
    assert all(b <= a * (1 + 1e-12) for a, b in zip(full.errors, full.errors[1:], strict=False))
    for k in (2, 5, 9):
        part = lsa(g, (32,), k=k)
        assert part.levels_count == k
        assert part.stop_reason == "k"
        assert _levels(part) == _levels(full)[: k - 1]
        assert part.errors == pytest.approx(full.errors[:k], rel=1e-12)


def test_allpredicate_8() -> None:
    g = allpredicate(8).gram
    r = lsa(g.dense(), (8,))
    assert 800 * (1 - 1e-9) <= r.error <= 1024 * (1 + 1e-12)


def test_ablation_modes_are_valid_strategies() -> None:
    g = allrange_gram_1d(16)
    bound = svdb(Explicit(g))
    for mode in ("best", "sequential", "all"):
        r = lsa(g, (16,), mode=mode)
        a = r.strategy().operator
        np.testing.assert_allclose(a.column_l2_squared(), r.levels_count)
        assert r.error == pytest.approx(gaussian_error(Explicit(g), a), rel=1e-8)
        assert bound <= r.error <= 16 * 17 * 18 / 6


def test_allrange_1024() -> None:
    r = lsa(allrange_gram_1d(1024), (1024,))
    ratio = r.error / svdb(allrange((1024,)).gram)
    assert 1.25 <= ratio <= 1.28
    assert ratio == pytest.approx(1.2641, abs=1e-4)
    assert (r.levels_count, r.rows_count, r.distinct_count) == (13, 3454, 2369)


@pytest.mark.slow
def test_ablation_modes_on_allrange_512_against_a_reference_run() -> None:
    """Other readings of Program 4.1's step 8 on AllRange(512): "best" and "all" reproduce a
    reference run's figures exactly; "sequential" does not (reference: 12 levels / 1816 rows /
    1.239x; experiments/docs/matrix-mechanism.md gives the readings tried). About 35 s of CPU, most
    of it in "best"."""
    g = allrange_gram_1d(512)
    bound = svdb(allrange((512,)).gram)
    best = lsa(g, (512,), mode="best")
    assert (best.levels_count, best.rows_count, best.distinct_count) == (36, 5242, 2026)
    assert best.error / bound == pytest.approx(1.072, abs=5e-4)
    every = lsa(g, (512,), mode="all")
    assert (every.levels_count, every.rows_count) == (53, 8262)
    assert every.error / bound == pytest.approx(1.056, abs=5e-4)
    seq = lsa(g, (512,), mode="sequential")
    assert (seq.levels_count, seq.rows_count, seq.distinct_count) == (21, 3041, 1587)
    assert seq.error / bound == pytest.approx(1.1376, abs=5e-4)
