"""Property (a): any schema dict builds or is refused with a DPCubeError; valid ones round-trip
through to_dict/from_dict and through JSON and YAML files."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_harness import cases
from fuzz_strategies import any_schema_dict, valid_schema_dict
from hypothesis import event, given, settings

from dpcube.errors import DPCubeError
from dpcube.schema import Schema


def test_any_schema_dict_builds_or_raises_dpcube_error() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=cases(600))
    @given(any_schema_dict())
    def prop(case: tuple[Any, bool]) -> None:
        d, generated_valid = case
        try:
            schema = Schema.from_dict(d)
        except DPCubeError:
            seen["refused"] += 1
            event("refused")
            if generated_valid:
                raise AssertionError(f"a valid schema was refused: {d!r}") from None
            return
        seen["built"] += 1
        event("built")
        assert Schema.from_dict(schema.to_dict()) == schema

    prop()
    total = sum(seen.values())
    assert seen["built"] >= 0.1 * total and seen["refused"] >= 0.1 * total, seen


def test_valid_schemas_round_trip_through_dicts_and_files() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=cases(300))
    @given(valid_schema_dict(max_attributes=4))
    def prop(d: dict[str, Any]) -> None:
        schema = Schema.from_dict(d)
        assert schema.names == tuple(str(a["name"]) for a in d["attributes"])
        again = Schema.from_dict(schema.to_dict())
        assert again == schema and again.shape == schema.shape
        with tempfile.TemporaryDirectory() as tmp:
            j, y = Path(tmp) / "s.json", Path(tmp) / "s.yaml"
            j.write_text(json.dumps(schema.to_dict()))
            y.write_text(yaml.safe_dump(schema.to_dict(), allow_unicode=True, sort_keys=False))
            assert Schema.from_file(j) == schema
            assert Schema.from_file(y) == schema
        seen["kinds:" + ",".join(sorted({a["kind"] for a in d["attributes"]}))] += 1

    prop()
    assert len(seen) >= 5, seen  # every mix of kinds came up


def test_huge_single_attribute_domain_is_refused_quickly() -> None:
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from dpcube.schema import Schema\nfrom dpcube.errors import DPCubeError\n"
        "try:\n Schema.from_dict({'attributes': [{'name': 'a', 'kind': 'ordinal', "
        "'range': [0, 1e12], 'width': 1}]}).check_materialisable()\n"
        "except DPCubeError as e:\n print('refused', e)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=20
        )
    except subprocess.TimeoutExpired:
        pytest.fail("building the schema ran for more than 20 s")
    assert done.returncode == 0 and done.stdout.startswith("refused"), done.stderr[-300:]
