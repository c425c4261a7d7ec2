"""Throughput and latency of ``dpcube serve`` against answering the same queries in process.

Writes a seeded Identity release of a person-like schema (age 0-100 x sex x 10 income bins x 6
states = 12,120 cells; the release of ``benchmarks/query_latency.py``) and random range queries
(an age interval, a sex, an income-bin interval), then:

1. **in process**: the service's own answering path
   (:meth:`dpcube.serve.served.ServedRelease.answer`, the release's vectorised prefix sums and
   exact intervals) on single queries and on batches, in CPU seconds (``time.process_time``);
2. **over HTTP**: starts ``python -m dpcube serve REL --port 0`` (``--workers``, default one uvicorn worker in one
   process: the CLI as a user runs it) and drives it from this process with ``--clients``
   concurrent keep-alive connections on loopback for ``--duration`` seconds, each sending one
   ``POST /api/releases/people/answer`` with one query and waiting for the answer before the next
   (a closed loop). Reports requests/s, p50/p99 latency, and the server's CPU seconds per request
   (from ``/proc/PID/stat``, the figure that the machine's other load distorts least);
3. **batches over HTTP**: the same with ``--batch`` queries per request and ``--batch-clients``
   connections: answers/s.

The load generator is a minimal HTTP/1.1 client on asyncio streams (pre-encoded requests,
``Content-Length`` framing): a general client such as httpx spends more CPU per request than the
server, and on two cores it would measure itself. It runs in this process, on the second core.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/serve_throughput.py [--duration 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from query_latency import make_release


def random_queries(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` random range queries on the person schema (values in the attributes' units)."""
    rng = np.random.default_rng(seed)
    ages = np.sort(rng.integers(0, 101, (n, 2)), axis=1)
    bins = np.sort(rng.integers(0, 10, (n, 2)), axis=1)
    sexes = rng.choice(["F", "M"], n)
    return [
        {"age": [int(a), int(b)], "sex": str(s), "income": {"bins": [int(i), int(j)]}}
        for (a, b), s, (i, j) in zip(ages, sexes, bins, strict=True)
    ]


def in_process(release_dir: Path, queries: list[dict[str, Any]], batch: int) -> dict[str, float]:
    from dpcube.serve.served import ServedRelease

    served = ServedRelease.load(release_dir, runs=200, seed=None)
    singles = queries[:3000]
    start = time.process_time()
    for q in singles:
        served.answer([q], 0.95)
    single_qps = len(singles) / (time.process_time() - start)
    start = time.process_time()
    done = 0
    for k in range(0, len(queries), batch):
        done += len(served.answer(queries[k : k + batch], 0.95)["answers"])
    batch_aps = done / (time.process_time() - start)
    return {"single_qps": single_qps, "batch_answers_per_s": batch_aps}


def start_server(
    release_dir: Path, max_batch: int, workers: int = 1
) -> tuple[subprocess.Popen[str], str, int]:
    cmd = [sys.executable, "-m", "dpcube", "serve", str(release_dir), "--port", "0",
           "--max-batch", str(max_batch), "--max-body-bytes", str(16 << 20),
           "--workers", str(workers)]  # fmt: skip
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    if not match:
        proc.kill()
        raise SystemExit(f"dpcube serve did not start: {line!r}")
    return proc, "127.0.0.1", int(match.group(1))


def cpu_by_process(pid: int) -> dict[int, float]:
    """User + system CPU seconds of process ``pid`` and of each of its children (the workers of
    ``--workers N``), from Linux ``/proc/PID/stat``."""
    out: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # a process that ended meanwhile
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):
            out[int(stat.parent.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf(
                "SC_CLK_TCK"
            )
    return out


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its children together."""
    return sum(cpu_by_process(pid).values())


def request_bytes(host: str, port: int, path: str, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return status, await reader.readexactly(length)


async def drive(
    host: str, port: int, requests: list[bytes], clients: int, duration: float
) -> tuple[list[float], int, float]:
    """``clients`` closed-loop connections for ``duration`` s: latencies (s), errors, wall s."""
    latencies: list[float] = []
    errors = 0
    stop = time.perf_counter() + duration

    async def client(k: int) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, port)
        i = k
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            writer.write(requests[i % len(requests)])
            status, _ = await read_response(reader)
            latencies.append(time.perf_counter() - t0)
            errors += status != 200
            i += clients
        writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return latencies, errors, time.perf_counter() - start


def over_http(
    host: str, port: int, pid: int, requests: list[bytes], clients: int, duration: float
) -> dict[str, float]:
    before = cpu_by_process(pid)
    latencies, errors, wall = asyncio.run(drive(host, port, requests, clients, duration))
    after = cpu_by_process(pid)
    used = {p: after[p] - before.get(p, 0.0) for p in after}
    cpu = sum(used.values())
    lat = np.asarray(latencies) * 1000.0
    return {
        "requests": len(lat),
        "errors": errors,
        "per_s": len(lat) / wall,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "server_cpu_ms_per_request": 1000.0 * cpu / max(len(lat), 1),
        "server_cpu_share": cpu / wall,
        # each process's share of a core (parent and workers; a worker near 100 % while another
        # idles means the connections were not spread)
        "process_shares": sorted((u / wall for u in used.values()), reverse=True),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=30.0, help="seconds per HTTP run")
    p.add_argument("--clients", type=int, default=32, help="concurrent single-query clients")
    p.add_argument("--batch", type=int, default=1000, help="queries per batch request")
    p.add_argument("--batch-clients", type=int, default=4, help="concurrent batch clients")
    p.add_argument(
        "--workers", type=int, default=1, help="dpcube serve --workers (worker processes)"
    )
    args = p.parse_args(argv)
    queries = random_queries(20_000)
    with tempfile.TemporaryDirectory() as tmp:
        release_dir = make_release(Path(tmp)).rename(Path(tmp) / "people")
        local = in_process(release_dir, queries, args.batch)
        print(f"in process: {local['single_qps']:,.0f} single queries/s, "
              f"{local['batch_answers_per_s']:,.0f} answers/s in batches of {args.batch} (CPU s)")  # fmt: skip
        proc, host, port = start_server(release_dir, max(args.batch, 1), args.workers)
        try:
            path = "/api/releases/people/answer"
            for _ in range(50):  # wait until uvicorn answers
                try:
                    asyncio.run(
                        drive(
                            host,
                            port,
                            [request_bytes(host, port, path, {"queries": [{}]})],
                            1,
                            0.01,
                        )
                    )
                    break
                except OSError:
                    time.sleep(0.1)
            singles = [request_bytes(host, port, path, {"queries": [q]}) for q in queries[:5000]]
            single = over_http(host, port, proc.pid, singles, args.clients, args.duration)
            batches = [
                request_bytes(host, port, path, {"queries": queries[k : k + args.batch]})
                for k in range(0, len(queries), args.batch)
            ]
            batch = over_http(host, port, proc.pid, batches, args.batch_clients, args.duration)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    answers_per_s = batch["per_s"] * args.batch
    print(
        f"HTTP single ({args.clients} clients, {args.duration:g} s, {args.workers} worker(s)): "
        f"{single['per_s']:,.0f} requests/s, p50 {single['p50_ms']:.1f} ms, "
        f"p99 {single['p99_ms']:.1f} ms, {single['errors']} errors; server "
        f"{single['server_cpu_ms_per_request']:.3f} CPU ms/request "
        f"({single['server_cpu_share']:.0%} of a core; per process "
        f"{' / '.join(f'{x:.0%}' for x in single['process_shares'])}; with a core to itself: "
        f"{1000.0 / single['server_cpu_ms_per_request']:,.0f} requests/s)"
    )
    print(
        f"HTTP batches of {args.batch} ({args.batch_clients} clients): {answers_per_s:,.0f} "
        f"answers/s, p50 {batch['p50_ms']:.1f} ms, p99 {batch['p99_ms']:.1f} ms, "
        f"{batch['errors']} errors; server {batch['server_cpu_ms_per_request']:.1f} CPU ms/request "
        f"(per process {' / '.join(f'{x:.0%}' for x in batch['process_shares'])}) "
        f"(with a core to itself: {args.batch * 1000.0 / batch['server_cpu_ms_per_request']:,.0f} "
        "answers/s)"
    )
    print(
        f"ratio in-process / HTTP: single {local['single_qps'] / single['per_s']:.2f}x, "
        f"batch {local['batch_answers_per_s'] / answers_per_s:.2f}x; "
        f"server CPU per single request vs in-process CPU per query: "
        f"{single['server_cpu_ms_per_request'] / (1000.0 / local['single_qps']):.2f}x"
    )
    print(
        "goals: 2,000 single q/s: " + ("met" if single["per_s"] >= 2000 else "MISSED")
        + "; p99 < 50 ms: " + ("met" if single["p99_ms"] < 50 else "MISSED")
        + "; 1e5 answers/s batched: " + ("met" if answers_per_s >= 1e5 else "MISSED")
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
