"""The out-of-domain policies an engine applies (see :mod:`dpcube.engine.base`) and the data
section of a release report that records what a policy did."""

from __future__ import annotations

from typing import Any, Literal

OutOfDomainPolicy = Literal["error", "drop", "clip"]
POLICIES: tuple[str, ...] = ("error", "drop", "clip")


def policy_report(
    policy: str, *, rows: int, counted: int, dropped: dict[str, int], clipped: dict[str, int]
) -> dict[str, Any]:
    """The data section of a release report."""
    return {
        "rows": rows,
        "counted": counted,
        "on_out_of_domain": policy,
        "dropped": dropped,
        "clipped": clipped,
    }
