"""The command line: ``dpcube release --mechanism htf`` with user-level bounding, ``dpcube
query``, and ``python -m experiments.spatial --quick`` on synthetic data."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcube.cli.main import main
from dpcube.release.base import load_release


@pytest.fixture
def points(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    uid = np.repeat(np.arange(30), 20)
    df = pd.DataFrame(
        {"uid": uid, "lat": rng.uniform(0, 1, uid.size), "lng": rng.uniform(0, 1, uid.size)}
    )
    data = tmp_path / "points.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "loc.yaml"
    schema.write_text(
        "attributes:\n  - name: loc\n    kind: spatial\n    columns: [lat, lng]\n"
        "    bbox: [0, 0, 1, 1]\n    resolution: [16, 16]\n"
    )
    return data, schema


def test_release_htf_user_level_and_query(
    points: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = points
    common = [
        "--schema",
        str(schema),
        "--epsilon",
        "1",
        "--ledger-dir",
        str(tmp_path / "l"),
        "--total-epsilon",
        "10",
    ]
    args = [
        "release",
        str(data),
        "--mechanism",
        "htf",
        "--out",
        str(tmp_path / "r"),
        "--param",
        "theta_count=5",
    ]
    assert main(args + common + ["--user-column", "uid", "--max-points-per-user", "4"]) == 0
    release = load_release(tmp_path / "r")
    assert release.metadata.params["user_bound"] == 4
    assert release.metadata.report == {"privacy_unit": "user (at most 4 points)"}
    err = capsys.readouterr().err
    assert "NOT PRIVATE, DO NOT PUBLISH" in err and f'"rows_dropped_by_bound": {30 * 16}' not in err
    assert f"rows_dropped_by_bound={30 * 16}" in err
    assert main(["query", str(tmp_path / "r"), "--where", "loc=#0..7:0..15"]) == 0
    assert capsys.readouterr().out.strip()
    assert (
        main(
            [
                "release",
                str(data),
                "--mechanism",
                "kdtree",
                "--param",
                "height=6",
                "--out",
                str(tmp_path / "k"),
                *common,
            ]
        )
        == 0
    )
    assert load_release(tmp_path / "k").metadata.mechanism == "kdtree"


def test_spatial_experiment_quick(tmp_path: Path) -> None:
    from experiments.spatial import main as spatial_main

    out = tmp_path / "bench"
    code = spatial_main(
        [
            "--out",
            str(out),
            "--quick",
            "--reps",
            "1",
            "--queries",
            "200",
            "--figures",
            "3,6,t25",
            "--data-dir",
            str(tmp_path / "none"),
        ]
    )
    assert code == 0
    rows = list(csv.DictReader(open(out / "summary.csv")))
    methods = {r["method"] for r in rows}
    assert {
        "HTF",
        "UG",
        "AG",
        "KdTree (geo)",
        "KdTree (uniform)",
        "Singular",
        "Uniform",
        "PrivTree",
    } <= methods
    assert all(float(r["mre"]) >= 0 for r in rows)
    assert (
        (out / "fig3.png").exists()
        and (out / "fig6.png").exists()
        and (out / "heatmap.png").exists()
    )
    assert "| target | result | evidence |" in (out / "checks.md").read_text()
    t25 = (
        out / "t25.md"
    ).read_text()  # the reproduction targets on the synthetic sigma = 100 / 20 sets
    assert "best geometric quadtree" in t25 and t25.count("PASS") + t25.count("FAIL") == 4


def test_real_dpbench_grid_and_geolife(data_dir: Path) -> None:
    """HTF on the Gowalla check-ins grid (256 x 256, 6.4M points): heights from the rule, a tiling,
    every path spends epsilon; GeoLife points are counted through the engine."""
    from dpcube import Histogram
    from dpcube.mechanisms.spatial import HTF
    from dpcube.mechanisms.spatial._common import spatial_case_schema
    from experiments.spatial import geolife_dataset

    F = np.rint(np.load(data_dir / "dpbench" / "2D" / "checkin_256_256.npy")).astype(np.int64)
    r = HTF(0.1).release(Histogram(spatial_case_schema(256, 256), F), random_state=1)
    assert r.metadata.noise["height"] == 15
    area = (r.rects[:, 1] - r.rects[:, 0]) * (r.rects[:, 3] - r.rects[:, 2])
    assert area.sum() == 256 * 256
    np.testing.assert_allclose(r.budget_paths, 0.1, rtol=1e-12)
    loaded = geolife_dataset(data_dir, side=64)
    assert loaded is not None and loaded[0].total == 217_653
    core = geolife_dataset(data_dir, side=64, window="core")  # Beijing: 96.4 % of the points
    assert core is not None and core[0].total == 209_876
    assert core[0].report["dropped"] == {"p": 217_653 - 209_876}


def test_geolife_core_window_drops_points_outside_beijing(tmp_path: Path) -> None:
    """The ``core`` window bins over GEOLIFE_CORE_BBOX and drops (and counts) what lies outside."""
    import gzip

    from experiments.spatial import GEOLIFE_CORE_BBOX, geolife_dataset

    (tmp_path / "geolife").mkdir()
    rows = ["lat,lng,datetime,uid", "39.9,116.3,2008-10-23 05:53:05,001",
            "39.61,116.79,2008-10-23 05:53:06,001", "22.5,114.1,2008-10-24 05:53:05,002"]  # fmt: skip
    with gzip.open(tmp_path / "geolife" / "geolife_sample.txt.gz", "wt") as f:
        f.write("\n".join(rows) + "\n")
    whole = geolife_dataset(tmp_path, side=8)
    core = geolife_dataset(tmp_path, side=8, window="core")
    assert whole is not None and core is not None
    assert whole[0].total == 3 and core[0].total == 2
    assert core[0].report["dropped"] == {"p": 1}
    assert core[1][1].attributes[0].to_dict()["bbox"] == list(GEOLIFE_CORE_BBOX)
    with pytest.raises(ValueError, match="window"):
        geolife_dataset(tmp_path, side=8, window="city")
