"""The total budget and the charge are one transaction: a property test over racing processes.

Each round starts, on a fresh ledger, processes that release at once with a random
``--total-epsilon`` and a random epsilon, some through the API (``Mechanism.release(...,
requested_total=...)``), some through ``python -m dpcube release``. Whatever the interleaving:

- every successful release asked for the total the ledger records, and the spent budget is at
  most that total;
- the ledger holds exactly the successful releases' charges;
- a refused release records nothing: a round where none succeeds leaves no total at all;
- every refusal is one line saying the budget does not fit or the total differs.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import dpcube
from dpcube.privacy.accounting import name_identity
from dpcube.privacy.ledger import BudgetLedger

#: Processes per round: API processes (started together at a barrier) and command lines.
API_PROCESSES, CLI_PROCESSES, ROUNDS = 8, 3, 3
TOTALS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
EPSILONS = [0.1, 0.2, 0.3]
REFUSALS = ("exceeds the remaining budget", "differs from the total")


def _cli(tmp: Path, name: str, total: float, epsilon: float, k: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(dpcube.__file__).parents[1])}
    command = [
        sys.executable, "-m", "dpcube", "release", str(tmp / "people.csv"),
        "--schema", str(tmp / "schema.yaml"), "--mechanism", "identity",
        "--epsilon", str(epsilon), "--total-epsilon", str(total), "--dataset", name,
        "--ledger-dir", str(tmp / "ledgers"), "--out", str(tmp / f"{name}-{k}"),
        "--no-report", "--json",
    ]  # fmt: skip
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _check_round(ledger: BudgetLedger, outcomes: list[tuple[float, float, str, str]]) -> None:
    """The invariant, for one round's ``(total, epsilon, "released"|"refused", id or message)``."""
    released = [(t, e, rid) for t, e, kind, rid in outcomes if kind == "released"]
    for _, _, kind, text in outcomes:
        if kind == "refused":
            assert "\n" not in text.strip() and any(r in text for r in REFUSALS), text
    if not released:
        assert not ledger.has_total(), "a round where every release was refused set a total"
        assert ledger.charges() == []
        return
    total = ledger.total().epsilon
    asked = sorted({t for t, _, _ in released})
    assert asked == [total], f"releases asked for totals {asked}, the ledger records {total}"
    charges = ledger.charges()
    assert sorted(c.release_id for c in charges) == sorted(rid for _, _, rid in released)
    spent = sum((Fraction(repr(c.epsilon)) for c in charges), Fraction(0))
    assert spent == sum((Fraction(repr(e)) for _, e, _ in released), Fraction(0))
    assert spent <= Fraction(repr(total))


def test_racing_releases_keep_the_total_they_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))  # spawned processes inherit it
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from ledger_race_worker import release_rounds

    (tmp_path / "people.csv").write_text("sex\n" + "F\nM\n" * 20)
    (tmp_path / "schema.yaml").write_text(
        "attributes:\n  - {name: sex, kind: nominal, categories: [F, M]}\n"
    )
    draw = random.Random(25)
    names = [f"race{r}" for r in range(ROUNDS)]
    plans = [
        [(name, draw.choice(TOTALS), draw.choice(EPSILONS)) for name in names]
        for _ in range(API_PROCESSES)
    ]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(API_PROCESSES + 1)  # the API processes and this one, once per round
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=release_rounds,
            args=(str(tmp_path / "ledgers"), plan, barrier, results),
            daemon=True,  # a failed round does not leave them waiting at the barrier
        )
        for plan in plans
    ]
    for p in procs:
        p.start()
    differs = 0
    for name in names:
        clis = [(draw.choice(TOTALS), draw.choice(EPSILONS)) for _ in range(CLI_PROCESSES)]
        popens = [_cli(tmp_path, name, t, e, k) for k, (t, e) in enumerate(clis)]
        barrier.wait(timeout=120)  # the command lines are starting: release the API processes
        outcomes: list[tuple[float, float, str, str]] = [results.get(timeout=120) for _ in procs]
        for (t, e), popen in zip(clis, popens, strict=True):
            out, err = popen.communicate(timeout=120)
            if popen.returncode == 0:
                outcomes.append((t, e, "released", json.loads(out)["release_id"]))
            else:
                assert popen.returncode == 2, err
                outcomes.append((t, e, "refused", err.strip().removeprefix("error: ")))
        ledger = BudgetLedger.for_identity(name_identity(name), tmp_path / "ledgers")
        _check_round(ledger, outcomes)
        # The race was run: some release won each round, and some asked for another total.
        assert any(kind == "released" for _, _, kind, _ in outcomes)
        differs += sum("differs from the total" in text for _, _, _, text in outcomes)
    assert differs > 0
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
