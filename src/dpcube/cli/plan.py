"""``dpcube plan``: every mechanism's expected error on a workload, the recommended one and why;
with ``--target-error``, the epsilon each mechanism needs. Reads no data, spends no budget."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from dpcube.errors import DPCubeError, QueryError
from dpcube.schema import Schema

#: Epsilon at which a plan is built for the inverse question when ``--epsilon`` is not given
#: (every candidate's error is then re-evaluated at other epsilons; the choices do not depend on it).
REFERENCE_EPSILON = 1.0

WORKLOAD_HELP = (
    "allrange:1024, allrange:32x32, prefix:4096, marginals:2:8x8x8, random-range:10000:32x32, "
    "a JSON/CSV file of queries; with --schema also allrange, prefix, marginals:K and upto:K "
    "(every query on at most K attributes at a time); group-sizes for census group-size tables"
)


def grid_schema(dims: tuple[int, ...]) -> Schema:
    """A schema of ordinal axes ``x0, x1, ...`` (width 1) for a workload given without a schema.

    >>> grid_schema((4, 2)).shape
    (4, 2)
    """
    return Schema.from_dict(
        {
            "attributes": [
                {"name": f"x{i}", "kind": "ordinal", "range": [0, d - 1], "width": 1}
                for i, d in enumerate(dims)
            ]
        }
    )


def register(subparsers: Any) -> None:
    """Add ``dpcube plan`` (registry.COMMANDS["plan"])."""
    p = subparsers.add_parser(
        "plan",
        help="expected error of every mechanism on a workload, or the epsilon a target error "
        "needs (no data read, no budget spent)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("--workload", required=True, help=WORKLOAD_HELP)
    p.add_argument("--schema", default=None, help="schema file (its grid and attributes)")
    p.add_argument("--epsilon", type=float, default=None, help="the privacy budget of the release")
    p.add_argument(
        "--delta", type=float, default=None, help="with delta: Gaussian noise where supported"
    )
    p.add_argument("--neighbour", default="add_remove", choices=["add_remove", "replace"])
    p.add_argument(
        "--mechanisms", default=None, help="comma-separated registry names (default: all)"
    )
    p.add_argument("--strategies", default=None, help="comma-separated matrix strategies")
    p.add_argument(
        "--target-error",
        type=float,
        default=None,
        metavar="E",
        help="the inverse: the epsilon each mechanism needs for answers within +-E",
    )
    p.add_argument("--level", type=float, default=0.95, help="confidence of +-E (default 0.95)")
    p.add_argument(
        "--aggregate",
        default="max",
        choices=["max", "mean"],
        help="--target-error for every query (max) or for a query of the mean variance",
    )
    p.add_argument(
        "--privacy-unit",
        default=None,
        metavar="COLUMN",
        help="the unit the release will protect (as dpcube release; only named in the output)",
    )
    p.add_argument(
        "--max-rows-per-unit",
        default=None,
        metavar="K",
        help="plan a release protecting units of at most K rows: every error is at that unit's "
        "sensitivity (K rows per unit; with the next two, the tighter min(K, C*R) and the L2 "
        "figure for Gaussian noise); a comma-separated list (1,5,10,50) shows each mechanism's "
        "error at each K side by side, 'auto' at the candidates of --max-rows-per-unit auto",
    )
    p.add_argument(
        "--max-cells-per-unit", default=None, metavar="C", help="with --max-rows-per-unit"
    )
    p.add_argument(
        "--max-rows-per-cell", default=None, metavar="R", help="with --max-rows-per-unit"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=handler)


def _schema_and_workload(args: argparse.Namespace) -> tuple[Schema, Any]:
    from dpcube.planning.workload import GROUP_SIZES, resolve_planning_workload

    if args.schema:
        return Schema.from_file(args.schema), args.workload
    if args.workload.strip().lower() == GROUP_SIZES:
        return grid_schema((1,)), GROUP_SIZES
    w = resolve_planning_workload(args.workload, None)
    return grid_schema(w.dims), w


def _unit(args: argparse.Namespace) -> Any:
    """The unit to plan for: ``--max-rows-per-unit`` and its bounds (the column is optional here:
    the plan reads no data)."""
    from dpcube.privacy.unit import PrivacyUnit

    bounds = (args.max_rows_per_unit, args.max_cells_per_unit, args.max_rows_per_cell)
    if all(b is None for b in bounds):
        if args.privacy_unit:
            return PrivacyUnit.parse(args.privacy_unit)  # refused: no K
        return PrivacyUnit.parse(None)
    return PrivacyUnit.parse("-", *bounds).with_column(args.privacy_unit)


def _bounds_to_compare(args: argparse.Namespace) -> list[int] | None:
    """The K of ``--max-rows-per-unit 1,5,10,50`` (or ``auto``: its candidates), or None for one K."""
    from dpcube.privacy.unit import PrivacyUnit
    from dpcube.privacy.unit_choice import AUTO, candidates

    text = args.max_rows_per_unit
    if not isinstance(text, str):
        return None
    if text.strip().lower() == AUTO:
        ks = list(candidates())
    elif "," in text:
        ks = [PrivacyUnit.parse("-", k.strip()).max_rows_per_unit for k in text.split(",")]
    else:
        return None
    if args.target_error is not None:
        raise QueryError(
            "--target-error plans one unit: give one whole-number --max-rows-per-unit K"
        )
    if args.epsilon is None:
        raise QueryError("--max-rows-per-unit with several K: give --epsilon")
    return sorted(set(ks))


def _compare_bounds(args: argparse.Namespace, ks: list[int]) -> int:
    """Each mechanism's expected error at each K, side by side (nothing read, nothing spent)."""
    from dpcube.planning.plan import plan_mechanisms
    from dpcube.privacy.unit import PrivacyUnit

    try:
        schema, workload = _schema_and_workload(args)
        plans = {
            k: plan_mechanisms(
                schema,
                workload,
                args.epsilon,
                args.delta,
                mechanisms=args.mechanisms.split(",") if args.mechanisms else None,
                neighbour=args.neighbour,
                strategies=args.strategies.split(",") if args.strategies else None,
                privacy_unit=PrivacyUnit.parse(
                    "-", k, args.max_cells_per_unit, args.max_rows_per_cell
                ).with_column(args.privacy_unit),
            )
            for k in ks
        }
    except DPCubeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {"by_max_rows_per_unit": {str(k): p.to_dict() for k, p in plans.items()}}, indent=2
            )
        )
        return 0
    first = plans[ks[0]]
    print(
        f"workload {first.workload}: {first.queries:,} queries over {first.cells:,} cells; "
        f"neighbour {first.neighbour}; epsilon {args.epsilon:g}; nothing read, no budget spent"
    )
    print(
        "RMSE per query of the noise at each max rows per unit K (the rows a larger K keeps "
        "are not in it: the plan reads no data; a smaller K drops more rows of the larger units)"
    )
    print(f"  {'mechanism':30s}" + "".join(f" {'K=' + str(k):>10s}" for k in ks))
    for i, c in enumerate(first.candidates):
        if c.basis != "exact":
            continue
        cells = []
        for k in ks:
            other = plans[k].candidates[i]
            rmse = math.sqrt(other.expected_error / max(plans[k].queries, 1))
            cells.append(f" {rmse:10.4g}")
        print(f"  {c.label:30s}" + "".join(cells))
    return 0


def handler(args: argparse.Namespace) -> int:
    from dpcube.planning.inverse import epsilon_needs
    from dpcube.planning.plan import plan_mechanisms

    try:
        ks = _bounds_to_compare(args)
    except DPCubeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if ks is not None:
        return _compare_bounds(args, ks)
    try:
        if args.epsilon is None and args.target_error is None:
            raise QueryError("give --epsilon (the error at that budget) or --target-error E")
        unit = _unit(args)
        schema, workload = _schema_and_workload(args)
        epsilon = args.epsilon if args.epsilon is not None else REFERENCE_EPSILON
        plan = plan_mechanisms(
            schema,
            workload,
            epsilon,
            args.delta,
            mechanisms=args.mechanisms.split(",") if args.mechanisms else None,
            neighbour=args.neighbour,
            strategies=args.strategies.split(",") if args.strategies else None,
            privacy_unit=unit,
        )
        needs = (
            epsilon_needs(plan, args.target_error, args.level, args.aggregate)
            if args.target_error is not None
            else None
        )
    except DPCubeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out = plan.to_dict()
        if needs is not None:
            out["inverse"] = {
                "target_error": args.target_error,
                "level": args.level,
                "aggregate": args.aggregate,
                "needs": [n.to_dict() for n in needs],
            }
            if args.epsilon is None:
                out["epsilon"] = None
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"workload {plan.workload}: {plan.queries:,} queries over {plan.cells:,} cells; "
        f"neighbour {plan.neighbour}; nothing read, no budget spent"
    )
    if not plan.privacy_unit.is_row:
        print(
            f"privacy unit: {plan.privacy_unit.describe()}; histogram sensitivity L1 "
            f"{plan.privacy_unit.rows:g}, L2 {plan.privacy_unit.l2:.4g} (add/remove)"
        )
    if needs is not None:
        print(
            f"epsilon needed for +-{args.target_error:g} at {args.level:.0%} "
            f"({'every query' if args.aggregate == 'max' else 'a query of the mean variance'}"
            + (f", delta {args.delta:g}" if args.delta else "")
            + "):"
        )
        for n in needs:
            eps = f"{n.epsilon:>10.4g}" if n.epsilon is not None else f"{'-':>10s}"
            print(f"  {n.label:30s} {n.basis:15s} epsilon >= {eps}  {n.note}")
        return 0
    print(
        f"expected total squared error at epsilon {plan.epsilon:g}"
        + (f", delta {plan.delta:g}" if plan.delta else "")
        + " (RMSE = per query):"
    )
    if plan.matrix is not None:
        m = plan.matrix
        kind = "lower bound" if m.get("svdb_is_lower_bound") else "Gaussian lower bound, for scale"
        line = (
            f"matrix mechanism: svdb ({kind}) {m['svdb']:.6g}"
            if m.get("svdb") is not None
            else "matrix mechanism: svdb not computed (a box workload's Gram on this many cells)"
        )
        if "optimum" in m:
            o = m["optimum"]
            line += f"; Gaussian optimum {o['error']:.6g} (relative duality gap {o['gap']:.2e})"
        print(line + "; nominal errors and ratios: --json, key 'matrix'")
        if "noise_comparison" in m:
            nc = m["noise_comparison"]
            lose = "laplace" if nc["winner"] == "gaussian" else "gaussian"
            print(
                f"noise (Li & Miklau App. B.3, corrected): {nc['winner']} noise wins, "
                f"{nc['ratio']:.3g}x lower "
                f"error ({nc['winner']} {nc[nc['winner']]['error']:.6g} with "
                f"{nc[nc['winner']]['strategy']}, {lose} {nc[lose]['error']:.6g} with "
                f"{nc[lose]['strategy']} at the same epsilon)"
            )
    best = plan.recommended.expected_error
    for c in plan.candidates:
        if c.basis == "exact":
            rmse = math.sqrt(c.expected_error / max(plan.queries, 1))
            ratio = c.expected_error / best if best > 0 else float("nan")
            figure = f"{c.expected_error:12.5g}  RMSE {rmse:10.4g}  x{ratio:<7.3g}"
        else:
            figure = f"{'-':>12s}  {'':15s}  {'':8s}"
        mark = "  <- recommended" if c is plan.recommended else ""
        print(f"  {c.label:30s} {c.basis:15s} {figure} {c.note}{mark}")
    print(f"recommended: {plan.recommended.label}. {plan.reason}")
    return 0


__all__ = ["REFERENCE_EPSILON", "grid_schema", "handler", "register"]
