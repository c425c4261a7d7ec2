"""Labelled tables answered from their boxes at once (``dpcube export`` in one pass):
the same figures as answering every row as its own query."""

from __future__ import annotations

import numpy as np

from dpcube import Histogram, Identity, Schema
from dpcube.release.tables import grid_cells


def _schema() -> Schema:
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
                {"name": "inc", "kind": "ordinal", "edges": [0, 10, 50, 100]},
            ]
        }
    )


def test_table_rows_equal_one_query_per_row() -> None:
    schema = _schema()
    counts = np.random.default_rng(0).integers(0, 30, schema.shape)  # synthetic data
    release = Identity(1.0).release(Histogram(schema, counts), random_state=2, account=False)
    table = release.to_arrow()
    assert table.num_rows == 10 * 2 * 3
    # The same rows as plain dicts (no boxes attached): answered one query at a time.
    labels, queries = grid_cells(schema)
    plain = [dict(q) for q in queries]
    assert plain[7] == {"age": {"bins": [1, 1]}, "sex": {"bins": [0, 0]}, "inc": {"bins": [1, 1]}}
    expected = np.array([release.answer(q) for q in plain])
    np.testing.assert_array_equal(table.column("estimate").to_numpy(), expected)
    np.testing.assert_allclose(
        table.column("stddev").to_numpy(), np.sqrt([release.variance(q) for q in plain])
    )
    assert table.column("sex").to_pylist()[:2] == ["F", "F"] and labels["sex"][3] == "M"


def test_grouped_rows_sum_their_cells() -> None:
    schema = _schema()
    counts = np.random.default_rng(1).integers(0, 30, schema.shape)  # synthetic data
    release = Identity(1.0).release(Histogram(schema, counts), random_state=3, account=False)
    _labels, queries = release.table_cells(["sex"], {"age": [2, 5]})
    answers = release.answer_many(queries)  # boxes that are not single cells: prefix sums
    cells = release.counts
    np.testing.assert_allclose(answers, cells[2:6].sum(axis=(0, 2)))
    assert queries[-1] == {"age": [2, 5], "sex": {"bins": [1, 1]}}
