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


def release_rounds(
    ledger_dir: str, plans: list[tuple[str, float, float]], barrier: Any, results: Any
) -> None:
    """For each ``(data set name, total, epsilon)`` of ``plans`` (one per round): wait for the
    others at ``barrier``, then release a two-cell histogram with ``Identity(epsilon)`` through
    the API, asking for the total ``total``; report ``(total, epsilon, "released", release id)``
    or ``(total, epsilon, "refused", why)``. One process serves every round, so that the test
    pays for starting it once."""
    import numpy as np

    from dpcube.histogram import Histogram
    from dpcube.mechanisms.identity import Identity
    from dpcube.privacy.accounting import name_identity
    from dpcube.privacy.ledger import RequestedTotal
    from dpcube.schema import Schema

    schema = Schema.from_dict(
        {"attributes": [{"name": "sex", "kind": "nominal", "categories": ["F", "M"]}]}
    )
    hist = Histogram(schema, np.array([3, 4]))
    for name, total, epsilon in plans:
        ledger = BudgetLedger.for_identity(name_identity(name), ledger_dir)
        barrier.wait(timeout=300)
        try:
            release = Identity(epsilon).release(
                hist, ledger=ledger, requested_total=RequestedTotal(total)
            )
        except BudgetError as exc:
            results.put((total, epsilon, "refused", str(exc)))
        else:
            results.put((total, epsilon, "released", release.metadata.release_id))
