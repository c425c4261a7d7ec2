"""The privacy core: randomness, exact samplers, neighbour notions and the budget ledger."""

from dpcube.privacy.ledger import BudgetLedger
from dpcube.privacy.neighbours import Neighbour
from dpcube.privacy.random import (
    NO_NOISE,
    RandomSource,
    SeededRandomSource,
    SystemRandomSource,
    resolve_random_state,
)

__all__ = [
    "NO_NOISE",
    "BudgetLedger",
    "Neighbour",
    "RandomSource",
    "SeededRandomSource",
    "SystemRandomSource",
    "resolve_random_state",
]
