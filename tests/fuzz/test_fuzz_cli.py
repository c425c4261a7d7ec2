"""Property (d): generated ``dpcube`` command lines (release, query, budget, demo, plan) run
in-process in a fresh sandbox. Whatever the command: no exception escapes ``main()``, no
traceback, exit code 0/1/2 and one ``error:`` line on failure; no file outside the output
directory is added, removed or changed (the data file and foreign files stay byte-identical);
a failing command charges nothing and changes no total; an accepted release charges its epsilon
exactly once and loads back with its schema."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
from fuzz_harness import (
    LEDGER_DIR_FLAG,
    all_charges,
    cases,
    diff,
    error_problems,
    ledger_dir,
    ledger_state,
    run_cli,
    sandbox,
    snapshot,
)
from fuzz_strategies import CliCase, budget_argv, demo_argv, plan_argv, query_argv, release_argv
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.release.base import load_release
from dpcube.schema import Schema

SCHEMA = {
    "attributes": [
        {"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1},
        {"name": "y", "kind": "nominal", "categories": ["a", "b"]},
    ]
}
OUT = {
    "fresh": "out/rel",
    "nested": "out/a/b",
    "data_dir": "data",
    "existing_file": "existing.txt",
    "foreign_dir": "foreign",
    "data_file": "data/people.csv",
    "home": "home",
}


def build(root: Path, set_total: bool) -> dict[str, str]:
    """The sandbox's files; placeholders of the grammar -> paths."""
    (root / "data").mkdir()
    rng = np.random.default_rng(0)
    lines = ["x,y"] + [f"{rng.integers(0, 4)},{'ab'[rng.integers(0, 2)]}" for _ in range(30)]
    (root / "data" / "people.csv").write_text("\n".join(lines) + "\n")
    (root / "data" / "README.txt").write_text("the curator's notes\n")
    (root / "schema.json").write_text(json.dumps(SCHEMA))
    bad = {"attributes": [{"name": "x", "kind": "ordinal", "range": [3, 0], "width": 1}]}
    (root / "bad_schema.json").write_text(json.dumps(bad))
    (root / "foreign").mkdir()
    (root / "foreign" / "notes.txt").write_text("someone else's\n")
    (root / "foreign" / "table.parquet").write_bytes(b"PAR1 not ours PAR1")
    (root / "foreign" / "manifest.json").write_text('{"owner": "another tool"}')
    (root / "existing.txt").write_text("do not overwrite\n")
    schema = Schema.from_dict(SCHEMA)
    Identity(1.0).release(Histogram(schema, np.ones(schema.shape, int)), random_state=1).save(
        root / "release"
    )
    paths = {
        "data": str(root / "data" / "people.csv"),
        "missing": str(root / "nope" / "missing.csv"),
        "schema": str(root / "schema.json"),
        "bad_schema": str(root / "bad_schema.json"),
        "ledger_dir": str(ledger_dir(root)),
        "release": str(root / "release"),
        "foreign_dir": str(root / "foreign"),
    }
    paths.update({f"out:{k}": str(root / v) for k, v in OUT.items()})
    if set_total:
        argv = ["budget", paths["data"], "--set-total", "1"]
        if LEDGER_DIR_FLAG:
            argv += ["--ledger-dir", paths["ledger_dir"]]
        assert run_cli(argv).code == 0
    return paths


def resolve(case: CliCase, paths: dict[str, str]) -> tuple[list[str], str | None]:
    argv: list[str] = []
    out = None
    pieces = list(case.argv)
    i = 0
    while i < len(pieces):
        piece = pieces[i]
        if piece == "--ledger-dir" and not LEDGER_DIR_FLAG:
            i += 2
            continue
        if piece.startswith("{") and piece.endswith("}") and piece[1:-1] in paths:
            piece = paths[piece[1:-1]]
            if pieces[i][1:].startswith("out:"):
                out = piece
        argv.append(piece)
        i += 1
    return argv, out


def check(case: CliCase, set_total: bool, seen: Counter[str]) -> None:
    with sandbox() as root:
        paths = build(root, set_total)
        argv, out = resolve(case, paths)
        ledgers = ledger_dir(root)
        # $DPCUBE_HOME is dpcube's own state (ledgers, their index): checked by ledger_state.
        home = root / "home"
        before, ledger_before = snapshot(root, (home,)), ledger_state(ledgers)
        result = run_cli(argv)
        after, ledger_after = snapshot(root, (home,)), ledger_state(ledgers)
        problems = error_problems(result)
        assert not problems, (argv, problems)
        changes = diff(before, after)
        assert not changes["removed"] and not changes["changed"], (argv, changes)
        seen[f"{case.command}:{'ok' if result.code == 0 else 'refused'}"] += 1
        event(f"{case.command}: {'ok' if result.code == 0 else 'refused'}")
        if result.code != 0:
            assert not changes["added"], (argv, "a failed command wrote", changes["added"])
            assert all_charges(ledger_after) == all_charges(ledger_before), (argv, "charged")
            totals = {k: v["total"] for k, v in ledger_before.items()}
            assert {k: v["total"] for k, v in ledger_after.items() if k in totals} == totals, (
                argv,
                "a failed command changed a total",
            )
            return
        writes = case.command in ("release", "demo")
        for added in changes["added"]:
            assert writes and out is not None, (argv, "wrote", added)
            assert (root / added).resolve().is_relative_to(Path(out).resolve()), (argv, added)
        new = set(all_charges(ledger_after)) - set(all_charges(ledger_before))
        if case.command == "release":
            assert out is not None
            assert len(new) == 1, (argv, new)
            eps = next(a.split("=", 1)[1] for a in argv if a.startswith("--epsilon="))
            assert float(next(iter(new))[1]) == float(eps)
            assert load_release(out).schema == Schema.from_file(paths["schema"])
        elif case.command != "demo":
            assert not new, (argv, "charged", new)


def _run(strategy: st.SearchStrategy[CliCase], n: int, min_ok: float, min_refused: float) -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=cases(n))
    @given(strategy, st.booleans())
    def prop(case: CliCase, set_total: bool) -> None:
        check(case, set_total, seen)

    prop()
    ok = sum(v for k, v in seen.items() if k.endswith(":ok"))
    total = sum(seen.values())
    assert ok >= min_ok * total and total - ok >= min_refused * total, seen


def test_release_command_lines() -> None:
    _run(release_argv(), 250, 0.02, 0.3)


def test_query_command_lines() -> None:
    _run(query_argv(), 120, 0.1, 0.2)


def test_budget_command_lines() -> None:
    _run(budget_argv(), 120, 0.1, 0.2)


def test_plan_command_lines() -> None:
    _run(plan_argv(), 120, 0.05, 0.3)


def test_demo_command_lines() -> None:
    _run(demo_argv(), 25, 0.05, 0.3)
