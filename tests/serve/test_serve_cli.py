"""``dpcube serve`` as a user starts it: a real uvicorn process on a free loopback port."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dpcube.cli.main import main


def test_serve_subprocess_answers_over_loopback(release_dirs: dict[str, Path]) -> None:
    cmd = [sys.executable, "-m", "dpcube", "serve", str(release_dirs["cells"]),
           str(release_dirs["grid"]), "--port", "0", "--runs", "20"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once the port is bound, before serving
        match = re.search(r"at (http://127\.0\.0\.1:(\d+)/)", first)
        assert match, first + (proc.stderr.read() if proc.poll() is not None else "")  # type: ignore[union-attr]
        url = match.group(1)
        assert "2 release(s) (cells, grid)" in first
        assert "/docs" in proc.stdout.readline()
        deadline = time.monotonic() + 30  # the socket listens already; uvicorn starts its loop
        while True:
            try:
                listed = httpx.get(url + "api/releases", timeout=5).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        assert [r["name"] for r in listed["releases"]] == ["cells", "grid"]
        answer = httpx.post(
            url + "api/releases/cells/answer",
            json={"queries": [{"age": [1, 2]}], "level": 0.95},
            timeout=5,
        ).json()["answers"][0]
        assert answer["lower"] < answer["answer"] < answer["upper"]
        bad = httpx.post(url + "api/releases/cells/answer", content=b"{", timeout=5)
        assert bad.status_code == 422 and list(bad.json()) == ["error"]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err
    assert "warning: --host" not in err  # loopback: no public-service warning


def start(*argv: str) -> tuple[subprocess.Popen[str], str]:
    """``dpcube serve ARGV --port 0`` as a subprocess, and its URL once it answers."""
    cmd = [sys.executable, "-m", "dpcube", "serve", *argv, "--port", "0"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    match = re.search(r"at (http://127\.0\.0\.1:\d+/)", first)
    assert match, first
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(match.group(1) + "api/health", timeout=5)
            return proc, match.group(1)
        except httpx.TransportError:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)


def test_workers_share_one_bootstrap_seed(release_dirs: dict[str, Path]) -> None:
    proc, url = start(str(release_dirs["grid"]), "--workers", "2", "--runs", "20")
    try:
        query = {"queries": [{"loc": {"bins": [[0, 1], [0, 3]]}}]}
        answers = []
        for _ in range(8):  # a new connection each time: either worker may answer
            with httpx.Client(timeout=10) as client:
                answers.append(client.post(url + "api/releases/grid/answer", json=query).json())
        assert answers[0]["error_kind"] == "bootstrap"
        assert all(a == answers[0] for a in answers)  # the same interval from every worker
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err


def test_serve_refuses_bad_input_with_one_line(
    release_dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "b" / "cells"
    shutil.copytree(release_dirs["cells"], other)
    assert main(["serve", str(release_dirs["cells"]), str(other), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two releases are named 'cells'" in err
    assert main(["serve", str(tmp_path / "missing"), "--port", "0"]) == 2
    assert "is not a dpcube release" in capsys.readouterr().err
    assert main(["serve", str(release_dirs["cells"]), "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
    assert main(["serve", str(release_dirs["cells"]), "--runs", "3"]) == 2
    assert "runs must be at least" in capsys.readouterr().err
    assert main(["serve", str(release_dirs["cells"]), "--max-batch", "0"]) == 2
    assert "--max-batch" in capsys.readouterr().err
    assert main(["serve", str(release_dirs["cells"]), "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err
