"""The experiments run beside the product: ``python -m experiments`` lists them, each module runs as
``python -m experiments.NAME``, a bad flag or bad data is one line, and neither the installed
package nor the ``dpcube`` command carries them."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import experiments
from dpcube.cli.main import build_parser, main
from dpcube.errors import UsageError
from experiments import RUNNABLE, run_command, summary
from experiments.__main__ import main as experiments_main

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "dpcube"


def _defines_main(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)


def test_every_module_with_a_command_line_is_listed() -> None:
    modules = {
        p.stem
        for p in Path(experiments.__file__).parent.glob("*.py")
        if not p.stem.startswith("_") and _defines_main(p)
    }
    assert set(RUNNABLE) == modules


def test_the_listing_names_each_experiment_with_its_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert experiments_main([]) == 0
    out = capsys.readouterr().out
    for name in RUNNABLE:
        assert summary(name), name
        assert f"  {name}" in out
    assert "the experiments of Xiao, Wang, Gehrke" in out  # privelet's docstring, its command cut


def test_an_unknown_experiment_is_refused_with_the_known_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert experiments_main(["nosuch"]) == 2
    err = capsys.readouterr().err
    assert "unknown experiment 'nosuch'" in err and "privelet" in err


def test_a_bad_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def bad(argv: list[str] | None) -> int:
        raise UsageError(f"--trials must be positive, got {argv}")

    assert run_command(bad, ["-1"]) == 2
    assert capsys.readouterr().err == "error: --trials must be positive, got ['-1']\n"
    with pytest.raises(UsageError):
        run_command(bad, ["--debug"])


def test_an_experiment_runs_as_a_module_from_the_checkout() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-m", "experiments.quadtree_height", "--help"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m experiments.quadtree_height")


def test_the_product_has_no_bench_command_and_no_experiments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert not (SRC / "experiments").exists()
    assert "bench" not in build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    with pytest.raises(SystemExit):
        main(["bench", "privelet"])
    assert "invalid choice: 'bench'" in capsys.readouterr().err
    imports = [
        f"{path.relative_to(SRC)}: {name}"
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
        if name.split(".")[0] in ("experiments", "matplotlib", "tests")
    ]
    assert not imports, f"the product imports research or test code: {imports}"
