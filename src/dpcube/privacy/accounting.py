"""Which ledger a release is charged to, and the charge itself (docs/reliability.md section 4).

A data set is identified by its records, not by a path: ``sha256:<fingerprint>`` from
:func:`dpcube.engine.fingerprint` (one DuckDB scan; a copy, rename or Parquet conversion of the
same records has the same identity), or ``name:<NAME>`` when the curator names it
(``--dataset NAME``, ``dpcube.histogram(..., dataset=NAME)``), which wins. The identity is the
curator's: it selects the ledger and is never written into a release.

:func:`charge_release` is the one accounting step of :meth:`dpcube.mechanisms.base.Mechanism.release`:

- seeded or noiseless releases (tests, never for publication) are charged only to a ledger
  passed explicitly;
- otherwise, with ``account=True`` (the default), the ledger passed, or else the data set's own
  ledger, is charged once, before any noise is drawn;
- ``account=False`` releases unaccounted: ``metadata.accounted`` is False, the manifest says so
  and the release is not for publication.
"""

from __future__ import annotations

import os
from typing import Any

from dpcube.errors import BudgetError
from dpcube.privacy.identity import identity_of_path as identity_of_path
from dpcube.privacy.identity import name_identity as name_identity
from dpcube.privacy.ledger import BudgetLedger, RequestedTotal


def identity_of(data: Any) -> str | None:
    """The data set identity an input of ``release`` carries (``None`` for bare counts)."""
    if isinstance(data, str):
        return data
    identity = getattr(data, "dataset", None)
    return str(identity) if identity else None


def ledger_for(data: Any, ledger_dir: str | os.PathLike[str] | None = None) -> BudgetLedger:
    """The ledger of ``data``'s data set: a histogram (or other ``release`` input) or an identity string.

    >>> # ledger_for(dpcube.histogram("people.csv", schema)).set_total(1.0)
    """
    identity = identity_of(data)
    if identity is None:
        raise BudgetError(
            f"this {type(data).__name__} has no data set identity (it was built from bare counts): "
            "pass ledger=BudgetLedger(...), build it with dpcube.histogram(source, schema[, dataset=NAME]), "
            "or release it unaccounted with account=False"
        )
    return BudgetLedger.for_identity(identity, ledger_dir)


def charge_release(
    mechanism: Any,
    data: Any,
    metadata: Any,
    *,
    ledger: BudgetLedger | None,
    account: bool,
    seeded: bool,
    origin: Any = None,
    requested_total: RequestedTotal | None = None,
) -> BudgetLedger | None:
    """Charge ``mechanism``'s cost for releasing ``data`` once, or record that it is unaccounted.

    ``data`` is the prepared input; ``origin`` the caller's input, whose identity is used when a
    ``prepare`` step built a new object without one. ``requested_total`` is set as the ledger's
    total if it has none, or must equal the recorded one, in the transaction of the charge
    (:meth:`BudgetLedger.charge`). Returns the ledger charged (``None`` when the release is
    unaccounted).
    """
    if not account and ledger is not None:
        raise BudgetError("account=False releases unaccounted: do not pass a ledger as well")
    if not account and requested_total is not None:
        raise BudgetError("account=False releases unaccounted: do not pass a total budget as well")
    if ledger is None and (seeded or not account):
        metadata.accounted = False
        return None
    if ledger is None:
        identity = identity_of(data) or (identity_of(origin) if origin is not None else None)
        ledger = ledger_for(identity if identity else data)
    ledger.charge(
        mechanism.epsilon,
        mechanism.charged_delta,
        mechanism=mechanism.name,
        release_id=metadata.release_id,
        requested_total=requested_total,
    )
    metadata.accounted = True
    return ledger
