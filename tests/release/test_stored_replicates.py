"""Bootstrap replicates stored with a release: a bootstrap answer from a saved release
re-runs nothing, the replicates are verified like every table, and they agree with the ones the
same seed computes in memory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dpcube
from dpcube import Histogram
from dpcube.cli.main import main
from dpcube.errors import ReleaseError
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.mechanisms.census.mechanism import CensusHierarchy
from dpcube.mechanisms.census.table import GroupSizeTable
from dpcube.mechanisms.spatial._common import spatial_case_schema
from dpcube.mechanisms.spatial.trees import KDTree
from dpcube.release import uncertainty
from dpcube.release.base import manifest_integrity
from dpcube.release.uncertainty import answer_uncertainty, bootstrap_replicates, store_bootstrap

QUERIES = [{"p": {"bins": [[0, 7], [2, 12]]}}, {"p": {"bins": [[5, 15], [0, 15]]}}, {}]


def _points(side: int) -> np.ndarray:
    rng = np.random.default_rng(4)  # synthetic data, not noise
    pts = np.clip(rng.normal(side / 2, side / 5, size=(4000, 2)), 0, side - 1).astype(np.int64)
    F = np.zeros((side, side), dtype=np.int64)
    np.add.at(F, (pts[:, 0], pts[:, 1]), 1)
    return F


def _kdtree_release() -> dpcube.Release:
    hist = Histogram(spatial_case_schema(16, 16), _points(16))
    return KDTree(1.0).release(hist, random_state=3, account=False)


def test_stored_replicates_answer_like_the_computed_ones_without_rerunning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = _kdtree_release()
    in_memory = answer_uncertainty(release, QUERIES, intervals="model", runs=24, seed=11)
    store_bootstrap(release, runs=24, seed=11)
    release.save(tmp_path / "rel")
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    assert manifest["bootstrap"]["runs"] == 24 and manifest["bootstrap"]["seed"] == 11
    assert "bootstrap.leaves" in manifest["tables"] and "bootstrap.leaves" in manifest["sha256"]

    def no_rerun(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stored bootstrap must not re-run the mechanism")

    monkeypatch.setattr(uncertainty, "rerun", no_rerun)
    loaded = dpcube.load_release(tmp_path / "rel")
    u = answer_uncertainty(loaded, QUERIES, intervals="model")  # runs=None: the stored 24
    assert u.kind == "bootstrap" and u.runs == 24
    # The same seed and the same generator calls: the same replicates, so the same intervals.
    np.testing.assert_allclose(u.lower, in_memory.lower)
    np.testing.assert_allclose(u.upper, in_memory.upper)
    _truth, reps = bootstrap_replicates(loaded)
    assert len(reps) == 24 and type(reps[0]) is type(loaded)
    # The replicates are re-runs, not copies of the release (they differ from it and each other).
    assert not np.array_equal(reps[0].answer_many(QUERIES), reps[1].answer_many(QUERIES))
    # Asking for another number of runs computes them (and so would re-run).
    with pytest.raises(AssertionError, match="must not re-run"):
        answer_uncertainty(loaded, QUERIES, intervals="model", runs=30)


def test_tampered_replicates_are_refused(tmp_path: Path) -> None:
    release = _kdtree_release()
    store_bootstrap(release, runs=20, seed=1)
    release.save(tmp_path / "rel")
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    path = tmp_path / "rel" / manifest["tables"]["bootstrap.leaves"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ReleaseError, match="does not match the SHA-256"):
        dpcube.load_release(tmp_path / "rel")


def test_census_replicates_share_the_hierarchy_table(tmp_path: Path) -> None:
    h = RegionHierarchy.from_parents({"A": "US", "B": "US"})
    leaves = np.array([[40, 20, 10], [30, 25, 5]], dtype=np.int64)  # synthetic group sizes
    table = GroupSizeTable(h, h.aggregate(leaves), public_groups=True)
    release = CensusHierarchy(1.0, method="cdp").release(table, random_state=2, account=False)
    store_bootstrap(release, runs=20, seed=5)
    release.save(tmp_path / "rel")
    manifest = json.loads((tmp_path / "rel" / "manifest.json").read_text())
    assert "regions" in manifest["bootstrap"]["shared"]
    assert not any(n == "bootstrap.regions" for n in manifest["tables"])
    loaded = dpcube.load_release(tmp_path / "rel")
    q = [{"region": "A", "size": [1, 2]}]
    u = answer_uncertainty(loaded, q, intervals="model")
    assert u.kind == "bootstrap" and u.runs == 20 and u.lower[0] <= u.answers[0] <= u.upper[0]


def _write_points(path: Path) -> None:
    rng = np.random.default_rng(0)  # synthetic data
    lat = rng.uniform(0, 1, 500)
    lon = rng.uniform(0, 1, 500)
    path.write_text(
        "lat,lon\n" + "".join(f"{a:.5f},{b:.5f}\n" for a, b in zip(lat, lon, strict=True))
    )


def test_cli_release_stores_replicates_and_refuses_few(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "pts.csv"
    _write_points(data)
    schema = tmp_path / "s.json"
    schema.write_text(
        json.dumps(
            {
                "attributes": [
                    {
                        "name": "p",
                        "kind": "spatial",
                        "columns": ["lat", "lon"],
                        "bbox": [0, 0, 1, 1],
                        "resolution": [16, 16],
                    }
                ]
            }
        )
    )
    common = ["release", str(data), "--schema", str(schema), "--epsilon", "1", "--seed", "1",
              "--dataset", "pts", "--total-epsilon", "10"]  # fmt: skip
    refused = main(
        [*common, "--mechanism", "kdtree", "--bootstrap-runs", "5", "--out", str(tmp_path / "r0")]
    )
    assert refused == 2 and "--bootstrap-runs must be 0" in capsys.readouterr().err
    assert not (tmp_path / "r0").exists()
    code = main(
        [*common, "--mechanism", "kdtree", "--bootstrap-runs", "20", "--out", str(tmp_path / "r1")]
    )
    assert code == 0
    manifest = json.loads((tmp_path / "r1" / "manifest.json").read_text())
    assert manifest["bootstrap"]["runs"] == 20
    capsys.readouterr()
    where = ["--where", "p=#0..7:0..7", "--json"]
    assert main(["query", str(tmp_path / "r1"), *where, "--intervals", "model"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["error_kind"] == "bootstrap" and out["lower"] <= out["answer"] <= out["upper"]
    assert out["trusted"] is False and out["interval_kind"] == "model"
    # by default the interval is a bound from the leaves' own noisy counts: trusted
    assert main(["query", str(tmp_path / "r1"), *where]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trusted"] is True and out["interval_kind"] == "bound"
    assert out["lower"] <= out["answer"] <= out["upper"]
    # A release whose error is exact: the flag has no effect and says so.
    code = main(
        [
            *common,
            "--mechanism",
            "identity",
            "--bootstrap-runs",
            "20",
            "--out",
            str(tmp_path / "r2"),
        ]
    )
    assert code == 0 and "--bootstrap-runs has no effect" in capsys.readouterr().err


def test_replicates_of_an_older_bootstrap_world_are_recomputed_not_mixed(tmp_path: Path) -> None:
    release = _kdtree_release()
    store_bootstrap(release, runs=20, seed=5)
    release.save(tmp_path / "rel")
    path = tmp_path / "rel" / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["bootstrap"]["world"] == "clustered-cascade-1"
    assert dpcube.load_release(tmp_path / "rel").stored_replicates is not None
    # A release saved before the world was versioned (its replicates were drawn in the even
    # world): they must not be scored against today's clustered truth.
    del manifest["bootstrap"]["world"]
    manifest["integrity"] = manifest_integrity(manifest)  # as that dpcube would have saved it
    path.write_text(json.dumps(manifest))
    old = dpcube.load_release(tmp_path / "rel")
    assert old.stored_replicates is None
    assert answer_uncertainty(old, QUERIES, intervals="model", runs=20, seed=5).kind == "bootstrap"
