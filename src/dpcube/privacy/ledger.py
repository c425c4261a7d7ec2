"""The privacy budget ledger: one SQLite file per protected data set.

Every release is charged here *before* any noise is drawn, in one ``BEGIN IMMEDIATE``
transaction that sets the total a release asks for when the ledger has none (or refuses one that
differs from the recorded total), reads what was spent, refuses a charge that would exceed the
total, and records the charge (:meth:`BudgetLedger.charge` with ``requested_total``). SQLite's
write lock serialises concurrent processes, so two processes racing for the last of the budget
cannot both win, and every release that succeeds was charged under the total it asked for; a
refused charge records nothing, not even the total. Its journal makes a committed charge survive
a crash.
Amounts are summed exactly (as decimal fractions of their shortest repr), so ten charges of 0.1
fit a total of 1.

A ledger is append-only and checked every time it is opened: ``PRAGMA quick_check``, a SHA-256
hash chain over the total and every charge (each row stores the hash of its content and of the
row before), and a head file ``<ledger>.head`` beside it holding the number of charges and the
last hash, so a truncated file, a hand-edited row or deleted trailing charges raise
:class:`BudgetError` naming the file and the recovery, never a silent fresh start.

Which ledger a data set uses is decided by its identity (:mod:`dpcube.privacy.accounting`): the
fingerprint of its records (:func:`dpcube.engine.fingerprint`) or an explicit name.

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
import json
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
    created REAL NOT NULL,
    chain TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id TEXT NOT NULL UNIQUE,
    time REAL NOT NULL,
    mechanism TEXT NOT NULL,
    epsilon TEXT NOT NULL,
    delta TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    chain TEXT NOT NULL DEFAULT ''
);
"""
_GENESIS = "dpcube-ledger-1"
_RECOVER = (
    "restore it from a backup (a ledger is append-only: a copy taken before the damage is safe); "
    "never delete it, as that would give the data set a fresh budget"
)


def _link(previous: str, *fields: object) -> str:
    """The hash chain: SHA-256 of the previous link and this row's fields."""
    return hashlib.sha256(json.dumps([previous, *map(str, fields)]).encode()).hexdigest()


def _home() -> Path:
    return Path(os.environ.get("DPCUBE_HOME", Path.home() / ".dpcube"))


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
class RequestedTotal:
    """The total budget a release asks for (``dpcube release --total-epsilon/--total-delta``).

    :meth:`BudgetLedger.charge` records it when the ledger has no total yet and refuses the charge
    when the recorded total differs, in the same transaction as the charge. ``delta=None`` means
    "not asked": 0 when the total is set, not compared with a recorded total.
    """

    epsilon: float
    delta: float | None = None


def _show(x: Fraction, near: float) -> str:
    """``x`` in six significant digits, or "less than ``near``" when those would print ``near``
    although ``x`` is smaller (1e300 - 1 prints as 1e+300, which would read as enough)."""
    text = f"{float(x):.6g}"
    if x < _exact(near) and text == f"{near:.6g}":
        return f"less than {near:.6g}"
    return text


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
        #: Where the data set was read from (a file name), for messages only; set by the CLI.
        self.source: str | None = None
        #: The last charge this object recorded (None before any): a front end that fails after
        #: the charge says what was spent.
        self.last_charge: Charge | None = None
        self.head = self.path.with_name(self.path.name + ".head")
        if self.head.exists() and not self.path.exists():
            raise BudgetError(
                f"the budget ledger {str(self.path)!r} is missing but its head file "
                f"{str(self.head)!r} records charges: {_RECOVER}"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._connect() as con:
                con.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(f"it is not a readable SQLite ledger ({exc})") from None
        self.verify()

    def _corrupt(self, why: str) -> BudgetError:
        return BudgetError(f"the budget ledger {str(self.path)!r} is corrupt: {why}; {_RECOVER}")

    @classmethod
    def for_dataset(
        cls,
        data: str | os.PathLike[str],
        ledger_dir: str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        home: str | os.PathLike[str] | None = None,
    ) -> BudgetLedger:
        """The ledger of the records in the file ``data`` (or of the data set called ``name``).

        The file is identified by the fingerprint of its records (:func:`dpcube.engine.fingerprint`),
        so a copy, a rename or a Parquet conversion meets the same ledger. A path that does not
        exist is refused.
        """
        from dpcube.privacy.identity import identity_of_path, name_identity

        identity = name_identity(name) if name else identity_of_path(data)
        return cls.for_identity(identity, ledger_dir, home=home)

    @classmethod
    def for_identity(
        cls,
        identity: str,
        ledger_dir: str | os.PathLike[str] | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
    ) -> BudgetLedger:
        """The ledger of a data set identity (``sha256:<fingerprint>`` or ``name:<NAME>``).

        Ledgers live in ``ledger_dir`` (default ``$DPCUBE_HOME/ledgers``, ``~/.dpcube/ledgers``).
        The per-user index ``$DPCUBE_HOME/ledger-index.sqlite`` records where each identity's
        ledger lives; a second directory for a known identity is refused, naming the first.
        ``home`` replaces ``$DPCUBE_HOME`` (the demo keeps its own).
        """
        root = Path(home) if home else _home()
        base = Path(ledger_dir) if ledger_dir else root / "ledgers"
        if identity.startswith("name:"):
            slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in identity[5:])[:60]
            stem = f"{slug}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
            label = identity[5:]
        else:
            # The file name is a hash of the fingerprint, not the fingerprint itself.
            stem = "data-" + hashlib.sha256(identity.encode()).hexdigest()[:24]
            label = stem
        path = (base / f"{stem}.ledger").resolve()
        index = root / "ledger-index.sqlite"
        index.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(index, timeout=60.0, isolation_level=None)
        try:
            con.execute(
                "CREATE TABLE IF NOT EXISTS ledgers (identity TEXT PRIMARY KEY, path TEXT NOT NULL)"
            )
            con.execute("BEGIN IMMEDIATE")
            con.execute(
                "INSERT OR IGNORE INTO ledgers (identity, path) VALUES (?, ?)",
                (identity, str(path)),
            )
            (known,) = con.execute(
                "SELECT path FROM ledgers WHERE identity = ?", (identity,)
            ).fetchone()
            con.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise BudgetError(
                f"the ledger index {str(index)!r} is unreadable ({exc}); restore it from a backup"
            ) from None
        finally:
            con.close()
        if known != str(path):
            raise BudgetError(
                f"this data set already has a ledger at {known!r}; use that ledger directory "
                f"(--ledger-dir {str(Path(known).parent)!r}) rather than starting a second one"
            )
        return cls(path, dataset=label)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            try:
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=FULL")
            except sqlite3.DatabaseError as exc:
                raise self._corrupt(f"it is not a readable SQLite ledger ({exc})") from None
            yield con
        finally:
            con.close()

    def set_total(self, epsilon: float, delta: float | None = None) -> None:
        """Set (or change) the total budget; a total below what is already spent is refused.

        ``delta=None`` keeps the current total delta (0 for a new ledger).
        """
        validate_privacy(epsilon, delta)
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                self._check(con)
                if delta is None:
                    current = con.execute("SELECT total_delta FROM budget WHERE id = 1").fetchone()
                    delta = float(current[0]) if current else 0.0
                spent_eps, spent_delta = self._spent(con)
                if _exact(epsilon) < spent_eps or _exact(delta) < spent_delta:
                    raise BudgetError(
                        f"cannot set the total of {self.dataset!r} to epsilon={epsilon}, delta={delta}: "
                        f"epsilon={float(spent_eps):.6g}, delta={float(spent_delta):.3g} is already spent "
                        "(a ledger cannot be rolled back); set a total at least that large"
                    )
                self._write_total(con, epsilon, delta)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def _write_total(self, con: sqlite3.Connection, epsilon: float, delta: float) -> None:
        """Record the total (inside the caller's transaction), chained like every charge."""
        row = con.execute("SELECT created FROM budget WHERE id = 1").fetchone()
        created = row[0] if row else time.time()
        eps_text, delta_text = repr(float(epsilon)), repr(float(delta))
        link = _link(_GENESIS, self.dataset_key(con), eps_text, delta_text, created)
        con.execute(
            "INSERT INTO budget (id, dataset, total_epsilon, total_delta, created, chain) "
            "VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
            "total_epsilon = excluded.total_epsilon, total_delta = excluded.total_delta, "
            "chain = excluded.chain",
            (self.dataset, eps_text, delta_text, created, link),
        )

    def _total_for_charge(
        self, con: sqlite3.Connection, requested: RequestedTotal | None
    ) -> tuple[Fraction, Fraction]:
        """The total a charge is checked against (inside its transaction): the recorded one, which
        must equal ``requested`` when given; else ``requested``, recorded now (it is rolled back
        with the charge if the charge is refused)."""
        row = self._recorded_total(con)
        if row is None:
            if requested is None:
                raise self._no_total_error()
            delta = 0.0 if requested.delta is None else float(requested.delta)
            self._write_total(con, requested.epsilon, delta)
            return _exact(requested.epsilon), _exact(delta)
        total_eps, total_delta = Fraction(row[0]), Fraction(row[1])
        if requested is not None:
            self._check_requested(total_eps, total_delta, requested)
        return total_eps, total_delta

    def _check_requested(
        self, total_eps: Fraction, total_delta: Fraction, requested: RequestedTotal
    ) -> None:
        """Refuse a requested total that differs from the recorded one, naming both and the fix."""
        data = self.source or "DATA"
        recorded = f"epsilon={float(total_eps):g}, delta={float(total_delta):g}"
        if _exact(requested.epsilon) != total_eps:
            raise BudgetError(
                f"--total-epsilon {requested.epsilon:g} differs from the total budget already "
                f"recorded for {self._described()} ({recorded}); drop --total-epsilon to use the "
                f"recorded total, or change it with `dpcube budget {data} --set-total "
                f"{requested.epsilon:g}`"
            )
        if requested.delta is not None and _exact(requested.delta) != total_delta:
            raise BudgetError(
                f"--total-delta {requested.delta:g} differs from the total delta already recorded "
                f"for {self._described()} ({recorded}); drop --total-delta to use the recorded "
                f"total, or change it with `dpcube budget {data} --set-total "
                f"{float(total_eps):g} --set-total-delta {requested.delta:g}`"
            )

    def check_requested_total(self, requested: RequestedTotal) -> None:
        """Refuse early (before the data is counted) a requested total that differs from the
        recorded one; :meth:`charge` checks it again, in the transaction of the charge."""
        with self._connect() as con:
            row = self._recorded_total(con)
        if row is not None:
            self._check_requested(Fraction(row[0]), Fraction(row[1]), requested)

    def dataset_key(self, con: sqlite3.Connection) -> str:
        row = con.execute("SELECT dataset FROM budget WHERE id = 1").fetchone()
        return str(row[0]) if row else self.dataset

    # -- integrity --------------------------------------------------------------------------
    def _check(self, con: sqlite3.Connection) -> str:
        """Check the file, the hash chain and the head file; return the last link of the chain."""
        try:
            status = con.execute("PRAGMA quick_check").fetchone()
            if status is None or status[0] != "ok":
                raise self._corrupt(f"SQLite integrity check failed ({status})")
            budget = con.execute(
                "SELECT dataset, total_epsilon, total_delta, created, chain FROM budget WHERE id = 1"
            ).fetchone()
            rows = con.execute(
                "SELECT seq, release_id, time, mechanism, epsilon, delta, note, chain FROM charges "
                "ORDER BY seq"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(str(exc)) from None
        if budget is not None and budget[4] != _link(_GENESIS, *budget[:4]):
            raise self._corrupt("its total was edited outside dpcube (tampered)")
        link = _GENESIS
        for row in rows:
            expected = _link(link, *row[1:7])
            if row[7] != expected:
                raise self._corrupt(f"charge {row[0]} was edited outside dpcube (tampered)")
            link = expected
        head = self._read_head()
        if head is not None:
            count, head_link = head
            if count > len(rows) or (count and rows[count - 1][7] != head_link):
                raise self._corrupt(
                    f"it holds {len(rows)} charges but its head file {str(self.head)!r} records "
                    f"{count} (charges were deleted or the file was truncated)"
                )
        return link

    def _read_head(self) -> tuple[int, str] | None:
        try:
            text = self.head.read_text()
        except FileNotFoundError:
            return None
        try:
            value = json.loads(text)
            return int(value["charges"]), str(value["chain"])
        except (ValueError, KeyError, TypeError):
            raise self._corrupt(f"its head file {str(self.head)!r} is unreadable") from None

    def _write_head(self, count: int, link: str) -> None:
        from dpcube.files import write_atomic

        write_atomic(self.head, json.dumps({"charges": count, "chain": link}).encode())

    def verify(self) -> None:
        """Raise :class:`BudgetError` unless the ledger is whole (see the module docstring)."""
        with self._connect() as con:
            self._check(con)

    def _described(self) -> str:
        """The data set as a user knows it: its file when known, with the ledger's label."""
        if self.source:
            return f"the data in {self.source!r} (ledger {self.dataset!r})"
        return repr(self.dataset)

    def has_total(self) -> bool:
        with self._connect() as con:
            return con.execute("SELECT 1 FROM budget WHERE id = 1").fetchone() is not None

    def total(self) -> Budget:
        with self._connect() as con:
            row = self._recorded_total(con)
        if row is None:
            raise self._no_total_error()
        return Budget(float(row[0]), float(row[1]))

    @staticmethod
    def _recorded_total(con: sqlite3.Connection) -> tuple[str, str] | None:
        """The recorded (total epsilon, total delta) as stored (text); None when no total is set."""
        row = con.execute("SELECT total_epsilon, total_delta FROM budget WHERE id = 1").fetchone()
        return None if row is None else (row[0], row[1])

    def _no_total_error(self) -> BudgetError:
        """The refusal of a ledger with no total, naming the data set and the two fixes."""
        return BudgetError(
            f"no total budget is set for {self._described()}; set one with "
            f"`dpcube budget {self.source or 'DATA'} --set-total EPSILON` "
            "(or pass --total-epsilon)"
        )

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
        requested_total: RequestedTotal | None = None,
    ) -> Charge:
        """Record a release's cost, or raise :class:`BudgetError` (and record nothing) if it does not fit.

        ``requested_total``: the total the release asks for. A ledger with no total records it, a
        ledger whose total differs refuses the charge; both in the one transaction of the charge,
        so a refused charge leaves the ledger as it was (no total recorded either), and any
        interleaving of releases leaves every successful one charged under the total it asked for.
        """
        validate_privacy(epsilon, delta)
        if requested_total is not None:
            validate_privacy(requested_total.epsilon, requested_total.delta)
        delta = 0.0 if delta is None else float(delta)
        release_id = release_id or uuid.uuid4().hex
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                last = self._check(con)
                total_eps, total_delta = self._total_for_charge(con, requested_total)
                spent_eps, spent_delta = self._spent(con)
                if spent_eps + _exact(epsilon) > total_eps:
                    raise BudgetError(
                        f"epsilon {epsilon} exceeds the remaining budget of {self.dataset!r}: "
                        f"{_show(total_eps - spent_eps, epsilon)} of {float(total_eps):.6g} left "
                        f"({float(spent_eps):.6g} spent); use a smaller epsilon or raise the total"
                    )
                if spent_delta + _exact(delta) > total_delta:
                    raise BudgetError(
                        f"delta {delta} exceeds the remaining delta of {self.dataset!r}: "
                        f"{_show(total_delta - spent_delta, delta)} of {float(total_delta):.6g} "
                        "left; use a smaller delta or raise the total delta"
                    )
                stamp = time.time()
                eps_text = repr(float(epsilon))
                link = _link(last, release_id, stamp, mechanism, eps_text, repr(delta), note)
                con.execute(
                    "INSERT INTO charges (release_id, time, mechanism, epsilon, delta, note, chain) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (release_id, stamp, mechanism, eps_text, repr(delta), note, link),
                )
                (count,) = con.execute("SELECT count(*) FROM charges").fetchone()
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        # After the commit: a crash here leaves the head one charge behind, which is accepted.
        self.last_charge = Charge(release_id, stamp, mechanism, float(epsilon), delta, note)
        self._write_head(int(count), link)
        return self.last_charge
