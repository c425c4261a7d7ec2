"""mechanism="auto" / --mechanism auto: releases with the recommended mechanism, records the plan,
charges exactly once, and refuses clearly without a workload."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

import dpcube
from dpcube import Histogram, Schema
from dpcube.cli.main import main
from dpcube.planning import AutoMechanism, auto_mechanism, plan_mechanisms
from dpcube.privacy.ledger import BudgetLedger

SCHEMA = {
    "attributes": [
        {"name": "age", "kind": "ordinal", "range": [0, 7], "width": 1},
        {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
    ]
}


def test_auto_releases_with_the_recommended_mechanism_and_charges_once(tmp_path: Path) -> None:
    schema = Schema.from_dict(SCHEMA)
    ledger = BudgetLedger(tmp_path / "data.ledger")
    ledger.set_total(0.6)
    mech = dpcube.AutoMechanism(0.4, workload="upto:2", strategies=["hierarchical", "wavelet"])
    assert ledger.charges() == []
    release = mech.release(Histogram(schema, np.ones((8, 2), int)), ledger=ledger)
    charges = ledger.charges()
    assert len(charges) == 1 and charges[0].epsilon == 0.4
    plan = plan_mechanisms(schema, "upto:2", 0.4, strategies=["hierarchical", "wavelet"])
    assert release.metadata.mechanism == plan.recommended.mechanism
    recorded = release.metadata.report["plan"]
    assert recorded["recommended"] == plan.recommended.label and recorded["reason"]
    assert release.metadata.report["selected_by"] == "auto"
    assert {c["basis"] for c in recorded["candidates"]} <= {"exact", "benchmark", "not-applicable"}
    assert mech.plan_ is not None and mech.chosen_ is not None
    # a second release beyond the total is refused and not charged
    with pytest.raises(dpcube.DPCubeError):
        mech.release(Histogram(schema, np.ones((8, 2), int)), ledger=ledger)
    assert len(ledger.charges()) == 1


def test_auto_mechanism_is_planned_without_data() -> None:
    schema = Schema.from_dict(SCHEMA)
    mech = auto_mechanism(schema, "marginals:1", 1.0, mechanisms=["identity", "datacube"])
    assert isinstance(mech, AutoMechanism) and mech.chosen_ is not None
    assert mech.plan_.recommended.mechanism in ("identity", "datacube")


def test_auto_without_a_workload_or_on_benchmark_figures_is_refused() -> None:
    with pytest.raises(dpcube.DPCubeError, match="needs a workload"):
        AutoMechanism(1.0)
    with pytest.raises(dpcube.DPCubeError, match="census-hierarchy"):
        auto_mechanism(Schema.from_dict(SCHEMA), "group-sizes", 1.0)


def test_cli_release_auto_records_the_plan_in_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    data = tmp_path / "people.csv"
    data.write_text("age,sex\n1,F\n2,M\n3,F\n7,M\n")
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(SCHEMA))
    base = ["release", str(data), "--schema", str(schema), "--mechanism", "auto"]
    base += ["--epsilon", "0.5", "--total-epsilon", "1"]
    # no workload: one clear line, nothing charged
    code = main([*base, "--out", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 2 and "needs a workload" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "home").exists() or not list((tmp_path / "home").rglob("*.ledger*"))
    code = main(
        [
            *base,
            "--workload",
            "prefix",
            "--param",
            "strategies=hierarchical",
            "--out",
            str(tmp_path / "rel"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    chosen = dpcube.load_release(tmp_path / "rel").metadata.mechanism
    assert f"with {chosen} (chosen by --mechanism auto)" in out and chosen != "auto"
    manifest = json.loads(next((tmp_path / "rel").glob("*.json")).read_text())
    text = json.dumps(manifest)
    assert '"selected_by": "auto"' in text and '"reason"' in text and '"candidates"' in text
    loaded = dpcube.load_release(tmp_path / "rel")
    assert loaded.metadata.report["plan"]["workload"] == "Prefix(8,2)"
