"""Fuzzing the service: no request, valid or not, gets a 5xx, and every error is the one shape.

Two fuzzers, both in-process on FastAPI's test client (seconds, no network):

- schemathesis over the OpenAPI schema, valid and invalid requests for every operation (its
  ``name`` parameter made an enum of the served releases, so that requests reach the answer
  code rather than stopping at "unknown release");
- hypothesis drawing arbitrary JSON values for every attribute of every served release, in the
  POST body and in ``where``, where the schema says only "an object".
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from dpcube.serve import create_app

from .conftest import RUNS

#: Examples per operation of the OpenAPI fuzzer, and of the attribute fuzzer.
SCHEMA_EXAMPLES = 60
VALUE_EXAMPLES = 300


def assert_no_5xx_and_one_error_shape(status: int, content: bytes, what: Any) -> None:
    assert status < 500, (status, content[:300], what)
    if status >= 400:
        body = json.loads(content)
        assert list(body) == ["error"] and isinstance(body["error"], str), (status, content)
        assert body["error"] and "\n" not in body["error"], content


@pytest.fixture(scope="module")
def app(release_dirs: dict[str, Path]) -> FastAPI:
    return create_app(list(release_dirs.values()), runs=RUNS, bootstrap_seed=9, max_batch=20)


@pytest.fixture(scope="module")
def api_schema(app: FastAPI) -> Any:
    import schemathesis  # a dev dependency: missing, this test errors rather than skips

    spec = copy.deepcopy(app.openapi())
    served = sorted(app.state.served)
    for operations in spec["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] == "name":
                    parameter["schema"] = {"type": "string", "enum": served}
    schema = schemathesis.openapi.from_dict(spec)
    schema.app = app
    return schema


def test_openapi_fuzz_no_5xx_and_one_error_shape(api_schema: Any) -> None:
    import schemathesis

    # schemathesis's own pytest integration (``from_fixture``) does not run under pytest 9.2;
    # its strategies do, one hypothesis run per operation and generation mode
    operations = [result.ok() for result in api_schema.get_all_operations()]
    labels = {f"{op.method.upper()} {op.path}" for op in operations}
    assert {"POST /api/releases/{name}/answer", "GET /api/releases/{name}/table"} <= labels
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    calls = 0
    for operation in operations:
        for mode in modes:

            @settings(
                max_examples=SCHEMA_EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: Any) -> None:
                nonlocal calls
                response = case.call()
                calls += 1
                assert_no_5xx_and_one_error_shape(response.status_code, response.content, case)

            try:
                call()
            except Unsatisfiable:  # no parameter to make invalid (GET /api/health)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation
    assert calls >= len(operations) * len(modes)


# -- every attribute's constraint: arbitrary JSON -------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["F", "M", "x", "u", "GA", "*", "#1..2", "1..2", "bins"])
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["bins", "lo", "hi", "x"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def attributes(client: TestClient) -> dict[str, list[str]]:
    out = {}
    for name in client.app.state.served:  # type: ignore[attr-defined]
        described = client.get(f"/api/releases/{name}").json()
        names = [a["name"] for a in (described["schema"] or {"attributes": []})["attributes"]]
        out[name] = names or ["region", "size"]  # census: region x size
    return out


@settings(
    max_examples=VALUE_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_json_constraint_is_answered_or_refused_with_a_4xx(
    client: TestClient, attributes: dict[str, list[str]], data: st.DataObject
) -> None:
    release = data.draw(st.sampled_from(sorted(attributes)))
    names = attributes[release]
    query = data.draw(st.dictionaries(st.sampled_from([*names, "nope"]), JSON_VALUES, max_size=3))
    level = data.draw(
        st.none()
        | st.floats(min_value=0.0, max_value=1.0)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.sampled_from([1 - 2.0**-53, 1 - 2.0**-52, 2.0**-53, 2.0**-52, 5e-324])
    )
    body: dict[str, Any] = {"queries": [query]}
    if level is not None:
        body["level"] = level
    response = client.post(f"/api/releases/{release}/answer", json=body)
    assert_no_5xx_and_one_error_shape(response.status_code, response.content, body)
    where = json.dumps(query)
    response = client.get(f"/api/releases/{release}/answer", params={"where": where})
    assert_no_5xx_and_one_error_shape(response.status_code, response.content, where)
    table = client.get(f"/api/releases/{release}/table", params={"where": where, "format": "json"})
    assert_no_5xx_and_one_error_shape(table.status_code, table.content, where)
