"""A private choice of mechanism from noisy features of the data (``auto --adaptive``).

Kotsogiannis, Machanavajjhala, Hay and Miklau ("Pythia: Data Dependent Differentially Private
Algorithm Selection", SIGMOD 2017) spend a small part of the budget on a few noisy features of the
data (its scale, sparsity and skew, with the public domain size and epsilon) and choose the
algorithm by a decision tree learned offline, on public benchmark data, to minimise the regret
(the error of the chosen algorithm over the least error in hindsight). This module holds that
procedure:

- :func:`exact_features`: three integer measurements of the counts, each 1-Lipschitz in L1
  (so the vector of three has L1 sensitivity at most ``3 Δ`` for a histogram of L1 sensitivity
  ``Δ``): the total ``N``; the number of non-zero cells ``Z`` (a neighbour changes at most ``Δ``
  cells); and the mass of the largest ``k = ceil(n / 10)`` cells ``M`` (the sum of the k largest
  entries is a norm on the non-negative orthant (Ky Fan), so it changes by at most the L1 change);
- :func:`noisy_features`: those three plus discrete Laplace noise of scale ``3 Δ / ε_s``
  (Canonne, Kamath and Steinke, NeurIPS 2020, the project's exact sampler): ``ε_s``-DP;
- :func:`rule_inputs`: what the rule reads, computed from the noisy values and public figures
  only (post-processing): ``log_signal = log10(ε N)``, ``log_cell_signal = log10(ε N / n)``,
  ``density = Z / n``, ``skew = M / N`` (0.1 for uniform data, 1 when a tenth of the cells hold
  everything), ``log_domain = log10 n`` and ``log_epsilon = log10 ε`` (public, exact: where the
  noisy features are too noisy to read, the rule can still split on the budget);
- :class:`SelectionRule`: a regret tree per dimension (1-D, 2-D) whose leaves rank the
  mechanisms, shipped as ``pythia_rule.json`` beside this module and refitted by
  ``python -m experiments pythia_train`` (:func:`fit_tree` is the fit).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import DataError
from dpcube.privacy.random import RandomSource
from dpcube.privacy.samplers import discrete_laplace, laplace_scale_rational

#: The measured features, in the order of the noisy vector.
FEATURES = ("total", "nonzero", "top_mass")
#: The share of cells whose mass measures skew (the largest tenth).
TOP_SHARE = 0.1
#: Default share of the budget spent on the features. With three features at L1 sensitivity 3,
#: 5 % of epsilon gives the total a noise scale of 60/epsilon, which places ``log10(ε N)`` within
#: about +-0.1 once ``ε N`` exceeds about 600 (the regions where the choice turns are an order of
#: magnitude wide); the other 95 % cost the release a factor 1/0.95 = 1.05 of its error scale,
#: within the 1.1x of the oracle the choice aims at.
DEFAULT_SELECTION_SHARE = 0.05
#: The inputs the rule's splits read (:func:`rule_inputs`).
RULE_INPUTS = ("log_signal", "log_cell_signal", "density", "skew", "log_domain", "log_epsilon")
#: The rule file shipped with the package.
RULE_FILE = "pythia_rule.json"


def top_cells(n: int) -> int:
    """How many of the ``n`` cells measure skew: ``ceil(TOP_SHARE * n)``, at least 1.

    >>> top_cells(4096), top_cells(5)
    (410, 1)
    """
    return max(1, math.ceil(TOP_SHARE * n - 1e-9))


def exact_features(counts: NDArray[Any]) -> NDArray[np.int64]:
    """``[N, Z, M]`` of the counts: total, non-zero cells, mass of the :func:`top_cells` largest.

    >>> exact_features(np.array([0, 5, 1, 0, 0, 0, 0, 0, 0, 0, 2])).tolist()
    [8, 3, 7]
    """
    x = np.asarray(counts, dtype=np.int64).ravel()
    k = top_cells(x.size)
    top = np.partition(x, x.size - k)[x.size - k :] if x.size else x
    return np.array([int(x.sum()), int(np.count_nonzero(x)), int(top.sum())], dtype=np.int64)


def feature_sensitivity(histogram_l1: float) -> float:
    """L1 sensitivity of :func:`exact_features` for a histogram of L1 sensitivity ``histogram_l1``:
    each of the three is 1-Lipschitz in the L1 norm of the counts, so ``3 * histogram_l1``."""
    return 3.0 * float(histogram_l1)


def noisy_features(
    counts: NDArray[Any], epsilon: float, histogram_l1: float, source: RandomSource
) -> dict[str, float]:
    """The features plus discrete Laplace noise of scale ``feature_sensitivity / epsilon``
    (rounded up to a rational, as every release here): ``epsilon``-DP."""
    t, s = laplace_scale_rational(feature_sensitivity(histogram_l1) / epsilon)
    noisy = exact_features(counts) + discrete_laplace(source, t, s, size=len(FEATURES))
    return {name: float(v) for name, v in zip(FEATURES, noisy, strict=True)}


def rule_inputs(features: Mapping[str, float], cells: int, epsilon: float) -> dict[str, float]:
    """What the rule reads, from the (noisy) features and public figures: the release's
    ``epsilon`` and the number of ``cells`` (post-processing; clipped to their ranges).

    >>> r = rule_inputs({"total": 1000, "nonzero": 10, "top_mass": 1000}, 100, 0.1)
    >>> r["log_signal"], r["density"], r["skew"]
    (2.0, 0.1, 1.0)
    """
    total = max(float(features["total"]), 1.0)
    return {
        "log_signal": math.log10(epsilon * total),
        "log_cell_signal": math.log10(epsilon * total / cells),
        "density": min(max(float(features["nonzero"]) / cells, 0.0), 1.0),
        "skew": min(max(float(features["top_mass"]) / total, 0.0), 1.0),
        "log_domain": math.log10(cells),
        "log_epsilon": math.log10(epsilon),
    }


# ------------------------------------------------------------------------------------------------
# The rule: a regret tree per dimension
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectionRule:
    """A decision tree per number of axes (``"1"``, ``"2"``; more axes use the 2-D tree).

    A node is ``{"feature": NAME, "threshold": T, "low": NODE, "high": NODE}`` (``low`` when the
    input is below ``T``) or a leaf ``{"ranking": [mechanism, ...], "rows": COUNT}``, the
    mechanisms by their mean log error ratio to the oracle over the leaf's training rows.
    """

    name: str
    version: int
    trees: Mapping[str, Mapping[str, Any]]
    trained_on: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelectionRule:
        try:
            trees = data["trees"]
            rule = cls(
                str(data["name"]), int(data["version"]), trees, str(data.get("trained_on", ""))
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"a selection rule needs name, version and trees: {exc}") from None
        for dims, tree in trees.items():
            _check_node(tree, f"trees[{dims}]")
        return rule

    @classmethod
    def shipped(cls) -> SelectionRule:
        """The rule shipped with the package (``dpcube/planning/pythia_rule.json``)."""
        text = resources.files("dpcube.planning").joinpath(RULE_FILE).read_text(encoding="utf-8")
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "trained_on": self.trained_on,
            "trees": dict(self.trees),
        }

    def tree_for(self, dims: int) -> Mapping[str, Any]:
        key = str(min(max(dims, 1), 2))
        if key not in self.trees:
            raise DataError(f"the selection rule {self.name!r} has no tree for {dims}-D data")
        return self.trees[key]

    def arms(self, dims: int) -> list[str]:
        """Every mechanism a leaf of the tree for ``dims`` axes ranks (in first-seen order)."""
        seen: list[str] = []
        for leaf in _leaves(self.tree_for(dims)):
            seen.extend(m for m in leaf["ranking"] if m not in seen)
        return seen

    def rank(self, dims: int, inputs: Mapping[str, float]) -> list[str]:
        """The leaf's ranking for ``inputs`` (:func:`rule_inputs`)."""
        node = self.tree_for(dims)
        while "ranking" not in node:
            node = node["low"] if inputs[node["feature"]] < node["threshold"] else node["high"]
        return list(node["ranking"])


def _check_node(node: Any, where: str) -> None:
    if not isinstance(node, Mapping):
        raise DataError(f"selection rule: {where} is not an object")
    if "ranking" in node:
        if not node["ranking"] or not all(isinstance(m, str) for m in node["ranking"]):
            raise DataError(f"selection rule: {where}.ranking must list mechanism names")
        return
    if node.get("feature") not in RULE_INPUTS or not isinstance(node.get("threshold"), int | float):
        raise DataError(
            f"selection rule: {where} needs a feature among {', '.join(RULE_INPUTS)} and a "
            "numeric threshold"
        )
    _check_node(node.get("low"), f"{where}.low")
    _check_node(node.get("high"), f"{where}.high")


def _leaves(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if "ranking" in node:
        return [node]
    return _leaves(node["low"]) + _leaves(node["high"])


# ------------------------------------------------------------------------------------------------
# The fit (offline, on public benchmark runs)
# ------------------------------------------------------------------------------------------------


def _filled(regret: NDArray[np.float64]) -> NDArray[np.float64]:
    """NaN (an arm that did not run on a row) as the row's worst regret plus one."""
    worst = np.nanmax(regret, axis=1, keepdims=True) + 1.0
    return np.where(np.isnan(regret), worst, regret)


def _ranking(regret: NDArray[np.float64], arms: Sequence[str]) -> list[str]:
    """Arms by their mean regret over the rows (NaN: not measured on a row, counted as the worst
    regret seen on that row plus one, so an arm that could not run never ranks first)."""
    order = np.argsort(_filled(regret).mean(axis=0), kind="stable")
    return [arms[i] for i in order]


def _leaf_cost(filled: NDArray[np.float64]) -> float:
    """The total regret of the one arm best over these rows (``filled``: see :func:`_filled`)."""
    return float(filled.sum(axis=0).min())


#: Candidate thresholds per input and node: midpoints between this many quantiles of its values.
SPLIT_QUANTILES = 48


def _thresholds(values: NDArray[np.float64]) -> list[float]:
    """Midpoints between consecutive distinct values, thinned to at most
    :data:`SPLIT_QUANTILES` of them (at quantiles of the values)."""
    distinct = np.unique(values)
    if len(distinct) > SPLIT_QUANTILES + 1:
        distinct = np.unique(np.quantile(distinct, np.linspace(0.0, 1.0, SPLIT_QUANTILES + 1)))
    return [float((lo + hi) / 2) for lo, hi in itertools.pairwise(distinct)]


def _best_split(
    inputs: NDArray[np.float64], filled: NDArray[np.float64], min_rows: int, lookahead: bool
) -> tuple[float, int, float] | None:
    """The (cost, input, threshold) of least cost (``filled``: the regret with NaN filled); with
    ``lookahead`` a split's cost is that of its two sides after each is split once more where
    that helps (so that an interaction, e.g. "dense *and* large", is found although neither
    split alone lowers the regret). Ties go to the split that is best on its own."""
    n = len(filled)
    best: tuple[float, float, int, float] | None = None
    for j in range(inputs.shape[1]):
        x = inputs[:, j]
        thresholds = np.array(_thresholds(x))
        if not len(thresholds):
            continue
        order = np.argsort(x, kind="stable")
        sums = np.cumsum(filled[order], axis=0)
        below = np.searchsorted(x[order], thresholds, side="left")  # rows with x < t
        for t, k in zip(thresholds.tolist(), below.tolist(), strict=True):
            if k < min_rows or n - k < min_rows:
                continue
            low_cost = float(sums[k - 1].min())
            high_cost = float((sums[-1] - sums[k - 1]).min())
            plain = cost = low_cost + high_cost
            if lookahead:
                cost = 0.0
                for side, side_cost in ((x < t, low_cost), (x >= t, high_cost)):
                    inner = _best_split(inputs[side], filled[side], min_rows, False)
                    cost += side_cost if inner is None else min(side_cost, inner[0])
            if (
                best is None
                or cost < best[0] - 1e-12
                or (cost <= best[0] + 1e-12 and plain < best[1] - 1e-12)
            ):
                best = (cost, plain, j, t)
    return None if best is None else (best[0], best[2], best[3])


def fit_tree(
    inputs: NDArray[np.float64],
    regret: NDArray[np.float64],
    arms: Sequence[str],
    *,
    max_depth: int = 3,
    min_rows: int = 6,
) -> dict[str, Any]:
    """A regret tree (Pythia's learning objective): ``inputs`` (rows x :data:`RULE_INPUTS`),
    ``regret`` (rows x arms) the log of each arm's error over the row's least error (NaN where
    the arm did not run). Each split is the (input, threshold between two observed values) that
    most lowers the total regret of choosing one arm per side, looking one split ahead on each
    side (a greedy tree misses a region such as "dense and large" that no single split
    separates); leaves rank the arms.
    """
    filled = _filled(regret)
    node_cost = _leaf_cost(filled)
    leaf = {"ranking": _ranking(regret, arms), "rows": len(regret)}
    if max_depth == 0 or len(regret) < 2 * min_rows:
        return leaf
    best = _best_split(inputs, filled, min_rows, lookahead=max_depth > 1)
    if best is None or best[0] >= node_cost - 1e-9:
        return leaf
    _, j, t = best
    low = inputs[:, j] < t
    return {
        "feature": RULE_INPUTS[j],
        "threshold": round(t, 6),
        "low": fit_tree(inputs[low], regret[low], arms, max_depth=max_depth - 1, min_rows=min_rows),
        "high": fit_tree(
            inputs[~low], regret[~low], arms, max_depth=max_depth - 1, min_rows=min_rows
        ),
    }


__all__ = [
    "DEFAULT_SELECTION_SHARE",
    "FEATURES",
    "RULE_INPUTS",
    "SelectionRule",
    "exact_features",
    "feature_sensitivity",
    "fit_tree",
    "noisy_features",
    "rule_inputs",
    "top_cells",
]
