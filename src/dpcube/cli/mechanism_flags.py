"""``dpcube release``'s mechanism-specific flags and how each mechanism's input is counted.

The mechanisms know nothing of the command line: a mechanism's configuration is its constructor,
whose parameters it declares once (:class:`dpcube.mechanisms.params.ParamSpec`). This module is
the command line's side:

- :data:`FLAGS`: the flags that only some mechanisms use, each naming the mechanisms that take it
  and, where it sets a constructor parameter, that parameter (its value is then checked against
  the mechanism's declared domain, the same check ``--param`` gets);
- :data:`INPUTS`: how ``dpcube release`` counts a mechanism's input (a histogram of the schema's
  grid, the cuboids of a data cube, a census group-size table, spatial points with an optional
  bound per user), each a function of explicit arguments.

Every flag either works or is refused: a flag of :data:`FLAGS` given to a mechanism that does not
take it is refused (:func:`refuse_foreign_flags`), one line naming the flag, the mechanism and the
mechanisms that take it; so is ``--delta`` for a mechanism whose constructor has no ``delta``.
The table holds module paths and names as text: building the parser imports no mechanism.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dpcube import registry
from dpcube.errors import BudgetError, DataError, SchemaError, UsageError

if TYPE_CHECKING:
    from dpcube.mechanisms.base import Mechanism
    from dpcube.privacy.unit import PrivacyUnit
    from dpcube.schema import Schema

#: The spatial mechanisms (points in a latitude/longitude grid).
SPATIAL = ("ag", "htf", "kdtree", "privtree", "quadtree", "singular", "ug", "uniform")

#: ``region_of_unit`` of :func:`dpcube.group_sizes` (the census counting's choices).
REGION_OF_UNIT = ("first", "most")


def _names(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; ``""`` -> ``[]`` (none)."""
    return [a.strip() for a in text.split(",") if a.strip()]


@dataclass(frozen=True)
class MechanismFlag:
    """A ``dpcube release`` flag that only ``mechanisms`` use.

    ``param``: the constructor parameter it sets (None: it configures the counting of the input);
    ``convert``: the flag's text to the parameter's value; ``options``: the rest of
    ``argparse``'s ``add_argument`` (``type``, ``action``, ``metavar``, ``choices``);
    ``with_meaning``: the help adds the parameter's declared meaning (where it lists the values).
    """

    flag: str
    mechanisms: tuple[str, ...]
    help: str
    param: str | None = None
    convert: Callable[[Any], Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    with_meaning: bool = False

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def given(self, args: argparse.Namespace) -> bool:
        value = getattr(args, self.dest, None)
        return value is not None and value is not False  # 0 and "" are given values

    def takers(self) -> str:
        if self.mechanisms == SPATIAL:
            return "the spatial mechanisms (" + ", ".join(SPATIAL) + ")"
        return ", ".join(self.mechanisms)


_CENSUS = ("census-hierarchy",)

#: Every mechanism-specific flag of ``dpcube release``.
FLAGS: tuple[MechanismFlag, ...] = (
    MechanismFlag(
        "--strategy",
        ("matrix",),
        "the matrix mechanism's strategy (default lsa)",
        param="strategy",
        with_meaning=True,
    ),
    MechanismFlag(
        "--workload",
        ("matrix", "dawa", "mwem", "auto"),
        "workload spec (allrange:1024, marginals:2:8x8, with the schema's grid allrange, "
        "prefix, marginals:K, upto:K; as dpcube plan) or JSON/CSV file",
        param="workload",
    ),
    MechanismFlag(
        "--adaptive",
        ("auto",),
        "auto: choose the mechanism from noisy features of the data (total, non-zero cells, "
        "skew; Pythia) by the shipped rule, spending --selection-epsilon of the budget on them "
        "(the release gets the rest; one charge); without it auto plans from the schema alone",
        param="adaptive",
        options={"action": "store_true"},
    ),
    MechanismFlag(
        "--selection-epsilon",
        ("auto",),
        "auto --adaptive: the part of --epsilon spent on the features (default 5 %% of it)",
        param="selection_epsilon",
        options={"type": float, "metavar": "E"},
    ),
    MechanismFlag(
        "--method",
        ("datacube",),
        "datacube: cuboid selection (default bmax)",
        param="method",
    ),
    MechanismFlag(
        "--publish",
        ("datacube",),
        "datacube: cuboids to publish: all | k=2 | a,b;b,c (default all)",
        param="publish",
    ),
    MechanismFlag(
        "--consistency",
        ("datacube",),
        "datacube: post-processing that makes the cuboids agree (default none)",
        param="consistency",
    ),
    MechanismFlag(
        "--plain-attributes",
        ("privelet-plus",),
        "privelet-plus: comma-separated attributes left untransformed (S_A); default: the rule "
        "|A| <= P(A)^2 H(A); '' for none",
        param="plain_attributes",
        convert=_names,
    ),
    MechanismFlag(
        "--user-column",
        SPATIAL,
        "spatial mechanisms: the column identifying users (user-level privacy); the older name "
        "of --privacy-unit",
    ),
    MechanismFlag(
        "--max-points-per-user",
        SPATIAL,
        "spatial mechanisms, with --user-column: keep at most this many random points per user "
        "(the mechanism's user_bound); the older name of --max-rows-per-unit",
        param="user_bound",
        options={"type": int},
    ),
    MechanismFlag(
        "--group-by",
        _CENSUS,
        "census-hierarchy: the unit (group) id column",
        options={"metavar": "UNIT"},
    ),
    MechanismFlag(
        "--region",
        _CENSUS,
        "census-hierarchy: the leaf-region column",
        options={"metavar": "REGIONCOL"},
    ),
    MechanismFlag(
        "--hierarchy",
        _CENSUS,
        "census-hierarchy: region,parent table (CSV/Parquet) or JSON tree",
        options={"metavar": "FILE"},
    ),
    MechanismFlag(
        "--max-size",
        _CENSUS,
        "census-hierarchy: the largest group size k",
        options={"type": int, "metavar": "K"},
    ),
    MechanismFlag(
        "--top-code",
        _CENSUS,
        "census-hierarchy: count groups above K in the 'K or more' bin",
        options={"action": "store_true"},
    ),
    MechanismFlag(
        "--public-groups",
        _CENSUS,
        "census-hierarchy: the number of groups, which you declare public (it is released "
        "exactly; checked against the data before anything is spent)",
        options={"type": int, "metavar": "G"},
    ),
    MechanismFlag(
        "--groups-are-public",
        _CENSUS,
        "census-hierarchy: declare that the number of groups in this data is public",
        options={"action": "store_true"},
    ),
    MechanismFlag(
        "--region-of-unit",
        _CENSUS,
        "census-hierarchy: give a unit seen in several leaf regions one region: 'first' "
        "(smallest region code) or 'most' (region of most of its rows; ties to the smallest "
        "code); group-size methods only (dp, qp, qip, topdown)",
        options={"choices": REGION_OF_UNIT},
    ),
)


def add_unit_flags(parser: argparse.ArgumentParser) -> None:
    """The privacy-unit flags, which every mechanism takes (:mod:`dpcube.privacy.unit`)."""
    group = parser.add_argument_group(
        "privacy unit (every mechanism; default: one row)",
        "protect a unit of many rows (a plane, a patient, a customer): each unit keeps at most "
        "K rows, chosen at random in the engine before counting, and every sensitivity is that "
        "of one unit",
    )
    group.add_argument(
        "--privacy-unit",
        default=None,
        metavar="COLUMN",
        help="the column identifying the unit to protect (needs --max-rows-per-unit)",
    )
    group.add_argument(
        "--max-rows-per-unit",
        default=None,
        metavar="K",
        help="keep at most K rows of each unit (a uniformly random choice); the noise grows with "
        "K; 'auto' chooses K privately among 1, 2, 4, ..., 1024 with --unit-selection-share of "
        "epsilon (docs/privacy-unit.md)",
    )
    group.add_argument(
        "--unit-selection-share",
        default=None,
        type=float,
        metavar="S",
        help="with --max-rows-per-unit auto: the share of epsilon spent choosing K (default 0.1)",
    )
    group.add_argument(
        "--max-cells-per-unit",
        default=None,
        metavar="C",
        help="also keep at most C distinct cells of each unit (tighter: min(K, C*R) rows)",
    )
    group.add_argument(
        "--max-rows-per-cell",
        default=None,
        metavar="R",
        help="also keep at most R rows of a unit in one cell (Gaussian noise then uses the L2 "
        "bound sqrt of C cells of R)",
    )


def chooses_bound(args: argparse.Namespace) -> bool:
    """Whether ``--max-rows-per-unit auto`` leaves K to a private choice."""
    k = getattr(args, "max_rows_per_unit", None)
    return isinstance(k, str) and k.strip().lower() == "auto"


def privacy_unit_of(args: argparse.Namespace, name: str, cls: type[Mechanism]) -> PrivacyUnit:
    """The unit the flags name, checked (before the ledger is read): ``--privacy-unit`` and its
    bounds, or the spatial mechanisms' older ``--user-column``/``--max-points-per-user``."""
    from dpcube.privacy.unit import PrivacyUnit

    column = getattr(args, "privacy_unit", None)
    bounds = [
        getattr(args, "max_rows_per_unit", None),
        getattr(args, "max_cells_per_unit", None),
        getattr(args, "max_rows_per_cell", None),
    ]
    if getattr(args, "user_column", None):
        if column is not None or any(b is not None for b in bounds):
            raise UsageError(
                "--user-column/--max-points-per-user are the older names of --privacy-unit/"
                "--max-rows-per-unit; give one of the two"
            )
        if args.max_points_per_user is None:
            raise DataError(
                "--user-column needs --max-points-per-user C (the points kept per user)"
            )
        column, bounds[0] = args.user_column, args.max_points_per_user
    if chooses_bound(args):
        if not column:
            raise UsageError(
                "--max-rows-per-unit auto chooses the rows kept per unit: name the unit's "
                "column with --privacy-unit COLUMN"
            )
        if bounds[1] is not None or bounds[2] is not None:
            raise UsageError(
                "--max-rows-per-unit auto chooses K alone: give --max-cells-per-unit/"
                "--max-rows-per-cell with a whole-number K, or drop them"
            )
        if cls.unit_refusal:
            raise UsageError(f"--privacy-unit: --mechanism {name}: {cls.unit_refusal}")
        if INPUTS.get(name) not in ("histogram", "points", "cube"):
            raise UsageError(
                f"--max-rows-per-unit auto: --mechanism {name} counts its input otherwise than "
                "as a histogram or a data cube, which the private choice of K needs; give a "
                "whole-number K"
            )
        PrivacyUnit.parse(column, 1)  # the column, checked
        return PrivacyUnit()  # the mechanism is built for the row; the release binds K
    if getattr(args, "unit_selection_share", None) is not None:
        raise UsageError(
            "--unit-selection-share is the share of epsilon spent choosing K: it goes with "
            "--max-rows-per-unit auto"
        )
    unit = PrivacyUnit.parse(column, *bounds)
    if not unit.is_row and cls.unit_refusal:
        raise UsageError(f"--privacy-unit: --mechanism {name}: {cls.unit_refusal}")
    return unit


def add_flags(parser: argparse.ArgumentParser, *, with_domains: bool = False) -> None:
    """Add :data:`FLAGS` to ``dpcube release``'s parser.

    With ``with_domains`` (``--help`` and the generated reference) the mechanisms are imported
    and a flag that sets a declared parameter offers that parameter's choices and states its
    domain; otherwise no mechanism module is imported and the value is checked against the
    declared domain once the mechanism is chosen (:func:`mechanism_options`).
    """
    group = parser.add_argument_group(
        "mechanism-specific options (refused with a mechanism that does not use them)"
    )
    for spec in FLAGS:
        options = dict(spec.options)
        text = spec.help
        if with_domains and spec.param is not None:
            declared = _declared(spec)
            if declared is not None and declared.kind == "choice" and spec.convert is None:
                options.setdefault("choices", [c for c in declared.choices if c is not None])
            elif declared is not None and spec.with_meaning:
                text = f"{text}; {declared.meaning}"
        group.add_argument(spec.flag, dest=spec.dest, default=None, help=text, **options)


def _declared(spec: MechanismFlag) -> Any:
    """The :class:`ParamSpec` of ``spec.param`` of the first mechanism that takes the flag."""
    cls = registry.resolve(registry.MECHANISMS, spec.mechanisms[0], "mechanism")
    return cls.param_spec_map().get(spec.param)


def _takes_delta(cls: type[Mechanism]) -> bool:
    return "delta" in inspect.signature(cls.__init__).parameters


def refuse_foreign_flags(args: argparse.Namespace, name: str, cls: type[Mechanism]) -> None:
    """Refuse a mechanism-specific flag that ``--mechanism name`` does not use, and ``--delta``
    for a mechanism whose constructor has none (pure epsilon-DP), before anything is read."""
    for spec in FLAGS:
        if spec.given(args) and name not in spec.mechanisms:
            raise UsageError(
                f"{spec.flag}: --mechanism {name} does not use it (it is taken by "
                f"{spec.takers()}); drop it"
            )
    if args.delta and not _takes_delta(cls):
        raise BudgetError(
            f"--delta {args.delta:g}: the {name} mechanism is pure epsilon-DP (Laplace noise, "
            "no delta); drop --delta"
        )
    if args.max_points_per_user is not None and not args.user_column:
        raise UsageError(
            "--max-points-per-user bounds the points of each user named by --user-column; add "
            "--user-column COLUMN or drop it"
        )


def mechanism_options(
    args: argparse.Namespace, name: str, cls: type[Mechanism], params: dict[str, Any]
) -> dict[str, Any]:
    """``params`` (from ``--param``, already checked) with the values of the flags that set a
    constructor parameter, each checked against the parameter's declared domain (one line naming
    the flag on a value outside it). A parameter set both ways is refused."""
    options = dict(params)
    declared = cls.param_spec_map()
    for spec in FLAGS:
        if spec.param is None or name not in spec.mechanisms or not spec.given(args):
            continue
        if spec.param in params:
            raise UsageError(
                f"{spec.flag} and --param {spec.param} both set {name}'s {spec.param}; give one"
            )
        value = getattr(args, spec.dest)
        if spec.convert is not None:
            value = spec.convert(value)
        if spec.param in declared:
            value = declared[spec.param].check(name, value, flag=spec.flag)
        options[spec.param] = value
    return options


def build_mechanism(
    args: argparse.Namespace, name: str, cls: type[Mechanism], params: dict[str, Any]
) -> Mechanism:
    """The mechanism from the privacy flags, the mechanism-specific flags and ``--param``."""
    options = mechanism_options(args, name, cls, params)
    privacy: dict[str, Any] = {"epsilon": args.epsilon, "neighbour": args.neighbour}
    unit = privacy_unit_of(args, name, cls)
    if not unit.is_row:
        privacy["privacy_unit"] = unit
    if _takes_delta(cls):
        privacy["delta"] = args.delta
    try:
        return cls(**privacy, **options)
    except (TypeError, ValueError) as exc:
        accepted = ", ".join(cls.accepted_params()) or "none"
        raise DataError(
            f"--param: {name} refused its parameters ({exc}); accepted: {accepted}"
        ) from None


# -- counting the input ----------------------------------------------------------------------


def _histogram(
    args: argparse.Namespace, name: str, schema: Schema | None, dataset_identity: str
) -> Any:
    from dpcube.histogram import histogram
    from dpcube.registry import MECHANISMS, resolve

    if schema is None:
        raise SchemaError(f"--mechanism {name} needs --schema")
    unit = privacy_unit_of(args, name, resolve(MECHANISMS, name, "mechanism"))
    if chooses_bound(args):
        from dpcube.privacy.unit_choice import DEFAULT_SELECTION_SHARE

        share = args.unit_selection_share
        return histogram(
            args.data,
            schema,
            on_out_of_domain=args.on_out_of_domain,
            engine=args.engine,
            dataset=dataset_identity,
            show_values=args.show_values,
            privacy_unit=args.privacy_unit,
            max_rows_per_unit="auto",
            bounding_seed=args.seed,
            unit_selection_share=DEFAULT_SELECTION_SHARE if share is None else share,
        )
    return histogram(
        args.data,
        schema,
        on_out_of_domain=args.on_out_of_domain,
        engine=args.engine,
        dataset=dataset_identity,
        show_values=args.show_values,
        privacy_unit=unit.column,
        max_rows_per_unit=None if unit.is_row else unit.max_rows_per_unit,
        max_cells_per_unit=unit.max_cells_per_unit,
        max_rows_per_cell=unit.max_rows_per_cell,
        # a seeded release (not for publication) is reproducible, kept rows included
        bounding_seed=args.seed,
    )


def _cube(args: argparse.Namespace, name: str, schema: Schema | None, dataset_identity: str) -> Any:
    if schema is None:
        raise SchemaError(f"--mechanism {name} needs --schema")
    from dpcube.mechanisms.datacube.mechanism import CubeSource, cube_bound_candidates
    from dpcube.registry import MECHANISMS, resolve

    unit = privacy_unit_of(args, name, resolve(MECHANISMS, name, "mechanism"))
    if chooses_bound(args):
        from dpcube.privacy.unit_choice import DEFAULT_SELECTION_SHARE

        share = args.unit_selection_share
        return cube_bound_candidates(
            args.data,
            schema,
            args.privacy_unit,
            on_out_of_domain=args.on_out_of_domain,
            name=dataset_identity,
            show_values=args.show_values,
            engine=args.engine,
            bounding_seed=args.seed,
            selection_share=DEFAULT_SELECTION_SHARE if share is None else share,
        )
    return CubeSource(
        args.data,
        schema,
        on_out_of_domain=args.on_out_of_domain,
        name=dataset_identity,
        show_values=args.show_values,
        engine=args.engine,
        privacy_unit=unit,
        bounding_seed=args.seed,
    )


def _check_census_flags(args: argparse.Namespace) -> None:
    missing = [
        flag
        for flag, value in (
            ("--group-by", args.group_by),
            ("--region", args.region),
            ("--hierarchy", args.hierarchy),
            ("--max-size", args.max_size),
        )
        if value is None
    ]
    if missing:
        raise DataError(f"--mechanism census-hierarchy needs {' '.join(missing)}")
    if args.public_groups is not None and args.groups_are_public:
        raise DataError(
            "--public-groups and --groups-are-public both declare the number of groups; "
            "give one of them"
        )
    if args.public_groups is None and not args.groups_are_public:
        from dpcube.mechanisms.census.mechanism import MISSING_DECLARATION

        raise DataError(MISSING_DECLARATION)


def _census(
    args: argparse.Namespace, name: str, schema: Schema | None, dataset_identity: str
) -> Any:
    _check_census_flags(args)
    from dpcube.mechanisms.census.table import group_sizes

    table = group_sizes(
        args.data,
        unit=args.group_by,
        region=args.region,
        hierarchy=args.hierarchy,
        max_size=args.max_size,
        top_code=args.top_code,
        on_out_of_domain=args.on_out_of_domain,
        region_of_unit=args.region_of_unit,
        dataset=dataset_identity,
        show_values=args.show_values,
        engine=args.engine,
    )
    if args.public_groups is None:
        return table.declare_public_groups(True, how="--groups-are-public")
    return table.declare_public_groups(
        int(args.public_groups),
        how=f"--public-groups {args.public_groups}",
        show_values=args.show_values,
    )


#: How ``dpcube release`` counts each input (``--mechanism`` name -> a kind of input).
INPUTS: dict[str, str] = {
    "identity": "histogram",
    "matrix": "histogram",
    "dawa": "histogram",
    "privelet": "histogram",
    "privelet-plus": "histogram",
    "ahp": "histogram",
    "mwem": "histogram",
    "auto": "histogram",
    "datacube": "cube",
    "census-hierarchy": "census",
    **dict.fromkeys(SPATIAL, "points"),
}

_COUNTERS: dict[str, Callable[[argparse.Namespace, str, Any, str], Any]] = {
    "histogram": _histogram,
    "points": _histogram,
    "cube": _cube,
    "census": _census,
}


#: Mechanisms that choose their configuration from the schema alone: ``dpcube release`` has them
#: choose before any data is read or counted, so that a plan that fails costs no counting.
PLANS_FROM_SCHEMA = frozenset({"auto"})


def check_input_flags(args: argparse.Namespace, name: str) -> None:
    """Refuse, before the ledger is read, input flags that are missing or contradict."""
    if INPUTS[name] == "census":
        _check_census_flags(args)
    if INPUTS[name] == "points" and args.user_column and args.max_points_per_user is None:
        raise DataError("--user-column needs --max-points-per-user C (the points kept per user)")
    privacy_unit_of(args, name, registry.resolve(registry.MECHANISMS, name, "mechanism"))


def count_input(
    args: argparse.Namespace, name: str, schema: Schema | None, *, dataset_identity: str
) -> Any:
    """The input of ``--mechanism name``'s :meth:`release`, counted from ``args.data``;
    ``dataset_identity`` names the data set's budget ledger (so that the records are not
    fingerprinted a second time)."""
    return _COUNTERS[INPUTS[name]](args, name, schema, dataset_identity)


__all__ = [
    "FLAGS",
    "INPUTS",
    "PLANS_FROM_SCHEMA",
    "SPATIAL",
    "MechanismFlag",
    "add_flags",
    "add_unit_flags",
    "build_mechanism",
    "check_input_flags",
    "chooses_bound",
    "count_input",
    "privacy_unit_of",
    "refuse_foreign_flags",
]
