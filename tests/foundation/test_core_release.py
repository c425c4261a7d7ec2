"""Releases: prefix-sum answers, exact variances, save/load, atomic save, load errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import stats

import dpcube
import dpcube.release.base as release_base
from dpcube.errors import QueryError, ReleaseError
from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.random import NO_NOISE
from dpcube.privacy.samplers import discrete_laplace_variance
from dpcube.release.base import MANIFEST, REPORT, ReleaseMetadata, load_release
from dpcube.release.cells import CellRelease, box_sums, prefix_sums
from dpcube.release.variance import UniformCellVariance
from dpcube.schema import Schema

#: Significance level of the Monte-Carlo checks (fixed seeds make each run deterministic).
ALPHA = 1e-4
Z = float(stats.norm.ppf(1 - ALPHA / 2))


def grid_schema(shape: tuple[int, ...]) -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": f"a{i}", "kind": "ordinal", "range": [0, n - 1], "width": 1}
                for i, n in enumerate(shape)
            ]
        }
    )


def metadata(**kw: Any) -> ReleaseMetadata:
    return ReleaseMetadata(
        mechanism="test", params={}, epsilon=1.0, delta=None, neighbour="add_remove", **kw
    )


def brute(counts: NDArray[Any], box: list[tuple[int, int]]) -> Any:
    return counts[tuple(slice(lo, hi + 1) for lo, hi in box)].sum()


@settings(max_examples=80, deadline=None)
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=4).map(tuple),
    real=st.booleans(),
    data=st.data(),
)
def test_answer_many_equals_brute_force(
    shape: tuple[int, ...], real: bool, data: st.DataObject
) -> None:
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    counts = rng.normal(0, 10, shape) if real else rng.integers(-50, 50, shape)
    schema = grid_schema(shape)
    release = CellRelease(schema, metadata(), counts, UniformCellVariance(2.5))
    boxes = []
    for _ in range(data.draw(st.integers(1, 12))):
        box = []
        for n in shape:
            lo = data.draw(st.integers(0, n - 1))
            box.append((lo, data.draw(st.integers(lo, n - 1))))
        boxes.append(box)
    queries = [
        {
            f"a{i}": list(b)
            for i, b in enumerate(box)
            if data.draw(st.booleans()) or b != (0, shape[i] - 1)
        }
        for box in boxes
    ]
    got = release.answer_many(queries)
    want = np.array([brute(counts, box) for box in boxes], dtype=np.float64)
    if real:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    else:
        np.testing.assert_array_equal(got, want)  # integer prefix sums are exact
    cells = np.array([math.prod(hi - lo + 1 for lo, hi in box) for box in boxes])
    np.testing.assert_array_equal(release.variance_many(queries), cells * 2.5)
    assert release.answer(queries[0]) == got[0]


def test_prefix_sums_and_box_sums_examples() -> None:
    c = np.arange(24).reshape(2, 3, 4)
    p = prefix_sums(c)
    assert p.shape == (3, 4, 5) and p.dtype == np.int64 and p[-1, -1, -1] == c.sum()
    boxes = np.array([[[0, 1], [0, 2], [0, 3]], [[1, 1], [1, 2], [2, 3]]])
    assert box_sums(p, boxes).tolist() == [c.sum(), c[1, 1:3, 2:4].sum()]
    big = np.full((3,), 2**61, dtype=np.int64)
    assert box_sums(prefix_sums(big[:3] // 4), np.array([[[0, 2]]]))[0] == 3 * 2**59


def hierarchy_schema() -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
                {
                    "name": "occ",
                    "kind": "nominal",
                    "hierarchy": {"P": ["Eng", "Doc"], "S": ["Cook"]},
                },
                {
                    "name": "loc",
                    "kind": "spatial",
                    "columns": ["lat", "lon"],
                    "bbox": [0, 0, 1, 1],
                    "resolution": [3, 4],
                },
            ]
        }
    )


def test_queries_by_category_node_and_rectangle() -> None:
    s = hierarchy_schema()
    counts = np.random.default_rng(0).integers(0, 9, s.shape)
    r = Identity(1.0).release(Histogram(s, counts), random_state=NO_NOISE)
    assert r.answer({"occ": "P"}) == counts[:, 0:2].sum()
    assert r.answer({"occ": "Cook", "age": [2, 5]}) == counts[2:6, 2].sum()
    assert r.answer({"loc": {"bins": [[1, 2], [0, 1]]}}) == counts[:, :, 1:3, 0:2].sum()
    assert r.answer({}) == counts.sum()
    with pytest.raises(QueryError, match="no category 'Pilot'"):
        r.answer({"occ": "Pilot"})


def test_identity_variance_is_cells_times_cell_variance() -> None:
    s = hierarchy_schema()
    h = Histogram(s, np.zeros(s.shape, dtype=np.int64))
    for mech, cell_var in (
        (Identity(1.0), float(discrete_laplace_variance(1.0))),
        (Identity(0.5, neighbour="replace"), float(discrete_laplace_variance(4.0))),
    ):
        r = mech.release(h, random_state=1)
        queries = [{}, {"age": [0, 4]}, {"occ": "P", "loc": {"bins": [[0, 0], [1, 3]]}}]
        cells = [s.size, 5 * 3 * 12, 10 * 2 * 3]
        np.testing.assert_allclose(r.variance_many(queries), np.array(cells) * cell_var, rtol=1e-12)
        assert r.stddev({}) == pytest.approx(math.sqrt(s.size * cell_var))
        assert r.metadata.noise["cell_variance"] == pytest.approx(cell_var)
    # exact value: 2 p / (1 - p)^2 with p = exp(-1) for epsilon = 1, add_remove
    p = math.exp(-1)
    assert float(discrete_laplace_variance(1.0)) == pytest.approx(2 * p / (1 - p) ** 2, rel=1e-14)


def pmf_moments(pmf: NDArray[np.float64], z: NDArray[np.float64]) -> tuple[float, float]:
    """Variance and fourth cumulant of a symmetric pmf on the integers z."""
    var = float(np.sum(z**2 * pmf))
    return var, float(np.sum(z**4 * pmf)) - 3 * var**2


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_identity_variance_monte_carlo(noise: str) -> None:
    """20000 independent 10-cell row sums of one release: their sample variance matches the
    reported variance within Z standard errors, where Var(s^2) ~ (kappa4 + 2 sigma^4) / n for a sum
    whose fourth cumulant kappa4 and variance sigma^2 follow from the exact per-cell pmf."""
    rows, cols = 20_000, 10
    s = grid_schema((rows, cols))
    truth = np.random.default_rng(3).integers(0, 100, (rows, cols))
    mech = Identity(0.7) if noise == "laplace" else Identity(0.9, delta=1e-6, noise="gaussian")
    r = mech.release(Histogram(s, truth), random_state=12345)
    queries = [{"a0": [i, i]} for i in range(rows)]
    errors = r.answer_many(queries) - truth.sum(axis=1)
    reported = r.variance_many(queries)
    assert np.all(reported == reported[0])
    z = np.arange(-3000, 3001, dtype=np.float64)
    if noise == "laplace":
        p = math.exp(-1 / r.metadata.noise["scale"])
        pmf = (1 - p) / (1 + p) * p ** np.abs(z)
    else:
        w = np.exp(-(z**2) / (2 * r.metadata.noise["scale"] ** 2))
        pmf = w / w.sum()
    cell_var, cell_k4 = pmf_moments(pmf, z)
    assert reported[0] == pytest.approx(cols * cell_var, rel=1e-9)
    var, k4 = cols * cell_var, cols * cell_k4
    se = math.sqrt((k4 + 2 * var**2) / rows)
    assert abs(errors.var(ddof=1) - reported[0]) <= Z * se
    assert abs(errors.mean()) <= Z * math.sqrt(var / rows)


# ---------------------------------------------------------------------------------------------
# Save and load
# ---------------------------------------------------------------------------------------------


def sample_release(seed: int = 5, epsilon: float = 1.0) -> CellRelease:
    s = hierarchy_schema()
    counts = np.random.default_rng(seed).integers(0, 20, s.shape)
    r = Identity(epsilon).release(Histogram(s, counts), random_state=seed)
    assert isinstance(r, CellRelease)
    return r


QUERIES: list[dict[str, Any]] = [
    {},
    {"occ": "P"},
    {"age": [3, 7], "loc": {"bins": [[0, 1], [2, 3]]}},
]


def test_save_load_round_trip(tmp_path: Path) -> None:
    r = sample_release()
    out = r.save(tmp_path / "rel")
    assert (out / MANIFEST).exists() and (out / REPORT).exists()
    loaded = dpcube.load_release(out)
    assert isinstance(loaded, CellRelease)
    np.testing.assert_array_equal(loaded.counts, r.counts)
    assert loaded.counts.dtype == r.counts.dtype
    np.testing.assert_array_equal(loaded.answer_many(QUERIES), r.answer_many(QUERIES))
    np.testing.assert_array_equal(loaded.variance_many(QUERIES), r.variance_many(QUERIES))
    assert loaded.schema == r.schema
    m, lm = r.metadata, loaded.metadata
    for key in (
        "release_id",
        "mechanism",
        "params",
        "epsilon",
        "delta",
        "neighbour",
        "seeded",
        "noiseless",
        "created",
        "library_version",
        "noise",
        "sensitivity",
    ):
        assert getattr(lm, key) == getattr(m, key), key
    assert not lm.for_publication
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["metadata"]["for_publication"] is False
    assert manifest["metadata"]["library_version"] == dpcube.__version__
    assert "NOT FOR PUBLICATION" in (out / REPORT).read_text()
    assert sorted(p.name for p in out.glob("*.parquet")) == [manifest["tables"]["cells"]]


def test_real_valued_release_round_trip(tmp_path: Path) -> None:
    s = grid_schema((3, 4))
    counts = np.random.default_rng(0).normal(size=(3, 4))
    r = CellRelease(s, metadata(), counts, UniformCellVariance(0.5))
    loaded = load_release(r.save(tmp_path / "x"))
    assert isinstance(loaded, CellRelease)
    np.testing.assert_array_equal(loaded.counts, counts)
    assert loaded.variance({"a0": [0, 1]}) == 8 * 0.5


def test_saving_over_an_earlier_release_replaces_it(tmp_path: Path) -> None:
    d = tmp_path / "rel"
    first, second = sample_release(1), sample_release(2)
    first.save(d)
    second.save(d, overwrite=True)
    loaded = load_release(d)
    assert loaded.metadata.release_id == second.metadata.release_id
    assert len(list(d.glob("*.parquet"))) == 1  # the earlier tables were removed after the switch


class Crash(Exception):
    pass


def test_crash_mid_save_leaves_the_earlier_release_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "rel"
    first = sample_release(1)
    first.save(d)
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.name != REPORT}
    second = sample_release(2)
    real_write = release_base.write_atomic

    def crash_on_manifest(path: Path, data: bytes, **kw: Any) -> None:
        if path.name == MANIFEST:  # the new tables are on disk; the manifest switch never happens
            raise Crash
        real_write(path, data, **kw)

    monkeypatch.setattr(release_base, "write_atomic", crash_on_manifest)
    with pytest.raises(Crash):
        second.save(d, overwrite=True)
    monkeypatch.setattr(release_base, "write_atomic", real_write)  # DPCUBE_HOME stays
    assert len(list(d.glob("*.parquet"))) == 2  # the new tables were written ...
    for name, content in before.items():  # ... but nothing of the earlier release changed
        assert (d / name).read_bytes() == content, name
    loaded = load_release(d)
    assert loaded.metadata.release_id == first.metadata.release_id
    np.testing.assert_array_equal(loaded.answer_many(QUERIES), first.answer_many(QUERIES))
    # A later save completes and cleans up the orphaned tables.
    second.save(d, overwrite=True)
    assert load_release(d).metadata.release_id == second.metadata.release_id
    assert len(list(d.glob("*.parquet"))) == 1


def test_crash_while_writing_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "rel"
    first = sample_release(1)
    first.save(d)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise Crash

    import pyarrow.parquet as pq  # save() imports it on use (dpcube query never writes)

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(Crash):
        sample_release(2).save(d, overwrite=True)
    monkeypatch.undo()
    assert load_release(d).metadata.release_id == first.metadata.release_id


def test_crash_mid_save_leaves_the_earlier_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "rel"
    sample_release(1).save(d)
    report = (d / REPORT).read_text()
    real_write = release_base.write_atomic

    def crash_on_manifest(path: Path, data: bytes, **kw: Any) -> None:
        if path.name == MANIFEST:
            raise Crash
        real_write(path, data, **kw)

    monkeypatch.setattr(release_base, "write_atomic", crash_on_manifest)
    with pytest.raises(Crash):
        sample_release(2).save(d, overwrite=True)
    assert (d / REPORT).read_text() == report


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ReleaseError, match=r"is not a dpcube release \(no manifest.json\)"):
        load_release(tmp_path / "missing")
    d = tmp_path / "empty"
    d.mkdir()
    with pytest.raises(ReleaseError, match=r"no manifest\.json"):
        load_release(d)
    (d / MANIFEST).write_text("{broken")
    with pytest.raises(ReleaseError, match="is not valid JSON"):
        load_release(d)
    (d / MANIFEST).write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ReleaseError, match="not a dpcube release manifest"):
        load_release(d)
    good = sample_release().save(tmp_path / "good")
    manifest = json.loads((good / MANIFEST).read_text())
    manifest["kind"] = "hologram"
    (good / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ReleaseError, match="unknown release kind 'hologram'"):
        load_release(good)


def test_cell_release_checks_shape() -> None:
    with pytest.raises(ReleaseError, match=r"do not match the schema's \(2, 3\)"):
        CellRelease(grid_schema((2, 3)), metadata(), np.zeros((3, 2)))
    r = CellRelease(grid_schema((2, 3)), metadata(), np.zeros((2, 3)))
    assert np.isnan(r.variance({}))  # no variance model: unknown, not zero
