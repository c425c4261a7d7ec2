"""The query service: every endpoint on a release of each kind, answers equal
to the release's own in process, and every malformed request a 4xx ``{"error": one line}``."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from dpcube.errors import UsageError
from dpcube.release.base import load_release
from dpcube.serve import create_app

from .conftest import RUNS

SEED = 11
QUERIES: dict[str, list[dict[str, Any]]] = {
    "cells": [{"age": [1, 2]}, {"sex": "F", "income": [100, 499]}, {}, {"age": {"bins": [0, 0]}}],
    "cube": [{"a": "x"}, {"b": ["u", "v"]}, {}, {"a": "y", "b": "w"}],
    "grid": [{"loc": [[10.0, 12.0], [20.0, 24.0]]}, {}, {"loc": [[13.0, 14.0], [27.0, 28.0]]}],
    "census": [{"region": "GA", "size": [1, 2]}, {"region": "NY", "size": 3}, {}],
}


@pytest.fixture(scope="module")
def client(release_dirs: dict[str, Path]) -> Iterator[TestClient]:
    app = create_app(list(release_dirs.values()), runs=RUNS, bootstrap_seed=SEED, max_batch=50)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def assert_error(response: Any, status: int, *fragments: str) -> str:
    """A refused request: the status, the one error shape, one line, no traceback."""
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and isinstance(body["error"], str)
    line: str = body["error"]
    assert line and "\n" not in line and "Traceback" not in response.text
    for fragment in fragments:
        assert fragment in line
    return line


def test_list_releases_by_folder_name(client: TestClient, release_dirs: dict[str, Path]) -> None:
    listed = client.get("/api/releases").json()["releases"]
    assert [r["name"] for r in listed] == list(release_dirs)
    by_name = {r["name"]: r for r in listed}
    assert by_name["cells"]["kind"] == "cells" and by_name["cells"]["mechanism"] == "identity"
    assert by_name["census"]["kind"] == "census_hierarchy"
    assert {r["error_kind"] for r in listed} == {"exact", "bound"}  # census, grid: bounds
    for name, row in by_name.items():
        meta = load_release(release_dirs[name]).metadata
        assert (row["epsilon"], row["neighbour"], row["release_id"]) == (
            meta.epsilon,
            meta.neighbour,
            meta.release_id,
        )
        assert row["for_publication"] is False  # the test releases are seeded
    assert client.get("/api/health").json() == {"status": "ok", "releases": 4}


def test_describe_gives_schema_widgets_and_structure(client: TestClient) -> None:
    cells = client.get("/api/releases/cells").json()
    age, income, sex = cells["schema"]["attributes"]
    assert age["labels"] == ["0", "1", "2", "3"] and age["value_range"] == [0.0, 3.0]
    assert income["bin_edges"] == [0.0, 100.0, 500.0] and income["bins"] == [2]
    assert sex["labels"] == ["F", "M"]
    assert "NOT FOR PUBLICATION" in cells["not_for_publication"]
    assert cells["guarantee"]["neighbour"] == "add_remove"
    assert cells["metadata"]["seeded"] is True and cells["report"] is False
    cube = client.get("/api/releases/cube").json()
    assert cube["cuboids"] == [[], ["a"], ["b"], ["a", "b"]]
    census = client.get("/api/releases/census").json()
    regions = {r["name"]: r for r in census["hierarchy"]["regions"]}
    assert regions["GA"]["parent"] == "*" and regions["*"]["parent"] is None
    # census intervals are bounds from the noisy measurements: no bootstrap replicates
    assert census["schema"] is None and census["bootstrap_runs"] is None
    grid = client.get("/api/releases/grid").json()
    assert grid["bounds"]["loc"] == {"bbox": [10.0, 20.0, 14.0, 28.0], "resolution": [4, 8]}
    assert grid["leaves"] == 4


@pytest.mark.parametrize("name", list(QUERIES))
def test_answers_equal_the_release_in_process(
    client: TestClient, release_dirs: dict[str, Path], name: str
) -> None:
    queries = QUERIES[name]
    got = client.post(f"/api/releases/{name}/answer", json={"queries": queries, "level": 0.9})
    assert got.status_code == 200, got.text
    body = got.json()
    # the same release read again, its bootstrap seeded alike: the same replicates, so equal
    release = load_release(release_dirs[name])
    kind = body["error_kind"]
    runs = RUNS if kind == "bootstrap" else None
    seed = SEED if kind == "bootstrap" else None
    u = release.uncertainty(queries, level=0.9, runs=runs, seed=seed)
    assert kind == u.kind and body["level"] == 0.9 and len(body["answers"]) == len(queries)
    for i, a in enumerate(body["answers"]):
        assert a["answer"] == u.answers[i]
        for key, values in (("lower", u.lower), ("upper", u.upper), ("stddev", u.stddev)):
            if np.isnan(values[i]):  # a bound interval has no error sd
                assert a[key] is None
            else:
                assert a[key] == pytest.approx(values[i], rel=1e-12, abs=1e-12)
        noise = u.noise_sd[i]
        assert a["noise_sd"] == (None if np.isnan(noise) else pytest.approx(noise))
        assert a["error_kind"] == kind
        # every answer says whether its interval is valid by construction, what it is and why
        assert a["trusted"] is u.trusted(i) and a["interval_kind"] == str(u.interval_kind[i])
        assert a["interval_reason"] == u.why(i)
    assert body["bootstrap_runs"] == runs
    assert "NOT FOR PUBLICATION" in body["not_for_publication"]


def test_get_answer_takes_the_cli_where_syntax(client: TestClient) -> None:
    post = client.post(
        "/api/releases/cells/answer",
        json={"queries": [{"age": [1, 2], "sex": "F", "income": {"bins": [1, 1]}}]},
    ).json()
    get = client.get(
        "/api/releases/cells/answer", params={"where": "age=1..2, sex=F, income=#1"}
    ).json()
    assert get == post
    census = client.get("/api/releases/census/answer", params={"where": "region=GA, size=1..2"})
    assert census.json()["answers"][0]["answer"] == (
        client.post("/api/releases/census/answer", json={"queries": [QUERIES["census"][0]]})
        .json()["answers"][0]["answer"]
    )  # fmt: skip
    assert_error(
        client.get("/api/releases/cells/answer", params={"where": "age"}),
        400,
        "must look like attribute=value",
    )


def test_malformed_requests_are_one_line_4xx(client: TestClient) -> None:
    url = "/api/releases/cells/answer"
    headers = {"content-type": "application/json"}
    assert_error(client.post(url, content=b"{bad", headers=headers), 422, "not valid JSON")
    assert_error(client.post(url, content=b"[1, 2]", headers=headers), 422, "JSON object")
    assert_error(client.post(url, json={"queries": [{"agex": 1}]}), 400, "queries[0]", "agex")
    assert_error(
        client.post(url, json={"queries": [{}, {"age": [1, 9]}]}), 400, "queries[1]", "0..3"
    )
    assert_error(client.post(url, json={"queries": [{"sex": "X"}]}), 400, "queries[0]")
    assert_error(client.post(url, json={"queries": [{"age": "old"}]}), 400, "queries[0]")
    assert_error(client.post(url, json={"queries": [{"age": [[1], {}]}]}), 400, "queries[0]")
    assert_error(client.post(url, json={"queries": [1]}), 422, "queries.0")
    assert_error(client.post(url, json={"queries": "age=1"}), 422, "queries")
    assert_error(client.post(url, json={"queries": [{}], "level": 1.0}), 422, "level")
    assert_error(client.post(url, json={"queries": [{}], "level": "high"}), 422, "level")
    assert_error(client.post(url, json={"queries": [{}], "extra": 1}), 422, "extra")
    assert_error(client.post(url, json={}), 422, "queries")
    assert_error(client.post(url, json={"queries": [{}] * 51}), 413, "51 queries", "limit is 50")
    assert_error(
        client.post("/api/releases/census/answer", json={"queries": [{"region": "XX"}]}),
        400,
        "queries[0]",
        "unknown region",
    )
    assert_error(
        client.post("/api/releases/census/answer", json={"queries": [{"size": [[1], 2]}]}),
        400,
        "queries[0]",
    )
    assert_error(client.post("/api/releases/nope/answer", json={"queries": []}), 404, "nope")
    assert_error(client.get("/api/releases/nope"), 404, "unknown release 'nope'", "cells")
    assert_error(client.get("/api/releases/cells/answer?level=2"), 422, "level")
    assert_error(client.delete("/api/releases/cells"), 405)
    assert_error(client.get("/api/nothing"), 404)


@pytest.mark.parametrize(
    "path",
    [
        "/api/releases/..%2F..%2Fetc%2Fpasswd",
        "/api/releases/..%2Fcells/answer",
        "/api/releases/%2E%2E/report",
        "/api/releases/cells%2F..%2F..%2Fmanifest.json/report",
        "/static/..%2F..%2Fserved.py",
        "/static/../app.py",
        "/static/%2e%2e/app.py",
    ],
)
def test_path_tricks_reach_no_file(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert "import" not in response.text and "root:" not in response.text
    assert_error(response, 404)


def test_body_limits_refuse_before_parsing(release_dirs: dict[str, Path]) -> None:
    app = create_app([release_dirs["cells"]], max_body_bytes=200)
    with TestClient(app, raise_server_exceptions=False) as c:
        small = {"queries": [{"age": [0, 1]}]}
        assert c.post("/api/releases/cells/answer", json=small).status_code == 200
        big = {"queries": [{"age": [0, 1]}] * 20}  # 340 bytes
        assert_error(c.post("/api/releases/cells/answer", json=big), 413, "200 bytes")

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
            yield b'{"queries": ['
            for _ in range(30):
                yield b'{"age": [0, 1]},'
            yield b"{}]}"

        response = c.post(
            "/api/releases/cells/answer",
            content=chunks(),
            headers={"content-type": "application/json"},
        )
        assert_error(response, 413)


def test_an_unexpected_error_is_a_json_500_without_traceback(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = client.app.state.served["cells"]  # type: ignore[attr-defined]

    def broken(queries: Any, level: float) -> Any:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(served, "answer", broken)
    line = assert_error(
        client.post("/api/releases/cells/answer", json={"queries": [{}]}), 500, "RuntimeError"
    )
    assert "boom" not in line  # the message stays in the server log


def test_tables_as_csv_parquet_and_json(client: TestClient, release_dirs: dict[str, Path]) -> None:
    expected = load_release(release_dirs["cells"]).to_pandas(0.8)
    response = client.get("/api/releases/cells/table", params={"format": "csv", "level": 0.8})
    assert response.status_code == 200
    assert response.headers["content-disposition"] == 'attachment; filename="cells.csv"'
    got = pd.read_csv(io.StringIO(response.text), dtype={"age": str})
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    parquet = client.get("/api/releases/cube/table", params={"format": "parquet", "cuboid": "b"})
    assert parquet.headers["content-disposition"].endswith('filename="cube-b.parquet"')
    table = pq.read_table(io.BytesIO(parquet.content))
    cube = load_release(release_dirs["cube"])
    assert table.column("estimate").to_pylist() == cube.to_pandas(cuboid="b").estimate.tolist()
    rows = client.get("/api/releases/census/table", params={"format": "json"}).json()
    # census answers carry the noise-only sd of M_DP's noise (a number, labelled as noise only)
    assert rows["error_kind"] == "bound" and rows["rows"][0]["noise_sd"] > 0
    assert rows["rows"][0]["trusted"] is True and rows["rows"][0]["interval_kind"] == "bound"
    census = load_release(release_dirs["census"])
    assert len(rows["rows"]) == census.hierarchy.size * census.max_size  # type: ignore[attr-defined]
    where = client.get(
        "/api/releases/cells/table", params={"format": "json", "where": "sex=F"}
    ).json()
    assert {r["sex"] for r in where["rows"]} == {"F"} and len(where["rows"]) == 8
    assert_error(client.get("/api/releases/cube/table"), 400, "one table per published cuboid")
    assert_error(client.get("/api/releases/cells/table", params={"format": "xlsx"}), 422)
    assert_error(client.get("/api/releases/cells/table", params={"cuboid": "a"}), 400, "cuboid")


def test_report_served_only_from_its_fixed_file(tmp_path: Path) -> None:
    from dpcube import Histogram, Identity

    from .conftest import CELL_SCHEMA

    directory = (
        Identity(1.0)
        .release(Histogram(CELL_SCHEMA, np.ones((4, 2, 2))), random_state=1)
        .save(tmp_path / "rel")
    )
    with TestClient(create_app([directory]), raise_server_exceptions=False) as c:
        assert_error(c.get("/api/releases/rel/report"), 404, "no HTML report")
        (directory / "report.html").write_text("<h1>report</h1>")
        response = c.get("/api/releases/rel/report")
        assert response.status_code == 200 and response.text == "<h1>report</h1>"
        assert response.headers["content-type"].startswith("text/html")
        assert c.get("/api/releases/rel").json()["report"] is True


def test_duplicate_folder_names_are_refused(release_dirs: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    other = tmp_path / "elsewhere" / "cells"
    shutil.copytree(release_dirs["cells"], other)
    with pytest.raises(UsageError, match="two releases are named 'cells'"):
        create_app([release_dirs["cells"], other])


def test_explorer_static_and_openapi(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "/api/releases" in page.text
    assert client.get("/static/explorer.html").text == page.text
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    assert {
        "/api/releases",
        "/api/releases/{name}",
        "/api/releases/{name}/answer",
        "/api/releases/{name}/table",
        "/api/releases/{name}/report",
    } <= set(spec["paths"])
    body = spec["paths"]["/api/releases/{name}/answer"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert "examples" in schema and set(schema["properties"]) == {"queries", "level"}


def test_overlapping_widens_off_edge_ranges_and_says_so(client: TestClient) -> None:
    off_edge = {"where": "income=50..499"}
    assert_error(client.get("/api/releases/cells/answer", params=off_edge), 400, "inside")
    got = client.get("/api/releases/cells/answer", params={**off_edge, "overlapping": "true"})
    assert got.status_code == 200 and got.json()["covered"] == {"income": "0..499"}
    whole = client.post("/api/releases/cells/answer", json={"queries": [{}]}).json()
    assert got.json()["answers"][0]["answer"] == whole["answers"][0]["answer"]  # both bins
    table = client.get(
        "/api/releases/cells/table",
        params={"format": "json", "where": "income=50..99", "overlapping": "true"},
    ).json()
    assert {r["income"] for r in table["rows"]} == {"[0, 100)"}
    assert_error(
        client.get("/api/releases/census/answer", params={"where": "size=1", "overlapping": 1}),
        400,
        "overlapping applies to releases with a schema",
    )


def test_table_row_limit_counts_rows_before_building(release_dirs: dict[str, Path]) -> None:
    app = create_app(list(release_dirs.values()), runs=RUNS, max_table_rows=8)
    served = app.state.served
    cases = [
        ("cells", None, {}), ("cells", None, {"sex": "F"}), ("cells", None, {"age": [0, 1]}),
        ("cube", ["b"], {}), ("cube", ["a", "b"], {"a": "x"}), ("grid", None, {}),
        ("grid", None, {"loc": {"bins": [[0, 1], [0, 3]]}}), ("census", None, {}),
    ]  # fmt: skip
    for name, cuboid, where in cases:  # the count is the table's own number of rows
        release = served[name].release
        table = release.to_arrow(cuboid=cuboid, runs=RUNS) if not where else None
        if table is None:
            from dpcube.release.tables import labelled_table

            table = labelled_table(release, cuboid=cuboid, where=where, runs=RUNS)
        assert served[name].table_rows(cuboid, where) == table.num_rows, (name, cuboid, where)
    with TestClient(app, raise_server_exceptions=False) as c:
        assert_error(c.get("/api/releases/cells/table"), 413, "16 rows", "8")
        assert c.get("/api/releases/cells/table", params={"where": "sex=F"}).status_code == 200


def test_loopback_service_answers_loopback_host_names_only(
    release_dirs: dict[str, Path],
) -> None:
    from dpcube.serve.cli import LOOPBACK_NAMES

    app = create_app([release_dirs["cells"]], allowed_hosts=LOOPBACK_NAMES)
    with TestClient(app, raise_server_exceptions=False) as c:
        for host in ("127.0.0.1:8000", "localhost", "[::1]:8000"):
            assert c.get("/api/health", headers={"host": host}).status_code == 200
        for host in ("evil.example:8000", "127.0.0.1.evil.example", ""):
            refused = c.get("/api/releases", headers={"host": host})
            assert_error(refused, 400, "is not served here")


def test_no_error_estimate_is_null_never_nan(tmp_path: Path) -> None:
    from dpcube import Histogram, Identity
    from dpcube.privacy.random import NO_NOISE

    from .conftest import CELL_SCHEMA

    directory = (
        Identity(1.0)
        .release(Histogram(CELL_SCHEMA, np.ones((4, 2, 2))), random_state=NO_NOISE)
        .save(tmp_path / "exact")
    )
    with TestClient(create_app([directory]), raise_server_exceptions=False) as c:
        response = c.post("/api/releases/exact/answer", json={"queries": [{}]})
        assert "NaN" not in response.text  # not valid JSON; null instead
        (answer,) = response.json()["answers"]
        assert answer["answer"] == 16.0 and answer["error_kind"] == "none"
        assert answer["lower"] is None and answer["upper"] is None and answer["stddev"] is None
        assert "noise switched off" in response.json()["not_for_publication"]
        table = c.get("/api/releases/exact/table", params={"format": "json"})
        assert "NaN" not in table.text and table.json()["rows"][0]["lower"] is None


def test_favicon_is_an_empty_answer_not_an_error(client: TestClient) -> None:
    # a browser asks for /favicon.ico on every page; a 404 there would log a console error
    reply = client.get("/favicon.ico")
    assert reply.status_code == 204 and reply.content == b""
