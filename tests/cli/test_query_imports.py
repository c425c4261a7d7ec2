"""The command line loads lazily: ``dpcube query`` and ``dpcube --version`` import none of the heavy
modules, and ``dpcube release`` imports only the chosen mechanism's family.

The check is on ``sys.modules`` after a real command in a fresh interpreter, not on a timing: it
fails as soon as someone adds a top-level import of one of these to a module the command uses, or
builds a parser from a module the command does not run.
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
    "scipy.optimize",
    "numpy.ma",
    "uvicorn",
    "starlette",
    "dpcube.serve",
    "dpcube.report",
    "dpcube.experiments",
)

#: The mechanism families: a release imports the chosen one's only.
FAMILIES = (
    "dpcube.mechanisms.matrix",
    "dpcube.mechanisms.spatial",
    "dpcube.mechanisms.census",
    "dpcube.mechanisms.datacube",
    "dpcube.mechanisms.privelet",
    "dpcube.planning",
)

_CHILD = """
import json, sys
from dpcube.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


#: ``python -m dpcube`` with the modules loaded printed at exit (``--version`` exits from argparse).
_MODULE_CHILD = """
import atexit, json, runpy, sys
atexit.register(lambda: print(json.dumps({"modules": sorted(sys.modules)})))
sys.argv = ["dpcube", *sys.argv[1:]]
runpy.run_module("dpcube", run_name="__main__")
"""


def _loaded_after(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, check=False, env=env
    )
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["code"], set(last["modules"]), done.stdout + done.stderr


def _heavy(modules: set[str], names: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in names))


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
        heavy = _heavy(modules)
        assert heavy == [], f"dpcube query {' '.join(extra)} imported {heavy}"


def test_version_imports_no_heavy_module() -> None:
    """``python -m dpcube --version`` (the module entry point) prints the version, light."""
    done = subprocess.run(
        [sys.executable, "-c", _MODULE_CHILD, "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines[0].startswith("dpcube "), done.stdout + done.stderr
    modules = set(json.loads(lines[-1])["modules"])
    assert _heavy(modules) == [], f"dpcube --version imported {_heavy(modules)}"
    assert "numpy" not in modules or "dpcube.histogram" in modules  # only through `import dpcube`


def test_python_dash_m_dpcube_runs_the_command_line(tmp_path: Path) -> None:
    rel = _release(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "dpcube", "query", rel, "--where", "age=20..49", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "answer" in json.loads(done.stdout.strip().splitlines()[-1])


def test_release_imports_only_the_chosen_mechanism_family(tmp_path: Path) -> None:
    import os

    (tmp_path / "p.csv").write_text("age,sex\n" + "".join(f"{i},F\n" for i in range(30)))
    (tmp_path / "s.json").write_text(
        json.dumps(
            {"attributes": [{"name": "age", "kind": "ordinal", "range": [0, 99], "width": 10}]}
        )
    )
    env = {**os.environ, "DPCUBE_HOME": str(tmp_path / "home")}
    argv = [
        "release",
        str(tmp_path / "p.csv"),
        "--schema",
        str(tmp_path / "s.json"),
        "--mechanism",
        "identity",
        "--epsilon",
        "1",
        "--total-epsilon",
        "2",
        "--seed",
        "1",
        "--no-report",
        "--out",
        str(tmp_path / "rel"),
    ]
    code, modules, out = _loaded_after(argv, env)
    assert code == 0, out
    others = _heavy(modules, (*FAMILIES, "fastapi", "uvicorn", "dpcube.serve", "dpcube.report"))
    assert others == [], f"dpcube release --mechanism identity imported {others}"
