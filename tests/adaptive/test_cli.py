"""``dpcube release --mechanism ahp`` and ``--mechanism mwem --workload SPEC|FILE``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpcube.cli.main import main
from dpcube.release.base import load_release

SCHEMA = {
    "attributes": [
        {"name": "age", "kind": "ordinal", "range": [0, 15], "width": 1},
        {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
    ]
}


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "age": np.clip(rng.normal(5, 2, 800).astype(int), 0, 15),
            "sex": rng.choice(["F", "M"], 800),
        }
    )
    data = tmp_path / "people.csv"
    df.to_csv(data, index=False)
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    return data, schema


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def release(data: Path, schema: Path, out: Path, *extra: str) -> list[str]:
    return [
        "release", str(data), "--schema", str(schema), "--epsilon", "0.5",
        "--total-epsilon", "5", "--out", str(out), "--no-report", *extra,
    ]  # fmt: skip


def test_ahp_and_mwem_release_and_answer(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    code, _, err = run(capsys, *release(data, schema, tmp_path / "a", "--mechanism", "ahp"))
    assert code == 0, err
    queries = tmp_path / "q.csv"
    queries.write_text("age_lo,age_hi,sex\n0,4,\n5,9,F\n3,3,M\n")
    for workload in ("upto:2", "allrange", "marginals:1", str(queries)):
        out = tmp_path / f"m-{len(workload)}"
        code, _, err = run(
            capsys,
            *release(
                data,
                schema,
                out,
                "--mechanism",
                "mwem",
                "--workload",
                workload,
                "--param",
                "rounds=3",
            ),
        )
        assert code == 0, (workload, err)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["metadata"]["mechanism"] == "mwem"
    code, text, _ = run(capsys, "budget", str(data), "--json")
    assert json.loads(text)["spent"]["epsilon"] == pytest.approx(2.5)
    for name in ("a", "m-6"):
        r = load_release(tmp_path / name)
        answers = r.answer_many([{}, {"age": [0, 4]}, {"sex": "F"}])
        assert answers.shape == (3,)
        # The total is unbiased: AHP's is the sum of its groups' noisy true sums, MWEM's estimate
        # always sums to its noisy total. Six standard deviations of that noise: a single
        # Laplace draw exceeds it with probability exp(-6 sqrt 2) < 3e-4, a sum of several less.
        noise = json.loads((tmp_path / name / "manifest.json").read_text())["metadata"]["noise"]
        if "groups" in noise:
            sd = math.sqrt(2.0 * noise["groups"]) * noise["group_sum_scale"]
        else:
            sd = math.sqrt(2.0) * noise["total_scale"]
        assert abs(answers[0] - 800) <= 6 * sd
    code, text, _ = run(
        capsys, "query", str(tmp_path / "a"), "--where", "age=0..4", "--runs", "20", "--json"
    )
    assert code == 0
    assert json.loads(text)["interval_kind"] == "model"


def test_bad_workloads_and_flags_are_refused_uncharged(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, schema = dataset
    code, _, err = run(capsys, *release(data, schema, tmp_path / "ok", "--mechanism", "ahp"))
    assert code == 0, err
    for extra, message in (
        (["--mechanism", "mwem", "--workload", "allpredicate:4"], "grid"),
        (["--mechanism", "mwem", "--workload", "marginal-predicates:16x2"], "not made of range"),
        (["--mechanism", "ahp", "--workload", "allrange"], "does not use it"),
        (["--mechanism", "mwem", "--param", "rounds=0"], "rounds"),
    ):
        code, _, err = run(capsys, *release(data, schema, tmp_path / "bad", *extra))
        assert code != 0 and message in err, (extra, err)
        assert len(err.strip().splitlines()) == 1, err
    code, text, _ = run(capsys, "budget", str(data), "--json")
    assert json.loads(text)["spent"]["epsilon"] == pytest.approx(0.5)  # the good release only


def test_a_query_file_workload_is_saved_with_the_release(
    dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The bootstrap re-runs MWEM from the manifest: the workload must not depend on the file.
    data, schema = dataset
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"age": [0, 4]}, {"age": [5, 9], "sex": "F"}]))
    out = tmp_path / "m"
    args = release(data, schema, out, "--mechanism", "mwem", "--workload", str(queries))
    code, _, err = run(capsys, *args, "--param", "rounds=2")
    assert code == 0, err
    queries.unlink()
    params = json.loads((out / "manifest.json").read_text())["metadata"]["params"]
    assert params["workload"]["boxes"] == [[[0, 4], [0, 1]], [[5, 9], [0, 0]]]
    code, text, err = run(
        capsys, "query", str(out), "--where", "age=0..4", "--runs", "20", "--json"
    )
    assert code == 0, err
    assert json.loads(text)["interval_kind"] == "model"
