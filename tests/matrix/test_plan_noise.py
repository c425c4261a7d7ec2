"""Li & Miklau App. B.3, corrected: with delta, `dpcube plan` says whether Gaussian or Laplace noise
gives the lower error for each strategy, and by how much."""

from __future__ import annotations

import math

import pytest

from dpcube.mechanisms.matrix.mechanism import MatrixMechanism, make_strategy
from dpcube.mechanisms.matrix.plan import gaussian_wins_b3, plan
from dpcube.workloads import resolve_workload


def test_plan_compares_gaussian_and_laplace_per_strategy() -> None:
    workload = resolve_workload("allrange:64", None)
    out = plan(workload, 1.0, 1e-6, ["identity", "hierarchical", "wavelet"])
    for name, row in out["strategies"].items():
        laplace = MatrixMechanism(1.0, None).release_noise_variance(
            make_strategy(name, workload.dims, workload)
        )
        assert row["laplace_error"] == pytest.approx(laplace * row["trace"], rel=1e-9)
        assert row["winner"] == ("gaussian" if row["error"] < row["laplace_error"] else "laplace")
        assert row["gaussian_over_laplace"] == pytest.approx(row["error"] / row["laplace_error"])
    # identity: ||A||_1 = ||A||_2 = 1, Laplace's variance 2/eps^2 is below any Gaussian's here
    assert out["strategies"]["identity"]["winner"] == "laplace"
    nc = out["noise_comparison"]
    assert nc["ratio"] >= 1.0 and nc["winner"] in ("gaussian", "laplace")
    assert "noise_comparison" not in plan(workload, 1.0, None, ["identity"])


def test_b3_corrected_rule_matches_the_error_formulas() -> None:
    """E8: with P = 2 ln(n^2) / eps^2 the Gaussian error (2/eps^2)(2 ln n) ||A||_2^2 tr is below
    the Laplace error (2/eps^2) ||A||_1^2 tr exactly when ||A||_1 > sqrt(2 ln n) ||A||_2; checked
    on the real strategies' norms (hierarchical: one column has a 1 per level)."""
    for n in (16, 256, 1024):
        workload = resolve_workload(f"allrange:{n}", None)
        for name in ("identity", "hierarchical", "wavelet"):
            op = make_strategy(name, workload.dims, workload).operator
            l1, l2 = op.l1_sensitivity(), op.l2_sensitivity()
            gaussian = 2 * math.log(n**2) * l2**2
            laplace = 2 * l1**2
            assert gaussian_wins_b3(l1, l2, n) == (gaussian < laplace)
