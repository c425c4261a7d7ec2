"""Honest uncertainty for every answer: the exact noise sd, a bound, a parametric bootstrap, or none.

**Trusted means valid by construction.** Each answer carries ``interval_kind`` (``exact``,
``bound``, ``model``, ``none``), a one-line reason, and ``untrusted``: only ``exact`` intervals
(below) and ``bound`` intervals are trusted. A bound holds whatever the data: a release kind
that has one sets :attr:`Release.bound_reason` and overrides
``bound_interval_many(queries, level) -> (lower, upper, reasons)`` and ``bound_unavailable``;
every hook this module calls is declared on :class:`~dpcube.release.base.Release`, with a
default meaning "this kind has none". Bounds come from spatial partitions whose leaf counts
are each their own noise draw,
:meth:`~dpcube.mechanisms.spatial.release.LeafRelease.bound_interval_many`; census releases from
their noisy measurements before post-processing,
:meth:`~dpcube.mechanisms.census.release.CensusRelease.bound_interval_many`; both from the exact
quantiles of discrete Laplace sums, :mod:`dpcube.release.bounds`. The parametric bootstrap below
is a ``model`` interval, never trusted: the default only where a release has neither an exact
variance nor a bound and is not a partition or census release (whose answers without a bound get
``none`` with the reason); elsewhere ``intervals="model"`` asks for it.

The estimates (``kind``):

- **exact** (``kind="exact"``): the noise is linear and the estimator unbiased (Identity,
  Privelet, the matrix mechanism, data cubes without clamping or rounding). The answer's error is
  the noise alone; its sd is the exact ``sqrt(Release.variance_many)``, and the interval is
  ``answer +- z sd`` (a normal approximation of the noise's distribution: for one discrete
  Laplace cell the +-1.96 sd interval covers 93.7 %, for sums of several cells closer to 95 %).
- **bootstrap** (``kind="bootstrap"``): the answer is not a linear unbiased function of the noise
  (spatial trees under the uniformity assumption, clamping/rounding, census M_DP/M_CDP,
  PrivTree). The error is estimated by a *parametric bootstrap from the release itself*: the
  released estimate (cells, leaves spread over their cells, or the group-size table), made
  non-negative whole counts (:func:`integer_truth`), is taken as the truth of a "bootstrap world";
  the mechanism, rebuilt from the manifest (name and parameters), is re-run on it ``runs`` times
  with the project's exact samplers, re-choosing any data-dependent structure (tree splits,
  heights), and each query's error ``e_b = replicate answer - bootstrap-world truth`` is
  recorded. This is post-processing of public data: no budget is spent and no ledger is opened
  (every re-run is unaccounted and seeded). The interval comes from the errors' own quantiles
  ``q_lo = q_(1-level)/2(e)``, ``q_hi = q_(1+level)/2(e)``: it is the hull of the *basic
  (pivotal)* interval ``[a - q_hi, a - q_lo]``, which corrects for the bias the bootstrap
  estimates (``bias = mean(e)``), and the *percentile* interval ``[a + q_lo, a + q_hi]``, which
  stays right where the pivot fails (a count clamped at 0 in the release is a bootstrap truth of 0,
  whose errors are all >= 0), clipped below at 0 (a count is never negative). On the CPS
  household sizes at epsilon = 0.1 (M_DP and M_CDP, 4 releases, 100 replicates) the basic
  interval alone covered 75-78 % of the true counts, the hull 96-97 %. ``stddev`` is the root
  mean square of ``e`` (bias included).
- **bound** (``kind="bound"``): the release's ``bound_interval_many`` (above); ``stddev`` NaN.
- **none** (``kind="none"``): no error estimate (the reason says why).

``noise_sd`` is the noise-only figure where the release knows it (e.g. HTF's independent leaf
noises spread under the uniformity assumption); it is *never* the answer's error for a bootstrap
release, and :func:`format_answer` labels it "noise sd".

What the bootstrap cannot see: error the released estimate has already hidden. A tree leaf's
released count says nothing of how its points lie inside it. A world spread evenly inside every
leaf hid the uniformity error of the *real* data (Gowalla: 62-86 % coverage); so a spatial
leaf release's world scatters each leaf's count by a multiplicative cascade as clustered as the
release's own neighbouring leaves are
(:meth:`~dpcube.mechanisms.spatial.release.LeafRelease.bootstrap_world`). Where the leaf pairs
cannot tell (the kd-tree's median splits equalise sibling counts) the interval is widened by
the Bhatia-Davis bound of the uniformity error instead, each cut leaf's noise variance
discounted from its squared count (:func:`answer_uncertainty`; measured
coverage in ``experiments/docs/coverage.md``). Where every re-run cuts the same leaves (UG, the
quadtree, AG: ``LeafRelease.reruns_keep_the_leaves``) a clustered world would give one draw of its
layout, the same in every replicate: there the world is even and the interval is widened by the
model's variance ``r V_u``.

Replicates come from :func:`bootstrap_replicates`: the ones saved with the release by
``dpcube release --bootstrap-runs N`` (:func:`store_bootstrap`, :mod:`dpcube.release.replicates`:
released tables of re-runs on the public release, no exact figure), else computed on demand and
cached in memory on the release object, with their summed-area tables while they fit in
:data:`KEEP_REPLICATE_PREFIX_BYTES`. ``dpcube query`` on a release saved without them re-runs
the mechanism ``runs`` times per call.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from dpcube.errors import ReleaseError
from dpcube.privacy.unit import PrivacyUnit
from dpcube.release.metadata import ReleaseMetadata

#: A :class:`dpcube.release.base.Release`: its methods call this module
#: (:meth:`~dpcube.release.base.Release.uncertainty`), so the class is not imported here; only the
#: hooks :class:`~dpcube.release.base.Release` declares are called.
AnyRelease = Any

#: Largest total size of the replicates' summed-area tables kept between calls (bytes): 256 x
#: 256 cells x 200 replicates (105 MB) are kept; 1024 x 1024 (1.7 GB) are dropped and rebuilt on
#: the next call (:meth:`Release.replicate_answers`).
KEEP_REPLICATE_PREFIX_BYTES = 256 << 20
#: Replicates of the bootstrap when ``runs`` is not given (the 2.5 % and 97.5 % quantiles of 200
#: errors rest on 5 errors each side; see experiments/docs/coverage.md).
DEFAULT_RUNS = 200
#: Replicates ``dpcube release`` stores with a bootstrap release unless ``--bootstrap-runs`` says
#: otherwise: half the query default, so that a release of a tree costs a modest multiple of the
#: mechanism (the 2.5 % and 97.5 % quantiles of 100 errors rest on 2.5 errors each side).
RELEASE_RUNS = 100
#: Fewest replicates accepted: below this the tail quantiles of a 95 % interval are the extremes.
MIN_RUNS = 20
#: Most replicates accepted: each re-runs the mechanism and is kept in memory, and at 5,000 the
#: 2.5 % tails of a 95 % interval already rest on 125 errors each side (more only costs time).
MAX_RUNS = 5000


def check_runs(runs: int) -> int:
    """``runs`` if it is a number of bootstrap replicates in [MIN_RUNS, MAX_RUNS], else a
    one-line :class:`ReleaseError` naming the limit and why.

    >>> check_runs(200)
    200
    >>> check_runs(100_000_000)
    Traceback (most recent call last):
    ...
    dpcube.errors.ReleaseError: 100000000 bootstrap replicates is more than the 5000 allowed (each re-runs the mechanism and is held in memory; 5000 already put 125 errors in each 2.5 % tail); ask for at most 5000
    """
    if isinstance(runs, bool) or int(runs) != runs:
        raise ReleaseError(f"bootstrap replicates must be a whole number, got {runs!r}")
    if runs < MIN_RUNS:
        raise ReleaseError(f"runs must be at least {MIN_RUNS} for a bootstrap, got {runs}")
    if runs > MAX_RUNS:
        raise ReleaseError(
            f"{runs} bootstrap replicates is more than the {MAX_RUNS} allowed (each re-runs the "
            f"mechanism and is held in memory; {MAX_RUNS} already put {MAX_RUNS // 40} errors in "
            f"each 2.5 % tail); ask for at most {MAX_RUNS}"
        )
    return int(runs)


Kind = Literal["exact", "bound", "bootstrap", "none"]
#: What an interval is, per answer: ``exact`` (the exact noise of a linear unbiased estimate),
#: ``bound`` (valid by construction whatever the data, e.g.
#: :meth:`~dpcube.mechanisms.spatial.release.LeafRelease.bound_interval_many`), ``model`` (a
#: parametric bootstrap under a model of the data: never trusted), ``none`` (no interval).
IntervalKind = Literal["exact", "bound", "model", "none"]
#: Which intervals :func:`answer_uncertainty` gives: ``"trusted"`` (the default: exact or bound
#: where the release has one) or ``"model"`` (the model-based bootstrap, labelled untrusted).
INTERVALS = ("trusted", "model")
#: The interval kind of each :data:`Kind` of estimate.
INTERVAL_KIND: dict[str, IntervalKind] = {
    "exact": "exact",
    "bound": "bound",
    "bootstrap": "model",
    "none": "none",
}

#: Beta concentration of the uniformity-error widening of spatial leaf releases whose splits
#: equalise sibling counts (the kd-tree). 0 is the Bhatia-Davis bound (no assumption on how the
#: points lie inside a leaf); larger values assume more even leaves. How each leaf release is
#: widened is its own ``uniformity_widening`` (no tuning on the evaluation data;
#: experiments/docs/coverage.md).
UNIFORMITY_KAPPA = 0.0


@dataclass(frozen=True)
class Uncertainty:
    """The uncertainty of a batch of answers (one entry per query).

    ``stddev``: the answer's error sd (exact noise sd for ``kind="exact"``; root mean square of
    the bootstrap errors, bias included, for ``kind="bootstrap"``; NaN for ``"none"``).
    ``noise_sd``: noise only, NaN where not known; never the answer's error for a bootstrap.
    ``lower``/``upper``: the interval at ``level`` (NaN for ``"none"``). ``bias``: the
    bootstrap's mean error (0 for exact, NaN for none). ``reason``: one line a user reads.
    ``assumed``: for spatial leaf releases, the part of each answer spread into the query by the
    uniformity assumption (the intervals are least trustworthy where it is a large share).
    """

    answers: NDArray[np.float64]
    stddev: NDArray[np.float64]
    noise_sd: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    bias: NDArray[np.float64]
    kind: Kind
    reason: str
    level: float
    runs: int = 0
    #: The part of each answer resting on the uniformity assumption (leaves the query cuts, see
    #: ``LeafRelease.assumed_many``), which the bootstrap cannot see; NaN where not applicable.
    assumed: NDArray[np.float64] | None = None
    #: Answers whose interval cannot be trusted (True), None where every answer's can. Only
    #: ``exact`` and ``bound`` intervals are trusted (valid by construction); every ``model`` or
    #: ``none`` answer is flagged (set in ``__post_init__``; a caller may flag more).
    untrusted: NDArray[np.bool_] | None = None
    #: What each answer's interval is (:data:`IntervalKind`); filled from ``kind`` when not given.
    interval_kind: NDArray[np.str_] | None = None
    #: One line per answer saying why its interval is what it is; ``reason`` for all when not given.
    reasons: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.answers)
        if self.interval_kind is None:
            kinds = np.full(n, INTERVAL_KIND[self.kind], dtype="<U5")
            object.__setattr__(self, "interval_kind", kinds)
        if self.reasons is None:
            object.__setattr__(self, "reasons", (self.reason,) * n)
        assert self.interval_kind is not None
        # Only exact and bound intervals are valid by construction: a model interval or none
        # is never trusted.
        weak = ~np.isin(self.interval_kind, ("exact", "bound"))
        if self.untrusted is not None:
            weak = weak | np.asarray(self.untrusted, dtype=bool)
        object.__setattr__(self, "untrusted", weak if weak.any() else None)

    def trusted(self, i: int) -> bool:
        """Whether answer ``i``'s interval can be trusted (see ``untrusted``)."""
        return self.untrusted is None or not bool(self.untrusted[i])

    def why(self, i: int) -> str:
        """The one-line reason of answer ``i``'s interval."""
        assert self.reasons is not None
        return self.reasons[i]


@dataclass(frozen=True)
class BootstrapWorld:
    """The bootstrap's truth (a release answering queries exactly on it) and a way to re-run the
    mechanism on it once with a given generator (post-processing of public data)."""

    truth: AnyRelease
    replicate: Callable[[np.random.Generator], AnyRelease]


# ------------------------------------------------------------------------------------------------
# helpers the mechanism packages use to build their bootstrap worlds
# ------------------------------------------------------------------------------------------------


def integer_truth(values: NDArray[Any]) -> NDArray[np.int64]:
    """Non-negative whole counts close to ``values``, keeping every prefix sum within 1/2.

    Negative values become 0; then the running total is rounded (``rint(cumsum)``) and
    differenced, so a run of cells holding 0.3 each becomes a spread of zeros and ones with the
    same total (to +-1), rather than all zeros (plain rounding would erase thin densities).

    >>> integer_truth(np.array([0.3, 0.3, 0.3, 0.3, -2.0, 4.6])).tolist()
    [0, 1, 0, 0, 0, 5]
    >>> integer_truth(np.array([[1.5, 2.5], [0.0, 3.0]])).tolist()
    [[2, 2], [0, 3]]
    """
    arr = np.clip(np.asarray(values, dtype=np.float64), 0.0, None)
    running = np.rint(np.cumsum(arr.ravel()))
    out = np.diff(np.concatenate([[0.0], running])).astype(np.int64)
    return out.reshape(arr.shape)


def rebuild_mechanism(metadata: ReleaseMetadata) -> Any:
    """The mechanism a release's manifest names, with its parameters and privacy unit (no data,
    no budget); a world it re-runs on must carry the same unit (``mechanism.privacy_unit``)."""
    from dpcube import registry

    try:
        cls = registry.resolve(registry.MECHANISMS, metadata.mechanism, "mechanism")
    except KeyError as exc:
        raise ReleaseError(str(exc.args[0])) from None
    params = dict(metadata.params)
    for key in ("epsilon", "delta", "neighbour"):
        params.pop(key, None)
    kwargs: dict[str, Any] = {"epsilon": metadata.epsilon, "neighbour": metadata.neighbour}
    if metadata.delta is not None:
        kwargs["delta"] = metadata.delta
    unit = PrivacyUnit.from_manifest(metadata.privacy_unit)
    if not unit.is_row:
        # the unit decides every sensitivity; a re-run's input (a world) carries it too
        params.pop("user_bound", None)
        kwargs["privacy_unit"] = unit
    return cls(**kwargs, **params)


def rerun(mechanism: Any, data: Any, rng: np.random.Generator) -> AnyRelease:
    """One bootstrap replicate: ``mechanism`` on public ``data``, unaccounted, seeded by ``rng``.

    ``account=False`` and a seeded generator: :func:`dpcube.privacy.accounting.charge_release`
    opens no ledger (the data is the public release itself, so nothing is spent).
    """
    release: AnyRelease = mechanism.release(data, random_state=rng, account=False)
    return release


#: The largest confidence level whose two-sided normal quantile is finite in double precision
#: (1 - 2**-52: at 1 - 2**-53, ``0.5 + level / 2`` rounds to 1).
MAX_LEVEL = 1.0 - 2.0**-52


def computable_level(level: float) -> bool:
    """Whether an interval at ``level`` can be computed: ``0.5 < 0.5 + level / 2 < 1`` in double
    precision, so that the two-sided normal quantile is finite and positive (about 2.3e-16 to
    :data:`MAX_LEVEL`). ``0.9999999999999999`` is below 1 but its quantile is infinite; ``1e-300``
    gives 0, an empty interval.

    >>> computable_level(0.95), computable_level(0.9999999999999999), computable_level(1e-300)
    (True, False, False)
    >>> computable_level(float("nan")), computable_level(MAX_LEVEL)
    (False, True)
    """
    return 0.5 < 0.5 + level / 2.0 < 1.0


def _normal_quantile(level: float) -> float:
    """The two-sided normal quantile of ``level`` (1.96 at 0.95).

    >>> round(_normal_quantile(0.95), 4)
    1.96
    """
    from statistics import NormalDist  # imported on use: it pulls in fractions and decimal

    return NormalDist().inv_cdf(0.5 + level / 2.0)


# ------------------------------------------------------------------------------------------------
# the entry point
# ------------------------------------------------------------------------------------------------


def uncertainty_kind(release: AnyRelease) -> tuple[Kind, str]:
    """Which estimate a release's answers get, and the one-line reason a user reads."""
    if not release.metadata.for_publication and release.metadata.noiseless:
        return "none", "noise switched off: these answers are exact for tests only"
    if release.linear_unbiased:
        return "exact", "linear noise, unbiased estimate: exact noise sd"
    if release.bound_reason is not None:
        no_bound = release.bound_unavailable
        if not no_bound:
            return "bound", f"bound valid on any data: {release.bound_reason}"
        return "none", (
            f"no trusted interval: {no_bound}; intervals='model' (--intervals model) gives a "
            "model-based one, not trusted"
        )
    why = release.bootstrap_unavailable
    if not why:
        return "bootstrap", (
            f"{release.bootstrap_reason}: parametric bootstrap from the release (no budget spent)"
        )
    return "none", (
        f"no error estimate: a {release.kind!r} release of {release.metadata.mechanism!r} ({why})"
    )


def answer_uncertainty(
    release: AnyRelease,
    queries: Sequence[Mapping[str, Any]],
    *,
    level: float = 0.95,
    runs: int | None = None,
    seed: int | None = None,
    method: str | None = None,
    uniformity_kappa: float | None = UNIFORMITY_KAPPA,
    intervals: str = "trusted",
) -> Uncertainty:
    """The uncertainty of ``release``'s answers to ``queries`` (see the module docstring).

    ``intervals``: ``"trusted"`` (default) gives each answer the exact interval of a linear
    unbiased estimate, or a bound valid on any data (spatial partitions whose leaf noise is known:
    :meth:`~dpcube.mechanisms.spatial.release.LeafRelease.bound_interval_many`), else what the
    release has (a model-based bootstrap, flagged untrusted, or none); ``"model"`` asks for the
    model-based bootstrap where the release has one (never trusted: ``interval_kind`` "model").

    ``uniformity_kappa``: the Beta concentration of the uniformity-error model of releases that
    widen their intervals for it: a release with ``uniformity_widening(queries, kappa) ->
    (extra, modelled, note)`` (spatial leaf releases,
    :meth:`~dpcube.mechanisms.spatial.release.LeafRelease.uniformity_widening`: the kd-tree by the
    noise-discounted Bhatia-Davis bound over ``kappa + 1``; UG, the quadtree and AG by the
    modelled variance ``r V_u``; HTF and PrivTree not widened) has each interval widened in
    quadrature by ``extra`` and its answers flagged where ``modelled`` exceeds the bootstrap's
    mean square error. None: no widening and no ``untrusted`` flags (tests compare both).

    ``runs``: bootstrap replicates (default :data:`DEFAULT_RUNS`); ``seed``: seeds the replicates
    (default: OS entropy); ``method``: ``"bootstrap"`` forces the bootstrap on a release that has
    an exact variance too (tests compare the two), ``None`` picks by :func:`uncertainty_kind`.

    >>> from dpcube import Histogram, Identity, Schema
    >>> s = Schema.from_dict({"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]})
    >>> r = Identity(1.0).release(Histogram(s, [10, 20, 30, 40]), random_state=0)
    >>> u = answer_uncertainty(r, [{"x": [0, 1]}])
    >>> u.kind, bool(np.allclose(u.stddev ** 2, r.variance_many([{"x": [0, 1]}])))
    ('exact', True)
    """
    if not computable_level(level):
        raise ReleaseError(
            f"level must be a confidence level between 0 and 1 whose interval can be computed "
            f"(e.g. 0.95; at most {MAX_LEVEL!r}), got {level!r}"
        )
    if method not in (None, "exact", "bootstrap"):
        raise ReleaseError(f"method must be 'exact' or 'bootstrap', got {method!r}")
    if intervals not in INTERVALS:
        raise ReleaseError(f"intervals must be 'trusted' or 'model', got {intervals!r}")
    queries = release.parsed(queries)  # once, for the release and all its replicates
    answers = np.asarray(release.answer_many(queries), dtype=np.float64)
    noise_sd = np.sqrt(np.asarray(release.variance_many(queries), dtype=np.float64))
    kind, reason = uncertainty_kind(release)
    has_bootstrap = not release.bootstrap_unavailable
    if intervals == "model" and kind != "exact":
        if not has_bootstrap:
            raise ReleaseError(
                f"a {release.kind!r} release of {release.metadata.mechanism!r} has no "
                "model-based interval"
            )
        method = "bootstrap"
    if method == "bootstrap" and has_bootstrap:
        kind, reason = "bootstrap", "parametric bootstrap from the release (no budget spent)"
    elif method is not None and method != kind:
        raise ReleaseError(f"a {release.kind!r} release has no {method} error estimate ({reason})")
    n = len(answers)
    if kind == "bound":
        nan = np.full(n, np.nan)
        lower, upper, reasons = release.bound_interval_many(queries, level)
        return Uncertainty(
            answers, nan, noise_sd, lower, upper, nan, "bound", reason, level,
            reasons=tuple(reasons),
        )  # fmt: skip
    if kind == "exact":
        z = _normal_quantile(level)
        return Uncertainty(
            answers, noise_sd, noise_sd, answers - z * noise_sd, answers + z * noise_sd,
            np.zeros(n), "exact", reason, level,
        )  # fmt: skip
    if kind == "none":
        nan = np.full(n, np.nan)
        return Uncertainty(answers, nan, noise_sd, nan, nan, nan, "none", reason, level)
    runs = default_runs(release) if runs is None else int(runs)
    if runs < MIN_RUNS:
        raise ReleaseError(f"runs must be at least {MIN_RUNS} for a bootstrap, got {runs}")
    errors = bootstrap_errors(release, queries, runs=runs, seed=seed)
    extra = None
    if uniformity_kappa is not None:
        extra, _modelled, note = release.uniformity_widening(queries, uniformity_kappa)
        if note:
            reason += f"; {note}"
    lower, upper, rms = bootstrap_interval(answers, errors, level, extra)
    assumed_many = release.assumed_many(queries)
    assumed = None if assumed_many is None else np.asarray(assumed_many, dtype=np.float64)
    # A model-based interval is never trusted (Uncertainty.__post_init__ flags every answer).
    reason += f"; {MODEL_NOTE}"
    untrusted = np.ones(n, dtype=bool)
    return Uncertainty(
        answers, rms, noise_sd, lower, upper, errors.mean(axis=0), "bootstrap", reason, level,
        runs, assumed, untrusted,
    )  # fmt: skip


#: What a model-based interval's reason says.
MODEL_NOTE = "model-based: valid only as far as the bootstrap world resembles the data"
#: What a flagged answer says (:attr:`Uncertainty.untrusted`).
UNTRUSTED_NOTE = (
    "NOT TRUSTED: a model-based interval, not valid by construction; it holds only as far as "
    "the data resembles the bootstrap's model (the user guide's 'Schema, data, privacy and "
    "releases' page says which intervals are trusted)"
)


def bootstrap_interval(
    answers: NDArray[np.float64],
    errors: NDArray[np.float64],
    level: float,
    extra_variance: NDArray[np.float64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(lower, upper, error sd) from the (runs, q) bootstrap ``errors`` (module docstring: the
    hull of the basic and percentile intervals, clipped at 0), each half-width widened in
    quadrature by ``z sqrt(extra_variance)`` (an error independent of the bootstrap's, e.g. the
    uniformity error of :meth:`LeafRelease.uniformity_variance_many`).

    >>> e = np.array([[-2.0], [-1.0], [0.0], [1.0], [2.0]])
    >>> lo, hi, sd = bootstrap_interval(np.array([10.0]), e, 0.5)
    >>> lo.tolist(), hi.tolist(), sd.round(3).tolist()
    ([9.0], [11.0], [1.414])
    >>> lo, hi, sd = bootstrap_interval(np.array([10.0]), e, 0.5, np.array([4.0]))
    >>> round(float(hi[0] - 10.0), 3), round(float(sd[0]), 3)  # sqrt(1 + (0.674 * 2)^2)
    (1.679, 2.449)
    """
    lo_q, hi_q = np.quantile(errors, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
    below = answers - np.minimum(answers - hi_q, answers + lo_q)  # >= 0 (lo_q <= hi_q)
    above = np.maximum(answers - lo_q, answers + hi_q) - answers
    variance = np.mean(errors**2, axis=0)
    if extra_variance is not None:
        widen = (_normal_quantile(level) ** 2) * extra_variance
        below, above = np.sqrt(below**2 + widen), np.sqrt(above**2 + widen)
        variance = variance + extra_variance
    lower = np.maximum(answers - below, 0.0)
    upper = np.maximum(answers + above, lower)
    return lower, upper, np.sqrt(variance)


#: Replicates per release object, keyed by (runs, seed) or "stored"; freed with the release.
_CACHE: weakref.WeakKeyDictionary[AnyRelease, dict[Any, Any]] = weakref.WeakKeyDictionary()


def default_runs(release: AnyRelease) -> int:
    """The replicates a bootstrap uses when none are asked for: those stored with the release
    (``dpcube release --bootstrap-runs``), else :data:`DEFAULT_RUNS`."""
    stored = release.stored_replicates
    return int(stored.runs) if stored is not None else DEFAULT_RUNS


def bootstrap_replicates(
    release: AnyRelease, runs: int | None = None, seed: int | None = None
) -> tuple[AnyRelease, list[AnyRelease]]:
    """The bootstrap world's truth and ``runs`` replicates of ``release``'s mechanism re-run on it.

    The one place replicates come from: the ones stored with the release
    (:mod:`dpcube.release.replicates`) when ``runs`` is None or their number and ``seed`` is None
    or theirs; else they are computed (``seed``: the generator's seed, default OS entropy) and kept
    in memory on the release object until it is freed. Post-processing of the public release: no
    budget is spent.
    """
    if release.bootstrap_unavailable:
        raise ReleaseError(
            f"a {release.kind!r} release of {release.metadata.mechanism!r} has no bootstrap "
            f"({release.bootstrap_unavailable})"
        )
    runs = default_runs(release) if runs is None else check_runs(runs)
    per_release = _CACHE.setdefault(release, {})
    stored = _stored_for(release, runs, seed)
    if stored is not None:
        return _stored_truth(release), stored.releases(release)
    key = (runs, seed)
    if key not in per_release:
        world = release.bootstrap_world()
        entropy = seed if seed is not None else int.from_bytes(os.urandom(16), "little")
        rng = np.random.default_rng(entropy)
        per_release[key] = (world.truth, [world.replicate(rng) for _ in range(runs)])
    truth, reps = per_release[key]
    return truth, reps


def _stored_for(release: AnyRelease, runs: int, seed: int | None) -> Any:
    """The replicates stored with ``release`` if they are the ``runs`` (and ``seed``) asked for."""
    stored = release.stored_replicates
    if stored is not None and runs == stored.runs and seed in (None, stored.seed):
        return stored
    return None


def _stored_truth(release: AnyRelease) -> AnyRelease:
    """The bootstrap world's truth (cheap: built from the release; cached on it)."""
    per_release = _CACHE.setdefault(release, {})
    if "truth" not in per_release:
        per_release["truth"] = release.bootstrap_world().truth
    truth: AnyRelease = per_release["truth"]
    return truth


def store_bootstrap(release: AnyRelease, runs: int = DEFAULT_RUNS, seed: int | None = None) -> None:
    """Compute ``runs`` bootstrap replicates of ``release`` and attach them, so that
    :meth:`Release.save` writes them and a loaded release answers without re-running its mechanism
    (:mod:`dpcube.release.replicates`). ``seed`` (default: drawn from OS entropy) is recorded in
    the manifest: the replicates are post-processing of the public release, so it is no secret."""
    from dpcube.release.replicates import StoredReplicates

    check_runs(runs)
    seed = int.from_bytes(os.urandom(8), "little") if seed is None else int(seed)
    release.stored_replicates = None
    _, reps = bootstrap_replicates(release, runs, seed)
    release.stored_replicates = StoredReplicates.from_replicates(release, reps, seed)


def bootstrap_errors(
    release: AnyRelease,
    queries: Sequence[Mapping[str, Any]],
    *,
    runs: int = DEFAULT_RUNS,
    seed: int | None = None,
) -> NDArray[np.float64]:
    """The (runs, q) bootstrap errors ``replicate answer - bootstrap-world truth``.

    The queries are parsed once (:meth:`Release.parsed`) and every replicate answered in one
    pass where the release kind has one (:meth:`Release.replicate_answers`; with replicates
    stored with the release, :meth:`StoredReplicates.answers` over their packed tables), with no
    re-run of the mechanism for stored replicates.
    """
    queries = release.parsed(queries)
    stored = _stored_for(release, runs, seed)
    if stored is not None:
        target = np.asarray(_stored_truth(release).answer_many(queries), dtype=np.float64)
        from_stored = stored.answers(release, queries, KEEP_REPLICATE_PREFIX_BYTES)
        return np.asarray(from_stored - target, dtype=np.float64)
    truth, reps = bootstrap_replicates(release, runs, seed)
    target = np.asarray(truth.answer_many(queries), dtype=np.float64)
    answers = release.replicate_answers(reps, queries, KEEP_REPLICATE_PREFIX_BYTES)
    errors: NDArray[np.float64] = answers - target
    return errors


# ------------------------------------------------------------------------------------------------
# printing: never a bare number for a release that has an uncertainty
# ------------------------------------------------------------------------------------------------


def format_answer(
    answer: float, uncertainty: Uncertainty, i: int, precision: str = "significant"
) -> str:
    """One line for answer ``i``: the value with its interval, labelled for what it is, in
    ``precision`` (:data:`dpcube.release.formats.PRECISIONS`: ``"whole"`` writes counts as
    whole numbers, the interval rounded outward, so that it still covers what it covered).

    >>> u = Uncertainty(np.array([5.0]), np.array([2.0]), np.array([2.0]), np.array([1.08]),
    ...     np.array([8.92]), np.zeros(1), "exact", "linear noise", 0.95)
    >>> format_answer(5.0, u, 0)
    '5 (95% interval 1.08 .. 8.92; exact noise sd 2)'
    >>> format_answer(5.0, u, 0, "whole")
    '5 (95% interval 1 .. 9; exact noise sd 2)'
    >>> n = Uncertainty(np.array([5.0]), *[np.full(1, np.nan)] * 5, "none", "no error estimate: x", 0.95)
    >>> format_answer(5.0, n, 0)
    '5 (no error estimate: x)'
    """
    from dpcube.release.formats import format_number, format_spread

    def _fmt(x: float, side: str = "") -> str:
        return format_number(x, precision, side)

    def _sd(x: float) -> str:
        return format_spread(x, precision)

    pct = f"{100 * uncertainty.level:g}%"
    value = _fmt(float(answer))
    if uncertainty.kind == "bound":
        lo, hi = float(uncertainty.lower[i]), float(uncertainty.upper[i])
        line = f"{value} ({pct} bound interval {_fmt(lo, 'lower')} .. {_fmt(hi, 'upper')}, valid on any data"
        noise = float(uncertainty.noise_sd[i])
        if np.isfinite(noise):
            line += f"; noise sd {_sd(noise)}, noise only, not the error"
        return line + ")"
    if uncertainty.kind == "exact":
        lo, hi, sd = (
            float(a[i]) for a in (uncertainty.lower, uncertainty.upper, uncertainty.stddev)
        )
        return f"{value} ({pct} interval {_fmt(lo, 'lower')} .. {_fmt(hi, 'upper')}; exact noise sd {_sd(sd)})"
    if uncertainty.kind == "bootstrap":
        lo, hi, sd = (
            float(a[i]) for a in (uncertainty.lower, uncertainty.upper, uncertainty.stddev)
        )
        line = (
            f"{value} ({pct} bootstrap interval {_fmt(lo, 'lower')} .. {_fmt(hi, 'upper')}; "
            f"bootstrap error sd {_sd(sd)}, {uncertainty.runs} runs"
        )
        noise = float(uncertainty.noise_sd[i])
        if np.isfinite(noise):
            line += f"; noise sd {_sd(noise)}, noise only, not the error"
        if not uncertainty.trusted(i):
            line += f"; {UNTRUSTED_NOTE}"
        return line + ")"
    reason = uncertainty.reason
    if not reason.startswith(("no error estimate", "no trusted interval")):
        reason = f"no error estimate: {reason}"
    return f"{value} ({reason})"


__all__ = [
    "DEFAULT_RUNS",
    "INTERVALS",
    "MAX_LEVEL",
    "MODEL_NOTE",
    "RELEASE_RUNS",
    "UNTRUSTED_NOTE",
    "BootstrapWorld",
    "IntervalKind",
    "Uncertainty",
    "answer_uncertainty",
    "bootstrap_errors",
    "bootstrap_replicates",
    "computable_level",
    "default_runs",
    "format_answer",
    "integer_truth",
    "rebuild_mechanism",
    "rerun",
    "store_bootstrap",
    "uncertainty_kind",
]
