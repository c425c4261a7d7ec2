"""A flood of idle and slow clients does not take ``dpcube serve`` down: a real server on a
loopback port, its descriptor limit lowered so that a few hundred sockets reach it, keeps
answering ``/api/health``; slow requests are cut with a 408 in the one error shape."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

resource = pytest.importorskip("resource")  # POSIX only

#: The server's descriptor limit in this test (its connection limit is this less 64) and the
#: sockets the flood opens: more than the server may hold.
SERVER_DESCRIPTORS = 256
FLOOD = 400
#: A bound on every wait, so that a broken server fails the test instead of hanging it (not a
#: timing assertion: a healthy server answers in milliseconds).
PATIENCE = 60.0


def _lower_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (SERVER_DESCRIPTORS, SERVER_DESCRIPTORS))


@pytest.fixture
def server(release_dirs: dict[str, Path]) -> Iterator[tuple[subprocess.Popen[str], int]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < FLOOD + 100:  # the test process holds the flood's sockets
        if hard != resource.RLIM_INFINITY and hard < FLOOD + 100:
            pytest.skip(f"needs {FLOOD + 100} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (FLOOD + 100, hard))
    cmd = [sys.executable, "-m", "dpcube", "serve", str(release_dirs["cells"]), "--port", "0",
           "--header-timeout", "1", "--body-timeout", "1"]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_lower_descriptors,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"at http://127\.0\.0\.1:(\d+)/", first)
        assert match, first
        port = int(match.group(1))
        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        yield proc, port
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=PATIENCE)
        assert "Traceback" not in err, err
        if soft < FLOOD + 100:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def read_until_closed(sock: socket.socket) -> bytes:
    """What the server sends before it closes the connection (a reset counts as closed: a
    server closing a connection whose bytes it has not read yet resets it)."""
    sock.settimeout(PATIENCE)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def test_health_answers_under_a_flood_of_idle_and_slow_clients(
    server: tuple[subprocess.Popen[str], int],
) -> None:
    proc, port = server
    health = f"http://127.0.0.1:{port}/api/health"
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    partial = {
        "headers": b"GET /api/health HTTP/1.1\r\n" + host + b"X-Slow: ",
        "body": b"POST /api/releases/cells/answer HTTP/1.1\r\n" + host
        + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"quer",
    }  # fmt: skip
    flood: list[socket.socket] = []
    try:
        for i in range(FLOOD):  # idle, half a header, half a body: more than the server holds
            sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
            kind = ("idle", "headers", "body")[i % 3]
            if kind != "idle":
                sock.sendall(partial[kind])
            flood.append(sock)
        for _ in range(5):  # the flood keeps its sockets; health still answers
            response = httpx.get(health, timeout=PATIENCE)
            assert response.json() == {"status": "ok", "releases": 1}
        # the server cut every flood connection: the limit closed the oldest (503), the header
        # and body timeouts the rest (408 if part of a request came), each in the error shape
        statuses = []
        for sock in flood:
            received = read_until_closed(sock)
            if not received:  # closed without a word (idle) or reset before its bytes were read
                continue
            head, _, body = received.partition(b"\r\n\r\n")
            status = int(head.split()[1])
            assert status in (408, 503), received
            assert list(json.loads(body)) == ["error"]
            statuses.append(status)
        assert 408 in statuses and 503 in statuses
        assert proc.poll() is None
        assert httpx.get(health, timeout=PATIENCE).status_code == 200
    finally:
        for sock in flood:
            sock.close()


def test_a_slow_body_is_cut_with_408_and_a_complete_request_is_answered(
    server: tuple[subprocess.Popen[str], int],
) -> None:
    _, port = server
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(b"POST /api/releases/cells/answer HTTP/1.1\r\n" + host
                     + b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{")  # fmt: skip
        received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 408 ")
    line = json.loads(received.partition(b"\r\n\r\n")[2])["error"]
    assert "body did not arrive within 1 s" in line
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\n" + host + b"X-Big: " + b"x" * 70_000)
        received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 431 ")
    assert "exceed 65,536 bytes" in json.loads(received.partition(b"\r\n\r\n")[2])["error"]
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(b"GARBAGE\x00 / HTTP/1.1\r\n\r\n")
        received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 400 ")
    assert list(json.loads(received.partition(b"\r\n\r\n")[2])) == ["error"]
    body = json.dumps({"queries": [{"age": [1, 2]}]}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        head = b"POST /api/releases/cells/answer HTTP/1.1\r\n" + host
        head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        sock.sendall(head + body)
        sock.settimeout(PATIENCE)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")


def test_limits_that_cannot_hold_are_refused_before_listening(
    release_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from dpcube.cli.main import main
    from dpcube.serve.limits import FD_RESERVE, descriptor_limit

    cells = str(release_dirs["cells"])
    descriptors = descriptor_limit()
    if descriptors is not None:
        too_many = str(descriptors - FD_RESERVE + 1)
        assert main(["serve", cells, "--port", "0", "--max-connections", too_many]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "ulimit -n" in err and too_many in err
    for flag, value in (("--header-timeout", "0"), ("--body-timeout", "nan"),
                        ("--keep-alive-timeout", "-1"), ("--max-connections", "0")):  # fmt: skip
        assert main(["serve", cells, "--port", "0", flag, value]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and flag in err, err
