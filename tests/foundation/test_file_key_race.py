"""dpcube's file key is created once, whole, even when several processes use it first together."""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path


def _key_of(home: str, barrier: object, out: object) -> None:
    os.environ["DPCUBE_HOME"] = home
    from dpcube.release.marks import file_key

    barrier.wait()  # type: ignore[attr-defined]
    try:
        out.put(file_key().hex())  # type: ignore[attr-defined]
    except Exception as exc:  # reported to the parent, which fails the test
        out.put(f"error: {exc}")  # type: ignore[attr-defined]


def test_first_use_by_racing_processes_gives_one_whole_key(tmp_path: Path) -> None:
    # Each round starts from no key; 8 processes released at a barrier all ask for it. Before
    # the key was linked into place whole, a process could read the file another had just
    # created and not yet written ("file key ... is damaged (0 bytes)"), after the charge.
    ctx = mp.get_context("spawn")
    for round_ in range(3):
        home = tmp_path / f"home{round_}"
        barrier, out = ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_key_of, args=(str(home), barrier, out)) for _ in range(8)]
        for p in procs:
            p.start()
        keys = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert len(set(keys)) == 1 and not keys[0].startswith("error"), keys
        assert len(bytes.fromhex(keys[0])) == 32
        assert [p.name for p in home.iterdir()] == ["file-key"]  # no draft left behind
