"""Running the CLI in-process, in a sandbox, and checking what it did.

A :class:`Sandbox` is a fresh temporary directory per example, used as the working directory and
as ``$DPCUBE_HOME``; ledgers go to ``$DPCUBE_HOME/ledgers`` (also passed as ``--ledger-dir`` while
that flag exists). :func:`snapshot` records every file (size, mtime, SHA-256) so that a property
can prove which files a command touched; :func:`ledger_state` reads every ledger's total and
charges, so that a property can prove what a command charged.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcube.cli.main import build_parser, main


def _has_ledger_dir_flag() -> bool:
    parser = build_parser()
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and "release" in choices:
            return "--ledger-dir" in choices["release"]._option_string_actions
    return False


#: Whether ``dpcube release`` still takes ``--ledger-dir`` (the ledger work may remove it).
LEDGER_DIR_FLAG = _has_ledger_dir_flag()


@dataclass(frozen=True)
class Result:
    """What one in-process CLI run did."""

    code: int | None
    stdout: str
    stderr: str
    #: The exception that escaped ``main()`` (SystemExit included), or None.
    escaped: BaseException | None
    #: True when argparse refused the command line (SystemExit(2) with its usage message).
    usage_error: bool

    @property
    def failed(self) -> bool:
        return self.code != 0


def run_cli(argv: list[str]) -> Result:
    """``dpcube.cli.main.main(argv)`` with stdout/stderr captured; nothing escapes."""
    out, err = io.StringIO(), io.StringIO()
    escaped: BaseException | None = None
    code: int | None = None
    usage = False
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            usage = code == 2
        except BaseException as exc:  # the property fails on any escaping exception
            escaped = exc
    return Result(code, out.getvalue(), err.getvalue(), escaped, usage)


def error_problems(result: Result) -> list[str]:
    """Why a run's exit code and stderr break the 'no traceback, one line' contract ([] = fine)."""
    problems = []
    if result.escaped is not None:
        problems.append(f"exception escaped main(): {result.escaped!r}")
    if "Traceback" in result.stderr or "Traceback" in result.stdout:
        problems.append("a traceback reached the user")
    if result.code not in (0, 1, 2):
        problems.append(f"undocumented exit code {result.code!r}")
    if result.code != 0 and result.escaped is None:
        lines = result.stderr.rstrip("\n").split("\n")
        if result.usage_error:
            # argparse: "usage: ..." lines, then "dpcube CMD: error: MESSAGE" as the last line.
            if ": error: " not in lines[-1]:
                problems.append(f"argparse error without 'error:' line: {result.stderr!r}")
        elif len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append(f"stderr is not one 'error: ...' line: {result.stderr!r}")
    return problems


# -- the sandbox --------------------------------------------------------------------------------


@dataclass
class FileInfo:
    size: int
    mtime_ns: int
    sha256: str


def snapshot(root: Path, exclude: tuple[Path, ...] = ()) -> dict[str, FileInfo]:
    """Every regular file under ``root`` (except under ``exclude``): size, mtime and SHA-256."""
    files: dict[str, FileInfo] = {}
    for dirpath, _dirs, names in os.walk(root):
        d = Path(dirpath)
        if any(d == e or e in d.parents for e in exclude):
            continue
        for name in names:
            p = d / name
            if p.is_symlink() or not p.is_file():
                continue
            st = p.stat()
            files[str(p.relative_to(root))] = FileInfo(
                st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()
            )
    return files


def ledger_state(ledger_dir: Path) -> dict[str, Any]:
    """Every ledger under ``ledger_dir``: its total and its charges (release id, epsilon, delta)."""
    state: dict[str, Any] = {}
    if not ledger_dir.is_dir():
        return state
    for path in sorted(ledger_dir.rglob("*.ledger")):
        con = sqlite3.connect(path)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            total = (
                con.execute("SELECT total_epsilon, total_delta FROM budget").fetchall()
                if "budget" in tables
                else []
            )
            charges = (
                con.execute(
                    "SELECT release_id, epsilon, delta FROM charges ORDER BY seq"
                ).fetchall()
                if "charges" in tables
                else []
            )
        finally:
            con.close()
        state[str(path.relative_to(ledger_dir))] = {"total": total, "charges": charges}
    return state


def all_charges(state: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted(c for ledger in state.values() for c in ledger["charges"])


@contextlib.contextmanager
def sandbox() -> Iterator[Path]:
    """A fresh directory as the working directory and ``$DPCUBE_HOME``; restored afterwards."""
    old_home = os.environ.get("DPCUBE_HOME")
    with tempfile.TemporaryDirectory(prefix="dpcube-fuzz-") as tmp:
        root = Path(tmp).resolve()
        (root / "home").mkdir()
        os.environ["DPCUBE_HOME"] = str(root / "home")
        try:
            with contextlib.chdir(root):
                yield root
        finally:
            if old_home is None:
                os.environ.pop("DPCUBE_HOME", None)
            else:
                os.environ["DPCUBE_HOME"] = old_home


def ledger_dir(root: Path) -> Path:
    return root / "home" / "ledgers"


def diff(before: dict[str, FileInfo], after: dict[str, FileInfo]) -> dict[str, list[str]]:
    """Files added, removed and changed between two snapshots."""
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": sorted(k for k in set(before) & set(after) if before[k] != after[k]),
    }


def scale() -> float:
    """Multiplier of every property's ``ci`` case count: 12 under ``DPCUBE_FUZZ_PROFILE=long``
    (or ``DPCUBE_FUZZ_SCALE``)."""
    if "DPCUBE_FUZZ_SCALE" in os.environ:
        return float(os.environ["DPCUBE_FUZZ_SCALE"])
    return 12.0 if os.environ.get("DPCUBE_FUZZ_PROFILE") == "long" else 1.0


def cases(ci: int) -> int:
    """``max_examples`` for a property whose CI budget is ``ci`` cases."""
    return max(1, round(ci * scale()))
