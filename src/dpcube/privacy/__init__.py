"""The privacy core: randomness, exact samplers, neighbour notions, the privacy unit and the
budget ledger."""

from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import (
    NO_NOISE,
    RandomSource,
    SeededRandomSource,
    SystemRandomSource,
    resolve_random_state,
)
from dpcube.privacy.unit import ROW, PrivacyUnit

__all__ = [
    "NO_NOISE",
    "ROW",
    "BudgetLedger",
    "Neighbour",
    "PrivacyUnit",
    "RandomSource",
    "SeededRandomSource",
    "SystemRandomSource",
    "resolve_random_state",
]
