"""Property (c): random queries against a saved release; a valid query's answer (library and
``dpcube query``) equals the sum of the release's cells in the query's box, computed in pure
Python from the saved table; an invalid one gives a QueryError / one 'error:' line."""

from __future__ import annotations

import json
from collections import Counter
from itertools import product
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from fuzz_harness import cases, error_problems, run_cli, sandbox
from fuzz_strategies import attribute_size, categories, query_for, valid_schema_dict
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dpcube.errors import DPCubeError
from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.release.base import load_release
from dpcube.schema import Schema

NAMES = st.sampled_from(["x", "y", "zone", "é", "a b"])


def _interval(attr: dict[str, Any], c: Any) -> tuple[int, int]:
    if isinstance(c, str):
        cats = categories(attr)
        if c in cats:
            return cats.index(c), cats.index(c)
        leaves = attr["hierarchy"][c]
        return cats.index(leaves[0]), cats.index(leaves[-1])
    return int(c["bins"][0]), int(c["bins"][1])


def reference_sum(
    d: dict[str, Any], cells: dict[tuple[int, ...], int], query: dict[str, Any]
) -> int:
    ranges = []
    for attr in d["attributes"]:
        lo, hi = (
            _interval(attr, query[attr["name"]])
            if attr["name"] in query
            else (0, attribute_size(attr) - 1)
        )
        ranges.append(range(lo, hi + 1))
    return sum(cells.get(idx, 0) for idx in product(*ranges))


def _json_safe(query: dict[str, Any]) -> bool:
    return all(isinstance(k, str) for k in query)


def test_queries_answer_the_sum_of_released_cells() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=cases(150))
    @given(
        valid_schema_dict(max_attributes=3, spatial=False, names=NAMES).flatmap(
            lambda d: st.tuples(
                st.just(d), st.lists(query_for(d), min_size=1, max_size=4), st.integers(0, 2**31)
            )
        )
    )
    def prop(case: tuple[dict[str, Any], list[tuple[dict[str, Any], bool]], int]) -> None:
        d, queries, seed = case
        schema = Schema.from_dict(d)
        counts = np.random.default_rng(seed).integers(0, 5, schema.shape)
        with sandbox() as root:
            Identity(1.0).release(Histogram(schema, counts), random_state=seed).save(root / "rel")
            table = pq.read_table(next((root / "rel").glob("cells-*.parquet"))).to_pylist()
            cells = {tuple(r[a["name"]] for a in d["attributes"]): r["count"] for r in table}
            release = load_release(root / "rel")
            for query, valid in queries:
                try:
                    answer = release.answer(query)
                except DPCubeError:
                    assert not valid, f"valid query {query!r} refused"
                    seen["refused"] += 1
                    event("refused")
                    cli = run_cli(["query", str(root / "rel"), "--where", json.dumps(query)])
                    assert cli.code == 2 and not error_problems(cli), error_problems(cli)
                    continue
                assert valid, f"invalid query {query!r} was answered {answer}"
                assert answer == reference_sum(d, cells, query)
                cli = run_cli(["query", str(root / "rel"), "--where", json.dumps(query), "--json"])
                assert not error_problems(cli) and cli.code == 0, (cli, query)
                assert json.loads(cli.stdout)["answer"] == answer
                seen["answered"] += 1
                event("answered")

    prop()
    total = sum(seen.values())
    assert seen["answered"] >= 0.3 * total and seen["refused"] >= 0.1 * total, seen


def test_repeated_attribute_in_where_is_refused() -> None:
    d = {
        "attributes": [
            {"name": "x", "kind": "ordinal", "range": [0, 4], "width": 1},
            {"name": "y", "kind": "nominal", "categories": ["a", "b"]},
        ]
    }
    schema = Schema.from_dict(d)

    @settings(max_examples=cases(20))
    @given(st.sampled_from(["x=0..1, x=2..2", "y=a, y=b", "x=0..4,y=a,x=1", "y=b , y=b"]))
    def prop(where: str) -> None:
        with sandbox() as root:
            Identity(1.0).release(
                Histogram(schema, np.ones(schema.shape, int)), random_state=1
            ).save(root / "rel")
            cli = run_cli(["query", str(root / "rel"), "--where", where])
            assert cli.code == 2 and not error_problems(cli), (where, cli)

    prop()
