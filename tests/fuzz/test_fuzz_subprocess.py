"""A handful of real processes: ``python -m dpcube`` and the ``dpcube`` script print no
traceback and one ``error:`` line on bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BAD_COMMANDS = [
    [
        "release",
        "{tmp}/missing.csv",
        "--mechanism",
        "identity",
        "--epsilon",
        "1",
        "--out",
        "{tmp}/o",
    ],
    ["query", "{tmp}"],
    ["plan", "--workload", "allrange:0", "--epsilon", "1"],
]


def _run(prefix: list[str], argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DPCUBE_HOME": str(tmp / "home")}
    args = [a.replace("{tmp}", str(tmp)) for a in argv]
    return subprocess.run(
        prefix + args, capture_output=True, text=True, timeout=120, env=env, cwd=tmp
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr


@pytest.mark.parametrize("argv", BAD_COMMANDS, ids=lambda a: a[0])
def test_dpcube_script_bad_input_is_one_line(argv: list[str], tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "dpcube"
    if not script.exists():
        pytest.skip("the dpcube script is not installed in this environment")
    _one_line(_run([str(script)], argv, tmp_path))


@pytest.mark.parametrize("argv", BAD_COMMANDS, ids=lambda a: a[0])
def test_python_m_dpcube_bad_input_is_one_line(argv: list[str], tmp_path: Path) -> None:
    _one_line(_run([sys.executable, "-m", "dpcube"], argv, tmp_path))


def test_python_m_dpcube_version(tmp_path: Path) -> None:
    done = _run([sys.executable, "-m", "dpcube"], ["--version"], tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("dpcube "), done
