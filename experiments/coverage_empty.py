"""Why intervals of empty rectangles on a sparse map cover more than 95 %.

The measurement of experiments/docs/coverage.md, "Empty rectangles".

For releases of GeoLife binned over its bounding box (97 % of the benchmark's rectangles hold no
point), over the empty rectangles whose answer is positive (only those can miss a true 0):

- ``noise_over_stated_sd``: median of the exact noise sd (``Release.variance_many``, the leaf
  noises spread under the uniformity assumption) over the stated error sd: how much the
  bootstrap adds to the noise where the truth is empty (1 = nothing);
- ``answer_over_noise_sd_p95``: the 95th percentile of the answer over its noise sd: what the
  release's own noise draws reach (positive draws of independent noise: 1.96 for a normal,
  ``ln(20) / sqrt(2) = 2.12`` for a Laplace);
- ``answer_over_stated_sd_p95``: the same over the stated sd;
- ``dominant_leaves``: how many leaves carry the largest share of the noise variance of the
  empty rectangles (``sum_L v_L f_L^2``), and ``dominant_share`` the median of that share: the
  empty rectangles are that many independent noise draws, not hundreds.

``--raw-world`` spreads the released counts (the world before
:func:`~dpcube.mechanisms.spatial.release.noise_discounted_counts`) for comparison.

Command (the figures of the docs page)::

    python -m experiments.coverage_empty --data-dir ../shared/data --mechanism htf --epsilon 1
    python -m experiments.coverage_empty --data-dir ../shared/data --mechanism htf --epsilon 1 --raw-world
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
from numpy.typing import NDArray


def dominant_leaves(release: Any, boxes: NDArray[np.int64]) -> tuple[int, float]:
    """(distinct leaves that carry the largest share of each box's noise variance, the median
    of that share) over ``boxes`` (inclusive (q, 2, 2)) of a leaf release with known variances.

    >>> from types import SimpleNamespace
    >>> r = SimpleNamespace(rects=np.array([[0, 2, 0, 4], [2, 4, 0, 4]]), variances=np.ones(2))
    >>> dominant_leaves(r, np.array([[[0, 0], [0, 1]], [[1, 2], [0, 3]]]))
    (1, 0.75)
    """
    from dpcube.mechanisms.spatial.release import _overlap

    rects = np.asarray(release.rects)
    area = ((rects[:, 1] - rects[:, 0]) * (rects[:, 3] - rects[:, 2])).astype(np.float64)
    top, share = [], []
    for (a0, a1), (b0, b1) in np.asarray(boxes):
        f = _overlap(rects, a0, a1 + 1, b0, b1 + 1) / area
        w = np.asarray(release.variances) * f**2
        top.append(int(np.argmax(w)))
        share.append(float(w.max() / w.sum()))
    return len(set(top)), float(np.median(share))


def main(argv: list[str] | None = None) -> int:
    from dpcube.mechanisms.spatial import release as leaf_release
    from dpcube.release.uncertainty import answer_uncertainty
    from experiments.coverage import diagnostic_case

    def flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--raw-world", action="store_true", help="spread the released counts")

    args, cls, (hist, boxes, queries, truth) = diagnostic_case(
        "python -m experiments.coverage_empty", "bbox", argv,
        mechanism="htf", epsilon=1.0, releases=4, flags=flags,
    )  # fmt: skip
    leaf_release.DENOISE_CLUSTERED_WORLD = not args.raw_world
    for seed in range(args.releases):
        r = cls(args.epsilon).release(hist, random_state=1000 + seed, account=False)
        if getattr(r, "variances", None) is None:
            print(
                f"coverage_empty: error: --mechanism {args.mechanism}: its release states no leaf "
                "noise variance (use htf or privtree)",
                file=sys.stderr,
            )
            return 2
        u = answer_uncertainty(r, queries, level=0.95, runs=args.runs, seed=seed)
        pos = (truth == 0) & (u.answers > 0)
        n_dom, dom_share = dominant_leaves(r, boxes[truth == 0])
        stats = {
            "empty_positive": int(pos.sum()),
            "noise_over_stated_sd": float(np.median(u.noise_sd[pos] / u.stddev[pos])),
            "answer_over_noise_sd_p95": float(np.percentile(u.answers[pos] / u.noise_sd[pos], 95)),
            "answer_over_stated_sd_p95": float(np.percentile(u.answers[pos] / u.stddev[pos], 95)),
            "empty_covered": float(np.mean(u.lower[truth == 0] <= 0.0)),
            "leaves": len(r.rects),
            "dominant_leaves": n_dom,
            "dominant_share": dom_share,
        }
        print(
            f"GeoLife {args.mechanism} eps={args.epsilon:g} "
            f"{'raw' if args.raw_world else 'de-noised'} world, release {seed}: "
            + ", ".join(f"{k} {v:.3g}" for k, v in stats.items()),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    from experiments import run_command

    raise SystemExit(run_command(main))
