"""Privelet / Privelet+ as mechanisms (Xiao, Wang and Gehrke, "Differential Privacy via Wavelet
Transforms", ICDE 2010): calibration (the epsilon-lambda relation of generalized sensitivity, Sec.
III-A, Thm. 2), the closed forms of Privelet+ (Sec. VI-D, Cor. 1, Eq. (7)), exactness without
noise, data independence of the error and a Monte-Carlo check of the exact variance."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpcube
from dpcube import Histogram, Schema
from dpcube.errors import SchemaError
from dpcube.mechanisms.identity import Identity
from dpcube.mechanisms.privelet.mechanism import Privelet, PriveletPlus, PriveletVariance
from dpcube.mechanisms.privelet.transforms import (
    EXACT_LIMIT,
    HaarAxis,
    NominalAxis,
    NominalTree,
    common_denominator,
    denominators,
    hn_forward,
    hn_forward_exact,
    hn_forward_integer,
    hn_inverse,
    integer_bound,
)
from dpcube.privacy import NO_NOISE
from dpcube.privacy.random import SeededRandomSource
from dpcube.privacy.samplers import discrete_laplace_variance, snapped_laplace
from dpcube.release.base import load_release


def occupation(leaves: int, groups: int) -> dict:
    sizes = [leaves // groups + (1 if i < leaves % groups else 0) for i in range(groups)]
    out, start = {}, 0
    for g, s in enumerate(sizes):
        out[f"grp{g}"] = [f"occ{start + j}" for j in range(s)]
        start += s
    return out


def census_schema(age: int, occupations: int, income: int) -> Schema:
    """Table III of the paper (Sec. VII): Age, Gender, Occupation (3 levels), Income."""
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "age", "kind": "ordinal", "range": [0, age - 1], "width": 1},
                {"name": "gender", "kind": "nominal", "categories": ["F", "M"]},
                {"name": "occupation", "kind": "nominal", "hierarchy": occupation(occupations, 23)},
                {"name": "income", "kind": "ordinal", "range": [0, income - 1], "width": 1},
            ]
        }
    )


def ordinal(n: int, name: str = "x") -> dict:
    return {"name": name, "kind": "ordinal", "range": [0, n - 1], "width": 1}


FIG3 = {"name": "h", "kind": "nominal", "hierarchy": {"p": ["a", "b", "c"], "q": ["d", "e", "f"]}}


def test_public_names_and_registry() -> None:
    assert dpcube.Privelet is Privelet and dpcube.PriveletPlus is PriveletPlus
    assert dpcube.registry.resolve(dpcube.registry.MECHANISMS, "privelet-plus", "m") is PriveletPlus
    assert Privelet(1.0).neighbour == "replace"


# -- calibration and the paper's closed forms (Sec. VI-D, Cor. 1, Eq. (7)) -------------------------


@pytest.mark.parametrize(
    ("age", "occ", "income", "bound"), [(101, 512, 1001, 4.2236e7), (96, 511, 1020, 4.0145e7)]
)
def test_census_schemas(age: int, occ: int, income: int, bound: float) -> None:
    schema = census_schema(age, occ, income)
    plus = PriveletPlus(1.0)
    plan = plus.plan(schema)
    assert plan.plain == ("age", "gender")  # the choice of S_A (Sec. VI-D)
    assert plan.noise_scale(1.0) == 66.0  # lambda = (2/eps) * 3 * 11 (Thm. 2, Cor. 1)
    assert plus.worst_case_variance(schema) == pytest.approx(bound, rel=1e-4)  # Eq. (7)
    assert PriveletPlus(0.5, neighbour="add_remove").plan(schema).noise_scale(0.5) == 66.0
    assert Privelet(1.0).plan(schema).rho == 528


def test_closed_form_bounds_c5() -> None:
    line = Schema.from_dict({"attributes": [ordinal(512)]})
    assert Privelet(1.0).worst_case_variance(line) == pytest.approx(4400)  # Eq. (4)
    occ = Schema.from_dict(
        {"attributes": [{"name": "o", "kind": "nominal", "hierarchy": occupation(512, 23)}]}
    )
    assert Privelet(1.0).worst_case_variance(occ) == pytest.approx(288)  # Eq. (6)
    small = Schema.from_dict({"attributes": [ordinal(16)]})
    assert Privelet(1.0).worst_case_variance(small) == pytest.approx(600)
    assert PriveletPlus(1.0).worst_case_variance(small) == pytest.approx(128)  # Basic: 8|A|
    assert PriveletPlus(1.0).plan(small).plain == ("x",)


def test_plain_threshold_726() -> None:
    for n, plain in ((726, True), (727, False), (1024, False), (5, True)):
        assert PriveletPlus(1.0).plan(Schema.from_dict({"attributes": [ordinal(n)]})).plain == (
            ("x",) if plain else ()
        )


def test_unknown_plain_attribute() -> None:
    schema = Schema.from_dict({"attributes": [ordinal(4)]})
    with pytest.raises(SchemaError, match=r"'nope'.*the schema has x"):
        PriveletPlus(1.0, plain_attributes=["nope"]).plan(schema)


def test_noise_scale_and_support_reach_the_sampler() -> None:
    """The release is exactly: integer coefficients J = D W c, Laplace of the one scale D lambda
    (lambda = 2 rho / eps) with the derived support, division by D, refinement and inversion."""
    schema = Schema.from_dict({"attributes": [ordinal(8), FIG3]})
    hist = Histogram(schema, np.arange(48).reshape(8, 6) % 5)
    release = Privelet(1.0).release(hist, random_state=11)
    lam = 2 * 4 * 3
    assert release.metadata.noise["lambda"] == lam
    axes = [HaarAxis(8), NominalAxis(NominalTree.from_groups([3, 3]))]
    np.testing.assert_array_equal(denominators(axes).ravel(), [1, 2, 2, 4, 4, 4, 4, 4, 4])
    scaled, common = hn_forward_exact(hist.counts, axes)
    assert common == 4 and scaled.dtype == np.int64  # lcm(2f - 2) = lcm(2, 4)
    np.testing.assert_allclose(scaled / common, hn_forward(hist.counts, axes, weighted=True))
    support = 2 * 4 * 6  # replace: two cells, each touching (1 + 3) * (1 + 2 + 3) coefficients
    scale = np.nextafter(lam * common / 1.0, np.inf)
    noisy, draw = snapped_laplace(
        scaled, scale, epsilon=1.0, support=support, source=SeededRandomSource(11)
    )
    np.testing.assert_array_equal(release.counts, hn_inverse(noisy / common, axes, weighted=True))
    variance = float(np.asarray(draw.variance).flat[0]) / common**2
    assert release.metadata.noise["coefficient_variance"] == variance
    # the sampler enlarges the scale by 1 + support 2**-24 / eps to pay for its grid
    c = 1 + support * 2.0**-24
    assert variance == pytest.approx(2 * (c * lam) ** 2, rel=1e-6)


def test_integer_coefficients_are_exact_and_bounded() -> None:
    big = np.full((4, 6), 2**40, dtype=np.int64)
    axes = [HaarAxis(4), NominalAxis(NominalTree.from_groups([3, 3]))]
    integers = hn_forward_integer(big, axes)
    assert integers.dtype == np.int64 and integers[0, 0] == 24 * 2**40
    np.testing.assert_array_equal(
        integers / denominators(axes), hn_forward(big, axes, weighted=True)
    )
    with pytest.raises(SchemaError, match="too large for an exact wavelet transform"):
        hn_forward_integer(np.full((4, 6), 2**50, dtype=np.int64), axes)
    # |I| <= 24 * 2**43 * 3 * 7 < 2**53, but D = 4 times that is not
    hn_forward_integer(np.full((4, 6), 2**43, dtype=np.int64), axes)
    with pytest.raises(SchemaError, match="too large for an exact wavelet transform"):
        hn_forward_exact(np.full((4, 6), 2**43, dtype=np.int64), axes)


def test_replace_pairs_privacy_loss() -> None:
    """Every replace pair moves the weighted coefficients by at most 2 rho (= eps lambda)."""
    schema = Schema.from_dict(
        {
            "attributes": [
                ordinal(3),
                {"name": "g", "kind": "nominal", "categories": ["a", "b", "c"]},
            ]
        }
    )
    mech = Privelet(1.0)
    plan = mech.plan(schema)
    cells = list(np.ndindex(*schema.shape))
    worst = 0.0
    for x in cells:
        for y in cells:
            d = np.zeros(schema.shape)
            d[x], d[y] = -1, d[y] + 1
            worst = max(worst, float(np.abs(hn_forward(d, plan.axes, weighted=True)).sum()))
    assert worst <= plan.noise_scale(1.0) * 1.0 + 1e-9
    add = PriveletPlus(1.0, plain_attributes=[], neighbour="add_remove").plan(schema)
    assert add.noise_scale(1.0) == plan.noise_scale(1.0) / 2


# -- exactness and reductions ----------------------------------------------------------------------


def test_toy_tables_i_ii() -> None:
    schema = Schema.from_dict(
        {
            "attributes": [
                {
                    "name": "age",
                    "kind": "nominal",
                    "categories": ["<30", "30-39", "40-49", "50-59", ">=60"],
                },
                {"name": "diabetes", "kind": "nominal", "categories": ["Yes", "No"]},
            ]
        }
    )
    counts = np.array([[0, 2], [0, 1], [1, 2], [0, 1], [1, 0]])
    release = PriveletPlus(1.0, plain_attributes=["diabetes"]).release(
        Histogram(schema, counts), random_state=NO_NOISE
    )
    assert release.answer({"age": ["<30", "40-49"], "diabetes": "Yes"}) == pytest.approx(1)


@pytest.mark.parametrize(
    "attributes",
    [
        [ordinal(5)],
        [ordinal(3), FIG3],
        [ordinal(6), {"name": "g", "kind": "nominal", "categories": ["F", "M"]}, ordinal(3, "y")],
        [
            ordinal(2),
            FIG3,
            ordinal(3, "y"),
            {"name": "g", "kind": "nominal", "categories": ["F", "M"]},
        ],
    ],
)
def test_noiseless_release_is_exact(attributes: list) -> None:
    schema = Schema.from_dict({"attributes": attributes})
    counts = np.random.default_rng(0).integers(0, 7, size=schema.shape)
    hist = Histogram(schema, counts)
    for mech in (
        Privelet(1.0),
        PriveletPlus(1.0),
        PriveletPlus(1.0, plain_attributes=[attributes[0]["name"]]),
    ):
        release = mech.release(hist, random_state=NO_NOISE)
        np.testing.assert_allclose(release.counts, counts, atol=1e-9)
        assert release.counts.shape == schema.shape


def test_all_plain_is_identity_bit_for_bit() -> None:
    schema = Schema.from_dict({"attributes": [ordinal(4), FIG3]})
    hist = Histogram(schema, np.random.default_rng(1).integers(0, 9, size=schema.shape))
    queries = [{}, {"x": [1, 2]}, {"h": "p", "x": [0, 0]}]
    for neighbour in ("replace", "add_remove"):
        plus = PriveletPlus(0.8, plain_attributes=["x", "h"], neighbour=neighbour).release(
            hist, random_state=5
        )
        basic = Identity(0.8, neighbour=neighbour).release(hist, random_state=5)
        np.testing.assert_array_equal(plus.counts, basic.counts)
        np.testing.assert_allclose(
            plus.variance_many(queries), basic.variance_many(queries), rtol=1e-12
        )
        scale = 2.0 / 0.8 if neighbour == "replace" else 1.25
        assert plus.variance({}) == pytest.approx(
            24 * float(discrete_laplace_variance(scale)), rel=1e-4
        )


def test_no_plain_is_privelet_bit_for_bit() -> None:
    schema = Schema.from_dict({"attributes": [ordinal(4), FIG3]})
    hist = Histogram(schema, np.random.default_rng(2).integers(0, 9, size=schema.shape))
    for neighbour in ("replace", "add_remove"):
        a = PriveletPlus(1.0, plain_attributes=[], neighbour=neighbour).release(
            hist, random_state=9
        )
        b = Privelet(1.0, neighbour=neighbour).release(hist, random_state=9)
        np.testing.assert_array_equal(a.counts, b.counts)
        q = [{"x": [0, 2], "h": "q"}]
        np.testing.assert_array_equal(a.variance_many(q), b.variance_many(q))


def test_fig5_sub_matrices_equal_identity_axis() -> None:
    """A10: Privelet+ with S_A = {x} transforms every sub-matrix x = i exactly like Privelet."""
    schema = Schema.from_dict({"attributes": [ordinal(3), FIG3]})
    counts = np.random.default_rng(3).integers(0, 9, size=schema.shape)
    plus = PriveletPlus(1.0, plain_attributes=["x"]).plan(schema)
    sub = Privelet(1.0).plan(Schema.from_dict({"attributes": [FIG3]}))
    assert plus.noise_scale(1.0) == sub.noise_scale(1.0) and plus.support == sub.support
    whole = hn_forward(counts, plus.axes, weighted=True)
    for i in range(3):
        np.testing.assert_allclose(whole[i], hn_forward(counts[i], sub.axes, weighted=True))


def test_error_is_data_independent() -> None:
    """The same seed on two different histograms gives the same M* - M (up to snapping)."""
    schema = Schema.from_dict({"attributes": [ordinal(5), FIG3]})
    rng = np.random.default_rng(4)
    m1, m2 = rng.integers(0, 50, size=schema.shape), rng.integers(0, 50, size=schema.shape)
    e1 = Privelet(1.0).release(Histogram(schema, m1), random_state=17).counts - m1
    e2 = Privelet(1.0).release(Histogram(schema, m2), random_state=17).counts - m2
    # coefficients are snapped to a grid of 2**-k <= lambda 2**-24: far below the noise
    np.testing.assert_allclose(e1, e2, atol=1e-4)
    assert np.abs(e1).max() > 1


def test_variance_model_save_load_and_bounds(tmp_path) -> None:
    schema = Schema.from_dict({"attributes": [ordinal(8), FIG3]})
    release = Privelet(1.0).release(
        Histogram(schema, np.ones(schema.shape, dtype=np.int64)), random_state=1
    )
    model = release.variance_model
    assert isinstance(model, PriveletVariance)
    v = model.coefficient_variance
    assert model.paper_bound() == pytest.approx(v * 2.5 * 4)
    # The largest box variance is the product of the per-axis maxima; over the paper's
    # admissible queries (nodes of the hierarchy) it is at most the bound of Theorem 3
    fig3 = NominalAxis(NominalTree.from_groups([3, 3]))
    assert model.max_variance() == pytest.approx(v * (19 / 16) * fig3.max_interval_variance())
    nodes = [{"x": [a, b], "h": h} for a in range(8) for b in range(a, 8) for h in "abcdefpq"]
    assert release.variance_many(nodes).max() == pytest.approx(v * (19 / 16) * (137 / 108))
    assert release.variance_many(nodes).max() <= model.paper_bound()
    release.save(tmp_path / "r")
    loaded = load_release(tmp_path / "r")
    q = [{"x": [1, 6], "h": "e"}, {}]
    np.testing.assert_allclose(loaded.variance_many(q), release.variance_many(q))
    assert release.variance(q[0]) == pytest.approx(v * (19 / 16) * (137 / 108))


# -- Monte Carlo -----------------------------------------------------------------------------------

REPLICATES = 20_000


def test_monte_carlo_variance() -> None:
    """Empirical error variance of box queries against ``Release.variance``.

    R independent Privelet releases of Haar(16) x Fig.3 are drawn in ONE Privelet+ release by
    adding an untransformed replicate axis (an identity axis is Privelet+'s loop over the
    sub-matrices, Sec. VI-D, and it does not change lambda or the support). The error of a query is a linear
    combination of independent Laplace variables, so its excess kurtosis is at most 3 and the
    sample variance of R draws has relative standard error at most sqrt((3 + 2) / R) = 1.6%; we
    allow 4 standard errors (6.4%). The mean must be within 4 sigma / sqrt(R) of 0.
    """
    schema = Schema.from_dict({"attributes": [ordinal(REPLICATES, "rep"), ordinal(16), FIG3]})
    counts = np.zeros(schema.shape, dtype=np.int64)
    counts[:, 3, 2] = 5
    release = PriveletPlus(1.0, plain_attributes=["rep"]).release(
        Histogram(schema, counts), random_state=2024
    )
    assert release.metadata.noise["lambda"] == 30.0  # 2 (1 + 4) 3 / 1
    error = release.counts - counts
    queries = [
        {},
        {"x": [3, 3], "h": "c"},
        {"x": [0, 7]},
        {"x": [1, 14]},
        {"x": [5, 9], "h": "p"},
        {"x": [0, 15], "h": "e"},
        {"x": [2, 12], "h": ["b", "e"]},
        {"h": "q"},
        {"x": [15, 15], "h": {"bins": [0, 5]}},
        {"x": [6, 6], "h": "a"},
        {"x": [1, 6], "h": ["c", "d"]},
    ]
    boxes = np.array([schema.box(q) for q in queries])[:, 1:, :]
    for query, box in zip(queries, boxes, strict=True):
        per_rep = error[:, box[0][0] : box[0][1] + 1, box[1][0] : box[1][1] + 1].sum(axis=(1, 2))
        model = release.variance({**query, "rep": [0, 0]})
        assert model == pytest.approx(
            2
            * 30.0**2
            * HaarAxis(16).interval_variance(*box[0])
            * NominalAxis(NominalTree.from_groups([3, 3])).interval_variance(*box[1]),
            rel=1e-4,
        )
        tolerance = 4 * math.sqrt(5 / REPLICATES)
        assert per_rep.var() == pytest.approx(model, rel=tolerance), query
        assert abs(per_rep.mean()) <= 4 * math.sqrt(model / REPLICATES), query
    # the whole-domain query has the variance of the base coefficient alone (V = 1 on each axis)
    assert release.variance({"rep": [0, 0]}) == pytest.approx(2 * 30.0**2, rel=1e-4)


def test_monte_carlo_basic_and_one_identity_axis() -> None:
    """Privelet+ with Fig. 3 transformed and x untransformed; and Basic (all plain)."""
    schema = Schema.from_dict({"attributes": [ordinal(4000, "rep"), ordinal(5), FIG3]})
    counts = np.zeros(schema.shape, dtype=np.int64)
    for plain, lam in ((["rep", "x"], 6.0), (["rep", "x", "h"], 2.0)):
        release = PriveletPlus(1.0, plain_attributes=plain).release(
            Histogram(schema, counts), random_state=7
        )
        assert release.metadata.noise["lambda"] == lam
        error = release.counts
        tolerance = 4 * math.sqrt(5 / 4000)  # as above, R = 4000
        for query in ({"x": [1, 3], "h": "q"}, {"x": [0, 4]}, {"x": [2, 2], "h": "d"}):
            box = schema.box(query)
            per_rep = error[:, box[1][0] : box[1][1] + 1, box[2][0] : box[2][1] + 1].sum(
                axis=(1, 2)
            )
            model = release.variance({**query, "rep": [0, 0]})
            assert per_rep.var() == pytest.approx(model, rel=tolerance), (plain, query)
    # Basic: k cells times the discrete Laplace variance of scale 2 / eps (8 / eps^2 continuous)
    cells = 3 * 6
    want = cells * float(discrete_laplace_variance(2.0))
    assert release.variance({"x": [1, 3], "rep": [0, 0]}) == pytest.approx(want, rel=1e-4)


def test_many_fanouts_fall_back_to_per_coefficient_scales() -> None:
    """With fanouts 2..20 the common denominator lcm(2f - 2) is ~1e8, too large for exact J at
    these counts: the release then noises I = den W c with the scales den lambda."""
    tree = {f"g{f}": [f"g{f}.{j}" for j in range(f)] for f in range(2, 21)}
    schema = Schema.from_dict(
        {"attributes": [ordinal(4), {"name": "h", "kind": "nominal", "hierarchy": tree}]}
    )
    counts = np.full(schema.shape, 3000, dtype=np.int64)
    mech = Privelet(1.0)
    plan = mech.plan(schema)
    assert integer_bound(counts, plan.axes) < EXACT_LIMIT
    assert integer_bound(counts, plan.axes) * common_denominator(plan.axes) >= EXACT_LIMIT
    hist = Histogram(schema, counts)
    np.testing.assert_allclose(mech.release(hist, random_state=NO_NOISE).counts, counts, atol=1e-6)
    release = mech.release(hist, random_state=3)
    den = denominators(plan.axes)
    lam = plan.noise_scale(1.0)
    noisy, draw = snapped_laplace(
        hn_forward_integer(counts, plan.axes),
        np.nextafter(lam * den, np.inf),
        epsilon=1.0,
        support=2 * plan.support,
        source=SeededRandomSource(3),
    )
    np.testing.assert_array_equal(release.counts, hn_inverse(noisy / den, plan.axes, weighted=True))
    per_coefficient = np.asarray(draw.variance) / den**2
    assert release.metadata.noise["coefficient_variance"] == pytest.approx(per_coefficient.max())
    assert per_coefficient.max() / per_coefficient.min() - 1 < 2.0**-22
    query = {"x": [1, 2], "h": "g7"}
    want = per_coefficient.max() * HaarAxis(4).interval_variance(1, 2)
    want *= plan.axes[1].interval_variance(*schema.box(query)[1])
    assert release.variance(query) == pytest.approx(want, rel=1e-12)
