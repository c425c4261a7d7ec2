"""The budget ledger: atomic across processes, exact sums, clear refusals, durable."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpcube.errors import BudgetError
from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.ledger import Budget, BudgetLedger, RequestedTotal
from dpcube.privacy.random import SeededRandomSource
from dpcube.schema import Schema

PROCESSES = 20


def test_twenty_processes_race_for_five_releases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker lives in a small module of its own so that the spawned processes start fast;
    # spawned processes inherit sys.path, so they can import it too.
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from ledger_race_worker import race

    path = tmp_path / "people.ledger"
    ledger = BudgetLedger(path)
    ledger.set_total(1.0)  # exactly five charges of 0.2 fit (summed exactly: 5 x 0.2 = 1)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [ctx.Process(target=race, args=(str(path), barrier, results)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    charged = [o for o in outcomes if o[0] == "charged"]
    refused = [o for o in outcomes if o[0] == "refused"]
    assert len(charged) == 5 and len(refused) == PROCESSES - 5
    assert all("exceeds the remaining budget" in msg for _, msg in refused)
    charges = BudgetLedger(path).charges()
    assert len(charges) == 5
    assert sorted(c.release_id for c in charges) == sorted(r for _, r in charged)
    assert BudgetLedger(path).remaining().epsilon == 0.0


def test_refusal_names_the_budget_left(tmp_path: Path) -> None:
    ledger = BudgetLedger(tmp_path / "d.ledger", dataset="people.csv")
    ledger.set_total(1.0)
    ledger.charge(0.7, mechanism="identity")
    with pytest.raises(BudgetError) as info:
        ledger.charge(0.5, mechanism="identity")
    message = str(info.value)
    assert "\n" not in message
    assert "0.3 of 1 left" in message and "people.csv" in message and "0.5" in message
    assert len(ledger.charges()) == 1  # the refused charge left no trace


def test_totals_spent_remaining_and_charges(tmp_path: Path) -> None:
    ledger = BudgetLedger(tmp_path / "d.ledger")
    assert not ledger.has_total()
    with pytest.raises(BudgetError, match="no total budget"):
        ledger.total()
    with pytest.raises(BudgetError, match="no total budget"):
        ledger.charge(0.1, mechanism="identity")
    ledger.set_total(2.0, 1e-5)
    assert ledger.has_total()
    first = ledger.charge(0.5, mechanism="identity", release_id="r1", note="first")
    ledger.charge(0.25, 4e-6, mechanism="privelet")
    assert first.release_id == "r1" and first.epsilon == 0.5 and first.delta == 0.0
    assert ledger.total().epsilon == 2.0 and ledger.total().delta == 1e-5
    assert ledger.spent().epsilon == 0.75 and ledger.spent().delta == 4e-6
    assert ledger.remaining().epsilon == 1.25 and ledger.remaining().delta == pytest.approx(6e-6)
    charges = ledger.charges()
    assert [c.mechanism for c in charges] == ["identity", "privelet"]
    assert charges[0].note == "first" and charges[0].time <= charges[1].time
    with pytest.raises(BudgetError, match="remaining delta"):
        ledger.charge(0.1, 7e-6, mechanism="identity")
    ledger.set_total(3.0)  # raising the total lets more through
    assert ledger.remaining().epsilon == 2.25


def test_exact_decimal_summation(tmp_path: Path) -> None:
    """Ten charges of 0.1 fit a total of 1.0 exactly (float sums would give 0.9999999999999999)."""
    assert sum([0.1] * 10) != 1.0
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0)
    for _ in range(10):
        ledger.charge(0.1, mechanism="identity")
    assert ledger.remaining().epsilon == 0.0
    with pytest.raises(BudgetError, match="0 of 1 left"):
        ledger.charge(1e-12, mechanism="identity")


def test_ledger_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "d.ledger"
    ledger = BudgetLedger(path)
    ledger.set_total(1.0)
    ledger.charge(0.4, mechanism="identity", release_id="abc")
    del ledger
    again = BudgetLedger(path)
    assert [c.release_id for c in again.charges()] == ["abc"]
    assert again.remaining().epsilon == 0.6
    with sqlite3.connect(path) as con:  # plain SQLite: the record is there for any auditor
        assert con.execute("SELECT count(*) FROM charges").fetchone()[0] == 1


@pytest.mark.parametrize("epsilon", [0, -1.0, float("inf"), float("nan"), "1", True])
def test_invalid_epsilon_is_refused(tmp_path: Path, epsilon: Any) -> None:
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0)
    with pytest.raises(BudgetError, match="epsilon"):
        ledger.charge(epsilon, mechanism="identity")
    with pytest.raises(BudgetError, match="epsilon"):
        Identity(epsilon)
    assert ledger.charges() == []


def test_invalid_delta_is_refused(tmp_path: Path) -> None:
    ledger = BudgetLedger(tmp_path / "d.ledger")
    with pytest.raises(BudgetError, match="delta"):
        ledger.set_total(1.0, 1.0)
    with pytest.raises(BudgetError, match="delta"):
        Identity(1.0, delta=-0.1)


def test_for_dataset_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ledgers follow the records (docs/reliability.md section 4), not the path.
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    for folder, rows in (("x", "1,F\n2,M\n"), ("y", "2,M\n1,F\n"), ("z", "3,F\n")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "people.csv").write_text("age,sex\n" + rows)
    a = BudgetLedger.for_dataset(tmp_path / "x" / "people.csv")
    b = BudgetLedger.for_dataset(tmp_path / "y" / "people.csv")
    c = BudgetLedger.for_dataset(tmp_path / "z" / "people.csv")
    assert a.path == b.path != c.path
    assert a.path.parent == tmp_path / "home" / "ledgers" and "people" not in a.path.name
    d = BudgetLedger.for_dataset(tmp_path / "z" / "people.csv", name="z", ledger_dir=tmp_path / "e")
    assert d.path.parent == tmp_path / "e" and d.path.name.startswith("z-")


def test_refused_release_draws_no_noise(tmp_path: Path) -> None:
    """A release that does not fit is refused before any random word is drawn."""

    class Counting(SeededRandomSource):
        words_drawn = 0

        def words(self, n: int) -> Any:
            Counting.words_drawn += n
            return super().words(n)

    schema = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "nominal", "categories": ["a", "b"]}]}
    )
    hist = Histogram(schema, np.array([3, 4]))
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1.0)
    Identity(0.6).release(hist, random_state=Counting(1), ledger=ledger)
    assert Counting.words_drawn > 0
    Counting.words_drawn = 0
    with pytest.raises(BudgetError, match=r"0\.4 of 1 left"):
        Identity(0.6).release(hist, random_state=Counting(2), ledger=ledger)
    assert Counting.words_drawn == 0
    assert len(ledger.charges()) == 1


def test_a_short_budget_never_reads_as_enough(tmp_path: Path) -> None:
    """1e300 - 1 prints as 1e+300 in six digits: the refusal must not claim 1e+300 is left."""
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1e300)
    ledger.charge(1.0, mechanism="identity")
    with pytest.raises(BudgetError) as info:
        ledger.charge(1e300, mechanism="identity")
    assert "less than 1e+300 of 1e+300 left (1 spent)" in str(info.value)


def test_requested_total_is_set_with_the_charge_or_not_at_all(tmp_path: Path) -> None:
    ledger = BudgetLedger(tmp_path / "d.ledger")
    with pytest.raises(BudgetError, match="exceeds the remaining budget"):
        ledger.charge(0.5, mechanism="identity", requested_total=RequestedTotal(0.2))
    assert not ledger.has_total() and ledger.charges() == []  # the refusal recorded nothing
    ledger.charge(0.1, mechanism="identity", requested_total=RequestedTotal(0.2))
    assert ledger.total() == Budget(0.2, 0.0) and ledger.spent().epsilon == 0.1
    ledger.charge(0.1, mechanism="identity", requested_total=RequestedTotal(0.2, 0.0))
    for requested, flag in ((RequestedTotal(0.3), "--total-epsilon 0.3"),
                            (RequestedTotal(0.2, 1e-6), "--total-delta 1e-06")):  # fmt: skip
        with pytest.raises(BudgetError, match="differs from the total") as info:
            ledger.charge(1e-3, mechanism="identity", requested_total=requested)
        assert flag in str(info.value)
        with pytest.raises(BudgetError, match="differs from the total"):
            ledger.check_requested_total(requested)
    assert len(ledger.charges()) == 2 and ledger.total() == Budget(0.2, 0.0)


def test_an_epsilon_beyond_the_smallest_noise_scale_is_refused(tmp_path: Path) -> None:
    """Noise of scale below 2**-8 is no noise (its variance is 0 in floating point): refused as
    such before the charge, not as a budget too short."""
    schema = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "nominal", "categories": ["a", "b"]}]}
    )
    hist = Histogram(schema, np.array([3, 4]))
    ledger = BudgetLedger(tmp_path / "d.ledger")
    ledger.set_total(1e300)
    with pytest.raises(BudgetError, match=r"too large.*use epsilon <= 256"):
        Identity(1e300).release(hist, ledger=ledger)
    assert ledger.charges() == []
    Identity(256.0).release(hist, ledger=ledger)  # the largest accepted
    assert len(ledger.charges()) == 1
