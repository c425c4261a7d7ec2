"""Sets of categories over HTTP: ``{"attr": {"in": [...]}}`` in a POSTed batch and
``attr in (A, B)`` in ``where=``, on cells, cuboids and census regions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dpcube.release.base import load_release
from dpcube.serve import create_app

from .conftest import RUNS


@pytest.fixture(scope="module")
def client(release_dirs: dict[str, Path]) -> Iterator[TestClient]:
    app = create_app(list(release_dirs.values()), runs=RUNS, bootstrap_seed=3, max_batch=50)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(
    ("name", "query", "where"),
    [
        ("cells", {"sex": {"in": ["F", "M"]}, "age": [1, 2]}, "sex in (F, M), age=1..2"),
        ("cube", {"b": {"in": ["u", "w"]}}, "b in (u, w)"),
        (
            "census",
            {"region": {"in": ["GA", "NY"]}, "size": [1, 2]},
            "region in (GA, NY), size=1..2",
        ),
    ],
)
def test_a_set_is_answered_as_the_release_answers_it(
    client: TestClient, release_dirs: dict[str, Path], name: str, query: dict, where: str
) -> None:
    posted = client.post(f"/api/releases/{name}/answer", json={"queries": [query, {}]})
    assert posted.status_code == 200, posted.text
    release = load_release(release_dirs[name])
    u = release.uncertainty([query, {}])
    got = posted.json()["answers"][0]
    assert got["answer"] == pytest.approx(u.answers[0])
    if got["interval_kind"] in ("exact", "bound"):
        assert (got["lower"], got["upper"]) == (
            pytest.approx(u.lower[0]),
            pytest.approx(u.upper[0]),
        )
    fetched = client.get(f"/api/releases/{name}/answer", params={"where": where})
    assert fetched.status_code == 200, fetched.text
    assert fetched.json()["answers"][0]["answer"] == pytest.approx(u.answers[0])


def test_a_bad_set_is_one_line_400(client: TestClient) -> None:
    got = client.post("/api/releases/cube/answer", json={"queries": [{"b": {"in": ["u", "u"]}}]})
    assert got.status_code == 400 and "share categories" in got.json()["error"]
    got = client.get("/api/releases/cells/answer", params={"where": "sex in (F, M"})
    assert got.status_code == 400 and "without its ')'" in got.json()["error"]


def test_a_table_inside_a_set_lists_its_categories(client: TestClient) -> None:
    got = client.get(
        "/api/releases/cube/table", params={"format": "json", "cuboid": "b", "where": "b in (u, w)"}
    )
    assert got.status_code == 200, got.text
    assert [row["b"] for row in got.json()["rows"]] == ["u", "w"]
