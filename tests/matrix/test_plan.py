"""``dpcube plan``: expected errors of every strategy without data, and the recommendation."""

from __future__ import annotations

import pytest

from dpcube.mechanisms.matrix.bound import svdb
from dpcube.mechanisms.matrix.plan import plan
from dpcube.privacy.samplers import gaussian_sigma
from dpcube.workloads import allrange


def test_plan_errors_and_recommendation() -> None:
    result = plan(allrange((16,)), 1.0, 1e-6)
    unit = gaussian_sigma(1.0, 1.0, 1e-6) ** 2
    assert result["svdb"] == pytest.approx(unit * 404.482931, rel=1e-6)
    assert set(result["strategies"]) >= {"identity", "hierarchical", "wavelet", "eigen", "lsa"}
    assert result["strategies"]["identity"]["nominal_error"] == pytest.approx(
        unit * 16 * 17 * 18 / 6, rel=1e-9
    )
    assert result["strategies"]["lsa"]["ratio"] == pytest.approx(418.717231 / 404.482931, rel=1e-6)
    for row in result["strategies"].values():
        assert row["ratio"] >= 1 - 1e-9
    assert result["recommended"] == "gauss-opt"  # attains the certified optimum
    laplace = plan(allrange((16,)), 0.5, None, ["identity", "wavelet"])
    assert laplace["strategies"]["identity"]["nominal_error"] == pytest.approx(8 * 816, rel=1e-9)
    assert laplace["svdb"] == pytest.approx(8 * svdb(allrange((16,)).gram), rel=1e-9)
