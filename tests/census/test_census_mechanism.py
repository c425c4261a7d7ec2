"""Census group sizes (Fioretto, Van Hentenryck and Zhu, "Differential Privacy of Hierarchical
Census Data: An Optimization Approach", Artificial Intelligence 296, 2021): data plumbing, privacy
calibration (Lemmas 4 and 6, the geometric mechanism and the budget split), and the invariants
every mechanism keeps (consistency, validity, faithfulness)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpcube
from dpcube.errors import BudgetError, DataError
from dpcube.mechanisms.census import privacy as P
from dpcube.mechanisms.census.chain import level_chain_values
from dpcube.mechanisms.census.cumulative import gamma
from dpcube.mechanisms.census.hierarchy import RegionHierarchy
from dpcube.privacy import NO_NOISE
from dpcube.privacy.random import SeededRandomSource
from dpcube.privacy.samplers import discrete_laplace, laplace_scale_rational
from experiments.census_metrics import violations
from tests.helpers.census_bruteforce import SPEC_H, random_hierarchy, random_table

CLEAN = {"consistency": 0, "faithfulness": 0, "negative": 0, "non_integer": 0}
#: The running example of Fioretto et al. (Example 2 and Table 3): (user, unit, region).
PERSONS = pd.DataFrame(
    {
        "user": ["01", "03", "04", "02", "05", "06", "07", "08", "09", "10", "11"],
        "unit": ["A", "A", "A", "B", "C", "D", "D", "D", "E", "F", "F"],
        "state": ["GA", "GA", "GA", "GA", "GA", "NY", "NY", "NY", "NY", "NY", "NY"],
    }
)


def test_aggregation_running_example() -> None:
    """n^GA = (2,0,1), n^NY = (1,1,1), n^US = (3,1,2), G = 6, N = 11; all checks pass."""
    t = dpcube.group_sizes(PERSONS, unit="unit", region="state", hierarchy=SPEC_H, max_size=3)
    assert t.row("GA").tolist() == [2, 0, 1] and t.row("NY").tolist() == [1, 1, 1]
    assert t.row("US").tolist() == [3, 1, 2]
    assert (t.groups, t.persons) == (6, 11)
    assert violations(t.hierarchy, t.counts, t.groups) == CLEAN


def test_data_validation_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = PERSONS.copy()
    bad.loc[0, "state"] = "NY"
    with pytest.raises(DataError, match=r"1 units \(column 'unit'\) span several leaf regions"):
        dpcube.group_sizes(bad, unit="unit", region="state", hierarchy=SPEC_H, max_size=3)
    with pytest.raises(DataError, match=r"e\.g\. unit 'A' in 'GA' and 'NY'"):
        dpcube.group_sizes(
            bad, unit="unit", region="state", hierarchy=SPEC_H, max_size=3, show_values=True
        )
    with pytest.raises(DataError, match=r"1 values of column 'state' are missing .*not shown"):
        dpcube.group_sizes(PERSONS, unit="unit", region="state", hierarchy={"GA": "US"}, max_size=3)
    with pytest.raises(DataError, match=r"missing from the hierarchy: 'NY'"):
        dpcube.group_sizes(
            PERSONS,
            unit="unit",
            region="state",
            hierarchy={"GA": "US"},
            max_size=3,
            show_values=True,
        )
    with pytest.raises(DataError, match="cycle"):
        RegionHierarchy.from_parents({"US": None, "A": "B", "B": "A"})
    with pytest.raises(DataError, match="exceeds max_size=2"):
        dpcube.group_sizes(PERSONS, unit="unit", region="state", hierarchy=SPEC_H, max_size=2)
    top = dpcube.group_sizes(
        PERSONS, unit="unit", region="state", hierarchy=SPEC_H, max_size=2, top_code=True
    )
    assert top.row("US").tolist() == [3, 3]
    path = tmp_path / "h.csv"
    path.write_text("region,parent\nUS,\nGA,US\nNY,US\n")
    csv = tmp_path / "p.csv"
    PERSONS.to_csv(csv, index=False)
    t = dpcube.group_sizes(str(csv), unit="unit", region="state", hierarchy=str(path), max_size=3)
    assert t.row("US").tolist() == [3, 1, 2]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_sensitivity_property(seed: int) -> None:
    """One group moves s -> s +/- 1 inside S: per region and per level, L1 change <= 2
    (vectors) and <= 1 (cumulative); the level chain changes by exactly |R_l| (interior move)."""
    rng = np.random.default_rng(seed)
    h = random_hierarchy(rng)
    k = 4
    n = random_table(rng, h, k)
    leaves = np.flatnonzero(n[h.leaves].sum(axis=1) > 0)
    if leaves.size == 0:
        return
    j = int(rng.choice(leaves))
    s = int(rng.choice(np.flatnonzero(n[h.leaves.start + j] > 0)))
    step = 1 if s == 0 else (-1 if s == k - 1 else int(rng.choice([-1, 1])))
    leaf = n[h.leaves].copy()
    leaf[j, s] -= 1
    leaf[j, s + step] += 1
    m = h.aggregate(leaf)
    for level in range(1, h.levels + 1):
        sl = h.level_slice(level)
        assert np.abs(m[sl] - n[sl]).sum() == 2
        assert np.abs(gamma(m[sl]) - gamma(n[sl])).sum() == 1
        assert (
            np.abs(level_chain_values(h, m)[level - 1] - level_chain_values(h, n)[level - 1]).sum()
            == h.level_sizes[level - 1]
        )


def test_chain_sensitivity_on_1_2_6_tree() -> None:
    h = RegionHierarchy.from_parents(
        {**{f"S{i}": "N" for i in range(2)}, **{f"C{i}": f"S{i // 3}" for i in range(6)}}
    )
    n = h.aggregate(np.ones((6, 3), dtype=np.int64))
    worst = [0, 0, 0]
    for j in range(6):
        for s in range(2):
            leaf = n[h.leaves].copy()
            leaf[j, s] -= 1
            leaf[j, s + 1] += 1
            m = h.aggregate(leaf)
            for level in range(3):
                d = np.abs(level_chain_values(h, m)[level] - level_chain_values(h, n)[level]).sum()
                worst[level] = max(worst[level], int(d))
    assert worst == [1, 2, 6]


def test_geometric_sampler_moments() -> None:
    """10^6 draws of the double-geometric with alpha = exp(-1/3) (epsilon 0.5, L 3, Delta 1
    ... scale 3): mean within 4 std/sqrt(n) of 0, variance within 2% of 2 alpha/(1-alpha)^2,
    Pr[0] = (1-alpha)/(1+alpha) within 4 binomial std, Pr[1]/Pr[0] within 1% of alpha."""
    t, s = laplace_scale_rational(3.0)
    alpha = math.exp(-s / t)
    z = discrete_laplace(SeededRandomSource(3), t, s, size=1_000_000)
    assert z.dtype == np.int64
    var = 2 * alpha / (1 - alpha) ** 2
    assert abs(z.mean()) < 4 * math.sqrt(var / z.size)
    assert abs(z.var() / var - 1) < 0.02
    p0 = (1 - alpha) / (1 + alpha)
    assert abs(np.mean(z == 0) - p0) < 4 * math.sqrt(p0 * (1 - p0) / z.size)
    assert abs(np.mean(z == 1) / np.mean(z == 0) / alpha - 1) < 0.01


@pytest.mark.parametrize(
    ("method", "mode", "scales"),
    [
        ("dp", "private_postprocessed", [6, 6, 6]),
        ("topdown", "private_postprocessed", [6, 6, 6]),
        ("cdp_approx", "private_postprocessed", [3, 3, 3]),
        ("cdp", "private_postprocessed", [3, 3, 3]),
        ("cdp", "private_calibrated", [3, 6, 18]),
        ("cdp", "as_published", [3, 3, 3]),
    ],
)
def test_calibration_and_accountant(method: str, mode: str, scales: list[float]) -> None:
    """alpha = exp(-epsilon/(2L)) for n, exp(-epsilon/L) for Gamma, exp(-epsilon/(L|R_l|))
    for calibrated chains (scale = 1/-ln alpha); private modes sum to exactly epsilon."""
    a = P.accounting(method, mode, 1.0, (1, 2, 6), "add_remove")
    assert [lv["scale"] for lv in a["levels"]] == pytest.approx(scales)
    if mode == "as_published":
        assert not a["private"] and a["epsilon_spent"] == pytest.approx((1 + 2 + 6) / 3)
    else:
        assert a["private"] and a["epsilon_spent"] == pytest.approx(1.0)


def test_likelihood_ratio_bound() -> None:
    """The log pmf ratio of the noise layer, sum over cells of |change| / scale, is <= epsilon
    for neighbouring inputs under private modes and > epsilon for as_published chain noise."""
    h = RegionHierarchy.from_parents(
        {**{f"S{i}": "N" for i in range(2)}, **{f"C{i}": f"S{i // 3}" for i in range(6)}}
    )
    rng = np.random.default_rng(5)
    n = random_table(rng, h, 3)
    leaf = n[h.leaves].copy()
    j = int(np.flatnonzero(leaf[:, 0] > 0)[0])
    leaf[j, 0] -= 1
    leaf[j, 1] += 1
    m = h.aggregate(leaf)
    measure = {
        "group_sizes": lambda x, lv: x[h.level_slice(lv)],
        "cumulative": lambda x, lv: gamma(x[h.level_slice(lv)]),
        "chain": lambda x, lv: level_chain_values(h, x)[lv - 1],
    }
    for method, mode in [
        ("dp", "private_postprocessed"),
        ("cdp", "private_postprocessed"),
        ("cdp", "private_calibrated"),
        ("cdp", "as_published"),
    ]:
        acct = P.accounting(method, mode, 1.0, h.level_sizes, "add_remove")
        ratio = sum(
            np.abs(
                measure[lv["measurement"]](m, lv["level"])
                - measure[lv["measurement"]](n, lv["level"])
            ).sum()
            / lv["scale"]
            for lv in acct["levels"]
        )
        if mode == "as_published":
            assert ratio > 1.0
        else:
            assert ratio <= 1.0 + 1e-12


@pytest.mark.parametrize("method", ["dp", "cdp", "cdp_approx", "topdown", "qp"])
def test_no_noise_identity(method: str) -> None:
    """With the noise off, every post-processor returns n exactly (objective 0)."""
    rng = np.random.default_rng(6)
    h = random_hierarchy(rng)
    t = dpcube.GroupSizeTable(h, random_table(rng, h, 5), public_groups=True)
    r = dpcube.CensusHierarchy(1.0, method=method).release(t, random_state=NO_NOISE)
    assert r.values.tolist() == t.counts.tolist()
    assert r.metadata.noise.get("objective", 0.0) == pytest.approx(0.0)


def test_determinism_and_save_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Same seed, same output; another seed, other noise; save/load."""
    rng = np.random.default_rng(7)
    h = random_hierarchy(rng)
    t = dpcube.GroupSizeTable(h, random_table(rng, h, 6, mean=20), public_groups=True)
    mech = dpcube.CensusHierarchy(1.0, method="cdp")
    a, b, c = (mech.release(t, random_state=s) for s in (1, 1, 2))
    assert np.array_equal(a.values, b.values) and not np.array_equal(a.values, c.values)
    frame = a.table
    assert list(frame.columns) == ["region", "level", "size", "count"] and len(frame) == h.size * 6
    a.save(tmp_path / "r")
    loaded = dpcube.load_release(tmp_path / "r")
    q = [{"region": h.names[1], "size": [2, 4]}, {}]
    np.testing.assert_array_equal(loaded.answer_many(q), a.answer_many(q))
    assert loaded.answer({}) == t.groups


def test_as_published_is_labelled_and_refused_by_ledger(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(8)
    h = random_hierarchy(rng)
    t = dpcube.GroupSizeTable(h, random_table(rng, h, 4), public_groups=True)
    r = dpcube.CensusHierarchy(1.0, method="cdp", noise_mode="as_published").release(
        t, random_state=1
    )
    assert r.private is False and r.metadata.noise["private"] is False
    assert "NOT EPSILON-DP" in "\n".join(r.report_lines())
    ledger = dpcube.BudgetLedger(tmp_path / "l")
    ledger.set_total(10.0, 0.0)
    with pytest.raises(BudgetError, match="not epsilon-DP"):
        dpcube.CensusHierarchy(1.0, method="cdp", noise_mode="as_published").release(
            t, random_state=1, ledger=ledger
        )


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from(["dp", "cdp", "cdp_approx", "topdown"]),
    st.sampled_from([0.1, 1.0]),
)
def test_exact_mechanism_invariants(seed: int, method: str, epsilon: float) -> None:
    """Integer, >= 0, consistent, every level sums to G (#CV = 0), on random instances."""
    rng = np.random.default_rng(seed)
    h = random_hierarchy(rng, levels=int(rng.integers(2, 4)), max_branch=4)
    t = dpcube.GroupSizeTable(
        h, random_table(rng, h, int(rng.integers(1, 8)), mean=3), public_groups=True
    )
    r = dpcube.CensusHierarchy(epsilon, method=method).release(t, random_state=seed)
    assert violations(h, r.values, t.groups) == CLEAN


def test_ipums_household_sizes(data_dir) -> None:  # type: ignore[no-untyped-def]
    """Real data: IPUMS CPS households of size 1..7+ give the national counts of the data README."""
    from experiments.census import ipums_table

    t = ipums_table(data_dir / "ipums_cps")
    assert t.row("US").tolist() == [25879, 30570, 12052, 9695, 4373, 1713, 1014]
    assert t.hierarchy.level_sizes == (1, 51)


def test_bench_census_smoke(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`python -m experiments.census` end to end on a tiny synthetic stand-in: CSV written, exact
    mechanisms without violations, the as-published M_CDP rows marked not private; with
    ``--scaling-ks ''`` it claims exactly the files it wrote (it used to report
    census_scaling.csv, which it skips)."""
    from experiments.census import main

    out = tmp_path / "bench"
    argv = ["--out", str(out), "--datasets", "synthetic", "--scale", "1e-5", "--max-size", "12"]
    argv += ["--epsilons", "1.0", "--seeds", "1", "--methods", "dp,cdp,topdown", "--scaling-ks", ""]
    assert main(argv) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("wrote ") and "scaling" not in last
    claimed = sorted(last.removeprefix("wrote ").split(", "))
    assert claimed == sorted(str(p) for p in out.iterdir())
    runs = pd.read_csv(out / "census_runs.csv")
    assert (runs["cv_consistency"] == 0).all() and (runs["cv_faithfulness"] == 0).all()
    published = runs[runs["noise_mode"] == "as_published"]
    assert len(published) == 1 and not published["private"].any()
    assert runs[runs["noise_mode"] != "as_published"]["private"].all()


def test_hierarchy_from_levels_and_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    frame = pd.DataFrame({"state": ["GA", "GA", "NY"], "county": ["Fulton", "Cobb", "Kings"]})
    h = RegionHierarchy.from_levels(frame, ["state", "county"], root="US")
    assert h.names == ("US", "GA", "NY", "Cobb", "Fulton", "Kings") and h.level_sizes == (1, 2, 3)
    path = tmp_path / "h.json"
    path.write_text('{"root": "US", "children": {"GA": ["Cobb", "Fulton"], "NY": ["Kings"]}}')
    assert RegionHierarchy.from_file(path).names == h.names
    with pytest.raises(DataError, match="same level"):
        RegionHierarchy.from_parents({"GA": "US", "NY": "US", "Kings": "NY"})
