"""One JSON shape of an answer for every front end, NaN never written as JSON's invalid NaN."""

from __future__ import annotations

import json

import numpy as np

from dpcube import Histogram, Identity, Schema
from dpcube.release.formats import answer_json, answers_json, json_ready

SCHEMA = Schema.from_dict(
    {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]}
)
BATCH_KEYS = [
    "answer", "lower", "upper", "stddev", "noise_sd", "error_kind",
    "trusted", "interval_kind", "interval_reason",
]  # fmt: skip


def _uncertainty() -> object:
    release = Identity(1.0).release(Histogram(SCHEMA, np.arange(4)), random_state=1)
    return release.uncertainty([{"x": [0, 1]}, {}], level=0.9)


def test_batch_and_standalone_answers_share_one_shape() -> None:
    u = _uncertainty()
    batch = answers_json(u)
    assert [list(b) for b in batch] == [BATCH_KEYS, BATCH_KEYS]
    alone = answer_json(u, 1, level=0.9)
    # the documented order of `dpcube query --json`: level after the interval, the reason
    # after the error kind; every other field as in the batch
    assert list(alone) == [*BATCH_KEYS[:3], "level", *BATCH_KEYS[3:6], "error_reason",
                           *BATCH_KEYS[6:]]  # fmt: skip
    assert {k: alone[k] for k in BATCH_KEYS} == batch[1]
    assert alone["level"] == 0.9 and alone["error_reason"] == u.reason  # type: ignore[attr-defined]
    assert batch[1]["lower"] < batch[1]["answer"] < batch[1]["upper"]


def test_json_ready_writes_no_nan() -> None:
    value = {"a": np.array([1.0, np.nan]), "b": (np.float64(np.inf), 2), "c": [float("-inf")]}
    text = json.dumps(json_ready(value), allow_nan=False)  # raises on any NaN left
    assert json.loads(text) == {"a": [1.0, None], "b": [None, 2], "c": [None]}
