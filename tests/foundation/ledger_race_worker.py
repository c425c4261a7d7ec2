"""The racing process of ``test_core_ledger`` (a small module, so that spawned processes start fast)."""

from __future__ import annotations

from typing import Any

from dpcube.errors import BudgetError
from dpcube.privacy.ledger import BudgetLedger


def race(path: str, barrier: Any, results: Any) -> None:
    """Wait for all the other processes, then try to charge 0.2 to the ledger at ``path``."""
    ledger = BudgetLedger(path)
    barrier.wait()
    try:
        charge = ledger.charge(0.2, mechanism="race")
    except BudgetError as exc:
        results.put(("refused", str(exc)))
    else:
        results.put(("charged", charge.release_id))
