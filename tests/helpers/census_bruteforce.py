"""Brute-force references for the census tests: Fioretto et al.'s Models 1-3 solved by enumeration
on tiny instances, over their full domains."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from dpcube.mechanisms.census.chain import build_chain, chain_vector, level_chain_values
from dpcube.mechanisms.census.hierarchy import RegionHierarchy

SPEC_H = {"GA": "US", "NY": "US"}


def compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of ``parts`` non-negative integers summing to ``total``."""
    for bars in itertools.combinations(range(total + parts - 1), parts - 1):
        prev, out = -1, []
        for b in bars:
            out.append(b - prev - 1)
            prev = b
        out.append(total + parts - 2 - prev)
        yield tuple(out)


def all_releases(h: RegionHierarchy, k: int, G: int) -> Iterator[NDArray[np.int64]]:
    """Every valid, consistent, faithful table: leaf tables summing to G, aggregated."""
    m = h.level_sizes[-1]
    for comp in compositions(G, m * k):
        yield h.aggregate(np.array(comp, dtype=np.int64).reshape(m, k))


def model1_costs(h: RegionHierarchy, noisy: NDArray[np.float64], G: int) -> list[float]:
    return sorted(float(np.sum((n - noisy) ** 2)) for n in all_releases(h, noisy.shape[1], G))


def model3_best(h: RegionHierarchy, noisy_chain: NDArray[np.float64], k: int, G: int) -> float:
    chain = build_chain(h, k)
    return min(
        float(np.sum((chain_vector(h, chain, level_chain_values(h, n)) - noisy_chain) ** 2))
        for n in all_releases(h, k, G)
    )


def random_hierarchy(
    rng: np.random.Generator, levels: int = 3, max_branch: int = 3
) -> RegionHierarchy:
    parents: dict[str, str | None] = {"N": None}
    frontier = ["N"]
    for _ in range(levels - 1):
        nxt = []
        for p in frontier:
            for j in range(int(rng.integers(1, max_branch + 1))):
                name = f"{p}{j}"
                parents[name] = p
                nxt.append(name)
        frontier = nxt
    return RegionHierarchy.from_parents(parents)


def random_table(
    rng: np.random.Generator, h: RegionHierarchy, k: int, mean: float = 2.0
) -> NDArray[np.int64]:
    return h.aggregate(rng.poisson(mean, size=(h.level_sizes[-1], k)))
