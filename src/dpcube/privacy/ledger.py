"""The privacy budget ledger: one SQLite file per protected data set.

Every release is charged here *before* any noise is drawn, in one ``BEGIN IMMEDIATE``
transaction that reads what was spent, refuses a charge that would exceed the total, and records
the charge. SQLite's write lock serialises concurrent processes, so two processes racing for the
last of the budget cannot both win; its journal makes a committed charge survive a crash.
Amounts are summed exactly (as decimal fractions of their shortest repr), so ten charges of 0.1
fit a total of 1.

>>> import tempfile, os
>>> d = tempfile.mkdtemp()
>>> ledger = BudgetLedger(os.path.join(d, "people.ledger"))
>>> ledger.set_total(1.0)
>>> _ = ledger.charge(0.25, mechanism="identity")
>>> ledger.remaining().epsilon
0.75
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from dpcube.errors import BudgetError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS budget (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    dataset TEXT NOT NULL,
    total_epsilon TEXT NOT NULL,
    total_delta TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id TEXT NOT NULL UNIQUE,
    time REAL NOT NULL,
    mechanism TEXT NOT NULL,
    epsilon TEXT NOT NULL,
    delta TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT ''
);
"""


def _exact(x: float) -> Fraction:
    return Fraction(repr(float(x)))


def validate_privacy(epsilon: float, delta: float | None = None) -> None:
    """Refuse a non-positive or non-finite epsilon, or a delta outside [0, 1)."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float):
        raise BudgetError(f"epsilon must be a number, got {epsilon!r}")
    if not (epsilon > 0 and epsilon < float("inf")):
        raise BudgetError(f"epsilon must be positive and finite, got {epsilon}")
    if delta is not None and not (0 <= delta < 1):
        raise BudgetError(f"delta must be in [0, 1), got {delta}")


@dataclass(frozen=True)
class Budget:
    epsilon: float
    delta: float


@dataclass(frozen=True)
class Charge:
    release_id: str
    time: float
    mechanism: str
    epsilon: float
    delta: float
    note: str = ""


class BudgetLedger:
    """The spent and total budget of one data set, in a SQLite file at ``path``."""

    def __init__(self, path: str | os.PathLike[str], dataset: str = "") -> None:
        self.path = Path(path)
        self.dataset = dataset or self.path.stem
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.executescript(_SCHEMA)

    @classmethod
    def for_dataset(
        cls, data: str | os.PathLike[str], ledger_dir: str | os.PathLike[str] | None = None
    ) -> BudgetLedger:
        """The ledger of a data file: ``<ledger_dir>/<name>-<hash of its absolute path>.ledger``.

        ``ledger_dir`` defaults to ``$DPCUBE_HOME/ledgers`` (``~/.dpcube/ledgers``).
        """
        resolved = str(Path(data).resolve())
        base = (
            Path(ledger_dir)
            if ledger_dir
            else Path(os.environ.get("DPCUBE_HOME", Path.home() / ".dpcube")) / "ledgers"
        )
        digest = hashlib.sha256(resolved.encode()).hexdigest()[:16]
        return cls(base / f"{Path(resolved).name}-{digest}.ledger", dataset=resolved)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            yield con
        finally:
            con.close()

    def set_total(self, epsilon: float, delta: float = 0.0) -> None:
        """Set (or change) the total budget of the data set."""
        validate_privacy(epsilon, delta)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            con.execute(
                "INSERT INTO budget (id, dataset, total_epsilon, total_delta, created) VALUES (1, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET total_epsilon = excluded.total_epsilon, total_delta = excluded.total_delta",
                (self.dataset, repr(float(epsilon)), repr(float(delta)), time.time()),
            )
            con.execute("COMMIT")

    def has_total(self) -> bool:
        with self._connect() as con:
            return con.execute("SELECT 1 FROM budget WHERE id = 1").fetchone() is not None

    def total(self) -> Budget:
        with self._connect() as con:
            row = con.execute(
                "SELECT total_epsilon, total_delta FROM budget WHERE id = 1"
            ).fetchone()
        if row is None:
            raise BudgetError(
                f"no total budget is set for {self.dataset!r}; set one with "
                "`dpcube budget DATA --set-total EPSILON` (or pass --total-epsilon)"
            )
        return Budget(float(row[0]), float(row[1]))

    @staticmethod
    def _spent(con: sqlite3.Connection) -> tuple[Fraction, Fraction]:
        eps, delta = Fraction(0), Fraction(0)
        for e, d in con.execute("SELECT epsilon, delta FROM charges"):
            eps += Fraction(e)
            delta += Fraction(d)
        return eps, delta

    def spent(self) -> Budget:
        with self._connect() as con:
            eps, delta = self._spent(con)
        return Budget(float(eps), float(delta))

    def remaining(self) -> Budget:
        total = self.total()
        with self._connect() as con:
            eps, delta = self._spent(con)
        return Budget(float(_exact(total.epsilon) - eps), float(_exact(total.delta) - delta))

    def charges(self) -> list[Charge]:
        with self._connect() as con:
            rows = con.execute(
                "SELECT release_id, time, mechanism, epsilon, delta, note FROM charges ORDER BY seq"
            ).fetchall()
        return [Charge(r[0], r[1], r[2], float(r[3]), float(r[4]), r[5]) for r in rows]

    def charge(
        self,
        epsilon: float,
        delta: float | None = None,
        *,
        mechanism: str,
        release_id: str | None = None,
        note: str = "",
    ) -> Charge:
        """Record a release's cost, or raise :class:`BudgetError` (and record nothing) if it does not fit."""
        validate_privacy(epsilon, delta)
        delta = 0.0 if delta is None else float(delta)
        release_id = release_id or uuid.uuid4().hex
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                row = con.execute(
                    "SELECT total_epsilon, total_delta FROM budget WHERE id = 1"
                ).fetchone()
                if row is None:
                    raise BudgetError(
                        f"no total budget is set for {self.dataset!r}; set one with "
                        "`dpcube budget DATA --set-total EPSILON` (or pass --total-epsilon)"
                    )
                total_eps, total_delta = Fraction(row[0]), Fraction(row[1])
                spent_eps, spent_delta = self._spent(con)
                if spent_eps + _exact(epsilon) > total_eps:
                    raise BudgetError(
                        f"epsilon {epsilon} exceeds the remaining budget of {self.dataset!r}: "
                        f"{float(total_eps - spent_eps):.6g} of {float(total_eps):.6g} left; "
                        "use a smaller epsilon or raise the total"
                    )
                if spent_delta + _exact(delta) > total_delta:
                    raise BudgetError(
                        f"delta {delta} exceeds the remaining delta of {self.dataset!r}: "
                        f"{float(total_delta - spent_delta):.6g} of {float(total_delta):.6g} left"
                    )
                stamp = time.time()
                con.execute(
                    "INSERT INTO charges (release_id, time, mechanism, epsilon, delta, note) VALUES (?, ?, ?, ?, ?, ?)",
                    (release_id, stamp, mechanism, repr(float(epsilon)), repr(delta), note),
                )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return Charge(release_id, stamp, mechanism, float(epsilon), delta, note)
