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


def test_workers_share_one_bootstrap_seed(tmp_path: Path) -> None:
    # a data cube made consistent in L1: not linear, so its intervals are a bootstrap
    import numpy as np

    from dpcube import DataCube, Histogram, Schema

    schema = Schema.from_dict(
        {
            "attributes": [
                {"name": "a", "kind": "nominal", "categories": ["x", "y"]},
                {"name": "b", "kind": "nominal", "categories": ["u", "v", "w"]},
            ]
        }
    )
    DataCube(1.0, consistency="l1").release(
        Histogram(schema, np.arange(6).reshape(2, 3) * 5), random_state=3
    ).save(tmp_path / "l1cube")
    proc, url = start(str(tmp_path / "l1cube"), "--workers", "2", "--runs", "20")
    try:
        query = {"queries": [{}]}
        answers = []
        for _ in range(8):  # a new connection each time: either worker may answer
            with httpx.Client(timeout=10) as client:
                answers.append(client.post(url + "api/releases/l1cube/answer", json=query).json())
        assert answers[0]["error_kind"] == "bootstrap"
        assert all(a == answers[0] for a in answers)  # the same interval from every worker
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err


def established_per_worker(parent: int, port: int) -> dict[int, int]:
    """Established TCP connections to ``port`` held by each child of ``parent`` (Linux /proc:
    a worker's socket inodes matched against /proc/net/tcp; IPv4 loopback)."""
    established = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":  # 01 = ESTABLISHED
            established.add(fields[9])
    counts: dict[int, int] = {}
    for child in Path(f"/proc/{parent}/task/{parent}/children").read_text().split():
        inodes = set()
        for fd in Path(f"/proc/{child}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        counts[int(child)] = len(inodes & established)
    return counts


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_workers_each_accept_on_their_own_socket_and_come_back(
    release_dirs: dict[str, Path],
) -> None:
    """``--workers 2``: SO_REUSEPORT spreads 32 keep-alive connections over both workers (the
    kernel hashes each connection to one socket: with 32 connections a split worse than 28:4
    has probability 2 * sum_{k<=3} C(32, k) / 2^32 = 2.6e-6), a worker killed is replaced and the
    service keeps answering, and SIGTERM ends the workers with the parent."""
    import signal
    import socket

    proc, url = start(str(release_dirs["cells"]), "--workers", "2")
    port = int(url.rsplit(":", 1)[1].strip("/"))
    try:
        connections = []
        for _ in range(32):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")  # accepted and answered
            connections.append(sock)
        counts = established_per_worker(proc.pid, port)
        for sock in connections:
            sock.close()
        workers = [pid for pid, n in counts.items() if n]
        assert len(workers) == 2 and sum(counts.values()) == 32, counts
        assert min(counts[w] for w in workers) >= 4, counts
        os.kill(workers[0], signal.SIGKILL)
        for _ in range(6):  # connections hashed to the dead worker's socket wait for its successor
            response = httpx.get(url + "api/health", timeout=60)
            assert response.json()["status"] == "ok"
        before = set(counts)
        deadline = time.monotonic() + 60  # the parent looks at its workers every 0.5 s
        while True:
            children = set(
                map(int, Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split())
            )
            if workers[0] not in children and children - before:
                break
            assert time.monotonic() < deadline, children
            time.sleep(0.2)
        assert workers[1] in children  # the other worker was left alone
        successor = (children - before).pop()
        assert httpx.get(url + "api/health", timeout=60).json()["status"] == "ok"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert "serve worker" in err and "restarting it" in err
    assert "Traceback" not in err
    for pid in [*workers, successor]:
        assert (
            not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
        )


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
