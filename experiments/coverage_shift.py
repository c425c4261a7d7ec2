"""Why a clustered bootstrap world fails a partition that does not depend on the data.

The measurement of experiments/docs/coverage.md, "Fixed partitions".

UG's grid (and the quadtree's leaves) are the same in every bootstrap re-run, so in a world
scattered by the clustering cascade (:func:`dpcube.mechanisms.spatial.release.cascade_spread`)
each query's uniformity error is one number, the same in every replicate: a *shift* of the
bootstrap errors. This module measures, for releases of a real grid, in that clustered world:

- ``shift_over_model_sd``: the median over the flagged answers (modelled uniformity variance
  ``r V_u`` above the bootstrap's mean square error) of ``|mean bootstrap error| / sqrt(r V_u)``:
  how big the single draw is against the model's sd;
- ``actual_over_bootstrap_mse``: the actual mean square error over the bootstrap's (1 = honest);
- ``actual_over_model_mse``: the actual mean square error over ``r V_u`` plus the replicates'
  variance (what the even world and the widening state).

Command (the figures of the docs page)::

    python -m experiments.coverage_shift --data-dir ../shared/data --mechanism ug --epsilon 0.1
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray


def clustered_world_errors(
    release: Any, queries: list[dict[str, Any]], runs: int, seed: int
) -> NDArray[np.float64]:
    """The (runs, q) bootstrap errors in the world clustered as the release's leaf pairs say
    (whatever world the release itself would use)."""
    world = release.bootstrap_world(dispersion=release.uniformity_dispersion())
    truth = np.asarray(world.truth.answer_many(queries), dtype=np.float64)
    out = np.empty((runs, len(queries)))
    for b in range(runs):
        rep = world.replicate(np.random.default_rng([seed, b]))
        out[b] = np.asarray(rep.answer_many(queries), dtype=np.float64) - truth
    return out


def shift_stats(
    errors: NDArray[np.float64], model: NDArray[np.float64], actual: NDArray[np.float64]
) -> dict[str, float]:
    """The three figures of the module docstring from the bootstrap ``errors`` (runs, q), the
    modelled uniformity variance ``model`` (q) and the release's ``actual`` errors (q).

    >>> e = np.array([[3.0, 0.0], [3.0, 2.0], [3.0, -2.0]])  # query 0: a pure shift of 3
    >>> s = shift_stats(e, np.array([36.0, 0.0]), np.array([6.0, 1.0]))
    >>> s["shift_over_model_sd"], round(s["actual_over_bootstrap_mse"], 3)
    (0.5, 3.171)
    >>> round(s["actual_over_model_mse"], 3)  # 18.5 / ((36 + 0) + (0 + 8/3)) * 2
    0.957
    """
    mse = np.mean(errors**2, axis=0)
    flagged = model > mse
    shift = np.abs(errors.mean(axis=0))
    ratio = shift[flagged] / np.sqrt(model[flagged])
    return {
        "flagged_share": float(np.mean(flagged)),
        "shift_over_model_sd": float(np.median(ratio)) if flagged.any() else float("nan"),
        "actual_over_bootstrap_mse": float(np.mean(actual**2) / np.mean(mse)),
        "actual_over_model_mse": float(np.mean(actual**2) / np.mean(model + errors.var(axis=0))),
    }


def main(argv: list[str] | None = None) -> int:
    from experiments.coverage import diagnostic_case

    args, cls, (hist, _boxes, queries, truth) = diagnostic_case(
        "python -m experiments.coverage_shift", "core", argv,
        mechanism="ug", epsilon=0.1, releases=2,
    )  # fmt: skip
    for seed in range(args.releases):
        r = cls(args.epsilon).release(hist, random_state=1000 + seed, account=False)
        errors = clustered_world_errors(r, queries, args.runs, seed)
        model = r.uniformity_dispersion() * r.uniformity_variance_many(queries, 0.0)
        stats = shift_stats(errors, model, r.answer_many(queries) - truth)
        print(
            f"GeoLife core {args.mechanism} eps={args.epsilon:g} release {seed}: "
            + ", ".join(f"{k} {v:.3g}" for k, v in stats.items()),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
