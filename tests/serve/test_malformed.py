"""Malformed requests that once reached the answer path are refused in the one error shape:
levels whose interval cannot be computed, deep nesting, repeated JSON keys, a cuboid that names
no attribute; and ``/docs`` loads nothing from another host."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from dpcube.serve import create_app

from .conftest import RUNS
from .test_app import assert_error

ANSWER = "/api/releases/{}/answer"


@pytest.fixture(scope="module")
def client(release_dirs: dict[str, Path]) -> Iterator[TestClient]:
    app = create_app(list(release_dirs.values()), runs=RUNS, bootstrap_seed=5)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


# 0.9999999999999999 < 1, but 0.5 + level / 2 rounds to 1.0: an infinite normal quantile (was a
# 500 from statistics.NormalDist); 1e-300 and 5e-324 round 0.5 + level / 2 to 0.5 (an empty
# interval, was a 200 with lower == upper)
@pytest.mark.parametrize("level", [0.9999999999999999, 1e-300, 5e-324, 1e-17])
@pytest.mark.parametrize("name", ["cells", "cube", "grid", "census"])
def test_levels_whose_interval_cannot_be_computed_are_422(
    client: TestClient, name: str, level: float
) -> None:
    line = assert_error(
        client.post(ANSWER.format(name), json={"queries": [{}], "level": level}), 422, "level"
    )
    assert repr(level) in line and "0.9999999999999998" in line
    assert_error(client.get(ANSWER.format(name), params={"level": repr(level)}), 422, "level")
    table = client.get(f"/api/releases/{name}/table", params={"level": repr(level)})
    assert_error(table, 422, "level")


def test_the_extreme_computable_levels_answer(client: TestClient) -> None:
    for level in (0.9999999999999998, 2.3e-16, 0.5):
        response = client.post(ANSWER.format("cells"), json={"queries": [{}], "level": level})
        assert response.status_code == 200, response.text
        (answer,) = response.json()["answers"]
        assert answer["lower"] <= answer["answer"] <= answer["upper"]


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_levels_are_422(client: TestClient, text: str) -> None:
    body = b'{"queries": [{}], "level": %s}' % text.encode()
    response = client.post(
        ANSWER.format("cells"), content=body, headers={"content-type": "application/json"}
    )
    assert_error(response, 422)


def test_deep_nesting_is_422_in_the_body_and_in_where(client: TestClient) -> None:
    for depth in (40, 2000, 100_000):
        deep = "[" * depth + "]" * depth
        body = b'{"queries": [{"age": ' + deep.encode() + b"}]}"
        assert_error(
            client.post(
                ANSWER.format("cells"), content=body, headers={"content-type": "application/json"}
            ),
            422 if len(body) <= 1 << 20 else 413,
        )
    # a 2,000-deep where was a RecursionError, a 500
    where = '{"age": %s}' % ("[" * 2000 + "]" * 2000)
    line = assert_error(client.get(ANSWER.format("cells"), params={"where": where[:4096]}), 422)
    assert "deep" in line
    shallow = '{"age": %s}' % ("[" * 20 + "1" + "]" * 20)  # within the limit: the query's error
    assert_error(client.get(ANSWER.format("cells"), params={"where": shallow}), 400, "age")


def test_repeated_keys_are_refused_naming_the_key(client: TestClient) -> None:
    headers = {"content-type": "application/json"}
    for body in (
        b'{"queries": [{"sex": "F", "sex": "M"}]}',  # answered for M before
        b'{"queries": [{"loc": {"bins": [0, 1], "bins": [2, 3]}}]}',
        b'{"queries": [{}], "queries": [{"sex": "M"}]}',
        b'{"queries": [{}], "level": 0.5, "level": 0.9}',
    ):
        line = assert_error(client.post(ANSWER.format("cells"), content=body, headers=headers), 422)
        key = re.search(rb'"(\w+)": [^,]*, "\1"|"(\w+)": \[[^\]]*\], "\2"', body)
        assert key is not None and "repeats the key" in line
        assert repr((key.group(1) or key.group(2)).decode()) in line
    where = '{"sex": "F", "sex": "M"}'
    assert_error(client.get(ANSWER.format("cells"), params={"where": where}), 422, "'sex'")
    table = client.get("/api/releases/cells/table", params={"where": where})
    assert_error(table, 422, "'sex'")
    # the same constraint written once is answered
    once = client.post(ANSWER.format("cells"), json={"queries": [{"sex": "M"}]})
    assert once.status_code == 200


@pytest.mark.parametrize("cuboid", ["../../etc", "a,../../etc", "/etc/passwd", "a,nope"])
def test_a_cuboid_naming_no_attribute_is_400(client: TestClient, cuboid: str) -> None:
    # was a ValueError from tuple.index inside the table code: a 500
    response = client.get("/api/releases/cube/table", params={"cuboid": cuboid})
    line = assert_error(response, 400, "not an attribute", "the schema has a, b")
    assert "root:" not in response.text and line


def test_docs_page_loads_only_files_of_this_service(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and "SwaggerUIBundle" in page.text
    hosts = re.findall(r"""(?:src|href|url)\s*[=:]\s*["']([^"']+)["']""", page.text)
    assert hosts and all(h.startswith("/") and not h.startswith("//") for h in hosts), hosts
    assert "http://" not in page.text and "https://" not in page.text
    for asset in hosts:
        response = client.get(asset)
        assert response.status_code == 200 and response.content, asset
    assert client.get("/static/swagger-ui/LICENSE").status_code == 200
    assert client.get("/redoc").status_code == 404  # FastAPI's CDN-loaded ReDoc is off
