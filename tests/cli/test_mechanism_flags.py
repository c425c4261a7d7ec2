"""``dpcube release``'s mechanism-specific flags: each works with the mechanisms that take it and
is refused, in one line, with any other (no flag is silently ignored)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from dpcube import registry
from dpcube.cli import mechanism_flags
from dpcube.cli.main import SUMMARIES, build_parser, main
from dpcube.errors import DPCubeError

SPATIAL = ("ag", "htf", "kdtree", "privtree", "quadtree", "singular", "ug", "uniform")

#: Every mechanism-specific flag, a value for it, and the mechanisms that take it (written out
#: here, not read from the table, so that the test states what the command line must do).
FLAG_CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("--strategy", ["lsa"], ("matrix",)),
    ("--workload", ["allrange"], ("auto", "dawa", "matrix", "mwem")),
    ("--method", ["bmax"], ("datacube",)),
    ("--publish", ["all"], ("datacube",)),
    ("--consistency", ["l2"], ("datacube",)),
    ("--plain-attributes", ["age"], ("privelet-plus",)),
    ("--user-column", ["user"], SPATIAL),
    ("--max-points-per-user", ["2"], SPATIAL),
    ("--group-by", ["hh"], ("census-hierarchy",)),
    ("--region", ["county"], ("census-hierarchy",)),
    ("--hierarchy", ["regions.csv"], ("census-hierarchy",)),
    ("--max-size", ["4"], ("census-hierarchy",)),
    ("--top-code", [], ("census-hierarchy",)),
    ("--public-groups", ["3"], ("census-hierarchy",)),
    ("--groups-are-public", [], ("census-hierarchy",)),
    ("--region-of-unit", ["first"], ("census-hierarchy",)),
]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "home"))
    rows = ["age,sex,hh,county,lat,lon,user"]
    rows += [
        f"{i % 10},{'FM'[i % 2]},{i % 7},c{1 + i % 2},{(i % 9) / 10},{(i % 8) / 10},{i % 5}"
        for i in range(60)
    ]
    (tmp_path / "people.csv").write_text("\n".join(rows) + "\n")
    schema = {
        "attributes": [
            {"name": "age", "kind": "ordinal", "range": [0, 9], "width": 1},
            {"name": "sex", "kind": "nominal", "categories": ["F", "M"]},
        ]
    }
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    return {
        "data": tmp_path / "people.csv",
        "schema": tmp_path / "schema.yaml",
        "home": tmp_path / "home",
        "out": tmp_path / "rel",
    }


def _release(f: dict[str, Path], mechanism: str, *extra: str) -> list[str]:
    return [
        "release",
        str(f["data"]),
        "--schema",
        str(f["schema"]),
        "--mechanism",
        mechanism,
        "--epsilon",
        "1",
        "--out",
        str(f["out"]),
        *extra,
    ]


def test_the_cases_are_the_table() -> None:
    assert {flag for flag, _, _ in FLAG_CASES} == {s.flag for s in mechanism_flags.FLAGS}
    for flag, _, takers in FLAG_CASES:
        (spec,) = [s for s in mechanism_flags.FLAGS if s.flag == flag]
        assert sorted(spec.mechanisms) == sorted(takers), flag


@pytest.mark.parametrize(("flag", "value", "takers"), FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_a_flag_of_another_mechanism_is_refused(
    files: dict[str, Path],
    flag: str,
    value: list[str],
    takers: tuple[str, ...],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused before anything is read, written or charged; the line names the flag, the
    mechanism and the mechanisms that take the flag."""
    others = [m for m in ("identity", "datacube", "census-hierarchy", "ug") if m not in takers]
    for mechanism in others:
        code = main(_release(files, mechanism, flag, *value))
        err = capsys.readouterr().err
        assert code == 2, (flag, mechanism, err)
        assert err.count("\n") == 1, err
        assert err.startswith(f"error: {flag}: --mechanism {mechanism} does not use it"), err
        assert all(t in err for t in takers), err
        assert not files["out"].exists() and not files["home"].exists()


@pytest.mark.parametrize("mechanism", ["census-hierarchy", "datacube", "privelet", "privelet-plus"])
def test_delta_is_refused_where_the_constructor_has_none(
    files: dict[str, Path], mechanism: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_release(files, mechanism, "--delta", "1e-6"))
    err = capsys.readouterr().err
    assert code == 2 and f"the {mechanism} mechanism is pure epsilon-DP" in err, err
    assert err.count("\n") == 1 and not files["home"].exists()


def _namespace(*argv: str) -> argparse.Namespace:
    return build_parser("release").parse_args(
        ["release", "d.csv", "--epsilon", "0.5", "--out", "o", *argv]
    )


def test_flags_and_params_build_the_mechanism() -> None:
    cls = registry.resolve(registry.MECHANISMS, "datacube", "mechanism")
    args = _namespace(
        "--mechanism", "datacube", "--method", "pmost", "--publish", "k=2", "--consistency", "l2"
    )
    mech = mechanism_flags.build_mechanism(args, "datacube", cls, {"theta0": 0.3})
    assert (mech.method, mech.publish, mech.consistency, mech.theta0, mech.epsilon) == (  # type: ignore[attr-defined]
        "pmost",
        "k=2",
        "l2",
        0.3,
        0.5,
    )
    default = mechanism_flags.build_mechanism(
        _namespace("--mechanism", "datacube"), "datacube", cls, {}
    )
    assert (default.method, default.publish, default.consistency) == ("bmax", "all", None)  # type: ignore[attr-defined]
    plus = registry.resolve(registry.MECHANISMS, "privelet-plus", "mechanism")
    args = _namespace("--mechanism", "privelet-plus", "--plain-attributes", "age, gender")
    mech = mechanism_flags.build_mechanism(args, "privelet-plus", plus, {})
    assert mech.plain_attributes == ("age", "gender") and mech.neighbour == "add_remove"  # type: ignore[attr-defined]
    none = _namespace("--mechanism", "privelet-plus", "--plain-attributes", "")
    assert mechanism_flags.build_mechanism(none, "privelet-plus", plus, {}).plain_attributes == ()  # type: ignore[attr-defined]
    ug = registry.resolve(registry.MECHANISMS, "ug", "mechanism")
    args = _namespace("--mechanism", "ug", "--user-column", "u", "--max-points-per-user", "3")
    assert mechanism_flags.build_mechanism(args, "ug", ug, {}).user_bound == 3  # type: ignore[attr-defined]


def test_a_flag_value_is_checked_against_the_declared_domain() -> None:
    cls = registry.resolve(registry.MECHANISMS, "datacube", "mechanism")
    args = _namespace("--mechanism", "datacube", "--consistency", "l7")
    with pytest.raises(DPCubeError, match=r"^datacube: --consistency='l7' is outside its domain"):
        mechanism_flags.build_mechanism(args, "datacube", cls, {})
    ug = registry.resolve(registry.MECHANISMS, "ug", "mechanism")
    args = _namespace("--mechanism", "ug", "--user-column", "u", "--max-points-per-user", "0")
    with pytest.raises(DPCubeError, match=r"--max-points-per-user=0 is outside its domain"):
        mechanism_flags.build_mechanism(args, "ug", ug, {})


def test_a_parameter_set_by_a_flag_and_by_param_is_refused(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_release(files, "datacube", "--method", "pmost", "--param", "method=bmax"))
    err = capsys.readouterr().err
    assert code == 2 and "--method and --param method both set datacube's method" in err, err
    assert not files["home"].exists()


def test_max_points_per_user_needs_a_user_column(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(_release(files, "ug", "--max-points-per-user", "2"))
    err = capsys.readouterr().err
    assert code == 2 and "--max-points-per-user bounds the points of each user" in err, err
    assert err.count("\n") == 1 and not files["home"].exists()


def test_every_mechanism_has_a_counted_input_and_every_flag_a_registered_taker() -> None:
    from dpcube.engine.counting import REGION_OF_UNIT

    assert set(mechanism_flags.INPUTS) == set(registry.MECHANISMS)
    for spec in mechanism_flags.FLAGS:
        assert set(spec.mechanisms) <= set(registry.MECHANISMS), spec.flag
        for name in spec.mechanisms:
            cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
            assert spec.param is None or spec.param in cls.accepted_params(), (spec.flag, name)
    assert mechanism_flags.REGION_OF_UNIT == REGION_OF_UNIT
    assert mechanism_flags.SPATIAL == SPATIAL


def test_placeholder_help_is_the_command_help() -> None:
    """The one-line help of a sub-command not built is the help it has when built."""

    def helps(parser: argparse.ArgumentParser) -> dict[str, str]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return {a.dest: str(a.help) for a in sub._choices_actions}

    assert helps(build_parser()) == SUMMARIES
    assert helps(build_parser("query")) == SUMMARIES


def test_release_help_states_the_declared_domains(capsys: pytest.CaptureFixture[str]) -> None:
    """``release --help`` offers a flag's choices from the parameter's declaration."""
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    datacube = registry.resolve(registry.MECHANISMS, "datacube", "mechanism")
    methods = datacube.param_spec_map()["method"].choices
    assert "--method {" + ",".join(methods) + "}" in out
    assert "--consistency {none,l2,l1,linf}" in out
    assert "or a strategy spec" in out  # --strategy states the declared meaning
