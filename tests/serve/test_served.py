"""The answering path of the service: remembered constraints give the same boxes and errors as
the schema, and the few-box path of ``box_sums`` the same sums as the corner-by-corner one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcube.errors import QueryError
from dpcube.linalg.summed_area import FEW_BOXES, box_sums, prefix_sums
from dpcube.schema import Schema
from dpcube.serve.served import RememberingAttribute, remembering_schema

from .conftest import CELL_SCHEMA, RUNS


def test_remembered_constraints_give_the_schemas_boxes_and_errors() -> None:
    memo = remembering_schema(CELL_SCHEMA)
    queries = [
        {"age": [1, 2]}, {"age": [1, 2], "sex": "M"}, {"income": {"bins": [1, 1]}},
        {"age": [1.0, 2.0]}, {}, {"sex": ["F", "M"]}, {"age": {"bins": [0, 3]}},
    ]  # fmt: skip
    for _ in range(2):  # the second round is answered from the memo
        assert [memo.box(q) for q in queries] == [CELL_SCHEMA.box(q) for q in queries]
    for bad in ({"age": [1, 9]}, {"age": True}, {"sex": "X"}, {"agex": 1}):
        for _ in range(2):  # errors are not remembered: the same error every time
            with pytest.raises(QueryError) as got:
                memo.box(bad)
            with pytest.raises(QueryError) as expected:
                CELL_SCHEMA.box(bad)
            assert str(got.value) == str(expected.value)


def test_the_memo_is_bounded() -> None:
    schema = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 99], "width": 1}]}
    )
    attribute = RememberingAttribute(schema["x"], limit=10)
    for i in range(25):
        assert attribute.constraint([0, i]) == schema["x"].constraint([0, i])
        assert len(attribute.memo) <= 10


@pytest.mark.parametrize("shape", [(7,), (5, 6), (4, 3, 5, 2), (3, 2, 2, 2, 3, 2, 2)])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_few_box_path_sums_to_the_bit_like_the_corner_loop(
    shape: tuple[int, ...], kind: str
) -> None:
    rng = np.random.default_rng(len(shape))
    counts = rng.integers(-50, 50, shape) if kind == "int" else rng.normal(0, 100, shape)
    prefix = prefix_sums(counts)
    a, b = (rng.integers(0, np.array(shape), (40, len(shape))) for _ in range(2))
    boxes = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=2)
    few = box_sums(prefix, boxes)  # 40 < FEW_BOXES: all corners at once
    many = box_sums(prefix, np.concatenate([boxes] * (FEW_BOXES // 40 + 1)))[:40]  # the loop
    assert few.dtype == many.dtype and np.array_equal(few, many)
    brute = [counts[tuple(slice(lo, hi + 1) for lo, hi in box)].sum() for box in boxes]
    assert np.allclose(few, brute)
    with pytest.raises(ValueError, match="invalid entry in coordinates"):
        box_sums(prefix, boxes[:1] + np.array(shape)[None, :, None])


def test_warm_bootstrap_keeps_replicate_tables_within_the_memory_limit(
    release_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpcube.release import uncertainty
    from dpcube.serve.served import ServedRelease

    served = ServedRelease.load(release_dirs["cells"], runs=RUNS, seed=3)
    release = served.release
    # a cell release's replicates are answered one by one, each keeping its summed-area table
    # (leaf releases answer all replicates in one pass and keep no table per replicate)

    def model(queries: list[dict[str, object]]) -> object:
        return uncertainty.bootstrap_errors(release, queries, runs=RUNS, seed=3)

    first = model([{}])
    _, replicates = uncertainty.bootstrap_replicates(release, RUNS, 3)
    assert len(replicates) == RUNS
    assert all(getattr(r, "_prefix", None) is not None for r in replicates)  # kept: small
    again = model([{}])
    assert np.array_equal(again, first)  # same replicates
    monkeypatch.setattr(uncertainty, "KEEP_REPLICATE_PREFIX_BYTES", 0)
    model([{}])
    assert all(getattr(r, "_prefix", None) is None for r in replicates)  # over the limit: dropped
