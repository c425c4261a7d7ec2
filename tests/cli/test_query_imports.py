"""``dpcube query`` stays light: answering from a saved release imports none of the heavy modules
(issue #13: the query path must answer in well under a second, most of it Python's start-up).

The check is on ``sys.modules`` after a real query in a fresh interpreter, not on a timing: it
fails as soon as someone adds a top-level import of one of these to a module the query uses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from dpcube import Histogram, Identity, Schema

#: Modules a query from a release never needs (each costs 20 ms to seconds of start-up).
HEAVY = (
    "scipy",
    "pandas",
    "polars",
    "matplotlib",
    "pyspark",
    "duckdb",
    "rich",
    "yaml",
    "plotly",
    "fastapi",
    "pyarrow.dataset",
    "pyarrow.compute",
    "pyarrow.fs",
    "pyarrow.parquet",
    "dpcube.mechanisms",
    "dpcube.planning",
)

_CHILD = """
import json, sys
from dpcube.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _loaded_after(argv: list[str]) -> tuple[int, set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, check=False
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["code"], set(last["modules"]), done.stdout


def _release(tmp_path: Path) -> str:
    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, 99], "width": 10},
                {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
            ]
        }
    )
    counts = np.arange(20).reshape(schema.shape)
    out = tmp_path / "rel"
    Identity(1.0).release(Histogram(schema, counts), random_state=1).save(out)
    return str(out)


def test_query_imports_no_heavy_module(tmp_path: Path) -> None:
    rel = _release(tmp_path)
    for extra in ([], ["--json"], ["--group-by", "sex"]):
        code, modules, out = _loaded_after(["query", rel, "--where", "age=20..49", *extra])
        assert code == 0, out
        heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert heavy == [], f"dpcube query {' '.join(extra)} imported {heavy}"
