"""``dpcube audit``: an empirical lower bound on the epsilon a mechanism spends.

``dpcube audit --mechanism NAME [--param KEY=VALUE ...] [--epsilon E]`` audits the configuration
one is about to publish with, on synthetic neighbouring inputs (the schema of the mechanism's first
conformance case), never on real data; ``dpcube audit --all`` audits every conformance case of
every registered mechanism. The method is in ``dpcube.audit``. Exit status: 1 when some
lower bound exceeds the claimed epsilon (a violation), 0 when none does, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dpcube import registry
from dpcube.errors import DataError, DPCubeError, UsageError
from dpcube.schema import Schema

#: Largest --schema (cells) an audit accepts: every release is repeated thousands of times.
_MAX_SCHEMA_CELLS = 1024


def register(subparsers: Any) -> None:
    """Add ``dpcube audit`` (registry.COMMANDS["audit"])."""
    p = subparsers.add_parser(
        "audit",
        help="statistical privacy audit of a mechanism on synthetic neighbouring data",
        description=__doc__.split("\n\n")[1].replace("``", "") if __doc__ else None,
    )
    p.add_argument(
        "--mechanism", choices=sorted(registry.MECHANISMS), help="the mechanism to audit"
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="every conformance case, as declared, of every registered mechanism (or of "
        "--mechanism)",
    )
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="mechanism parameter"
    )
    p.add_argument(
        "--sweep",
        action="store_true",
        help="with --mechanism: audit it at every value inside each parameter's declared domain "
        "that the declaration lists (bounds, a middle value, each choice), one parameter at a "
        "time; configurations the mechanism refuses are reported and skipped",
    )
    p.add_argument("--epsilon", type=float, default=None, help="claimed epsilon (default 1)")
    p.add_argument("--delta", type=float, default=None, help="delta (Gaussian noise)")
    p.add_argument(
        "--schema",
        default=None,
        help="audit on synthetic histograms of this schema (default: the mechanism's own tiny "
        "conformance schema); keep it small, every release is repeated thousands of times",
    )
    p.add_argument(
        "--neighbour",
        choices=("add_remove", "replace"),
        default=None,
        help="audit under this neighbour notion only (default: every one the mechanism supports)",
    )
    p.add_argument(
        "--max-rows-per-unit",
        default=None,
        metavar="K",
        help="audit unit-level privacy: neighbouring inputs differ in one unit of at most K rows "
        "(every extreme shape and random ones), released with that unit's sensitivities",
    )
    p.add_argument(
        "--max-cells-per-unit", default=None, metavar="C", help="with --max-rows-per-unit"
    )
    p.add_argument(
        "--max-rows-per-cell", default=None, metavar="R", help="with --max-rows-per-unit"
    )
    p.add_argument("--runs", type=int, default=1000, help="releases a side in the measurement half")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of each lower bound")
    p.add_argument("--seed", type=int, default=0, help="seed of the audit's noise streams")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=handler)


def _check(args: argparse.Namespace) -> None:
    if args.runs < 10:
        raise UsageError(f"--runs {args.runs}: at least 10 releases a side are needed")
    if not 0.5 <= args.confidence < 1:
        raise UsageError(f"--confidence {args.confidence}: use a value in [0.5, 1), e.g. 0.95")
    if not args.all and args.mechanism is None:
        raise UsageError("give --mechanism NAME (a configuration) or --all (the declared cases)")
    if args.all:
        given = [
            flag
            for flag, value in (
                ("--param", args.param),
                ("--epsilon", args.epsilon),
                ("--delta", args.delta),
                ("--neighbour", args.neighbour),
                ("--schema", args.schema),
                ("--sweep", args.sweep),
            )
            if value
        ]
        if given:
            raise UsageError(
                f"{given[0]} applies to --mechanism without --all (--all audits each "
                "mechanism's conformance cases as declared)"
            )


def handler(args: argparse.Namespace) -> int:
    from dpcube import audit as A
    from dpcube.cli.main import parse_params
    from dpcube.cli.params import coerce_params, refuse_unknown_params
    from dpcube.privacy.unit import PrivacyUnit

    _check(args)
    bounds = (args.max_rows_per_unit, args.max_cells_per_unit, args.max_rows_per_cell)
    # the synthetic inputs' unit column is nameless: any column bounded so is audited alike
    unit = PrivacyUnit.parse("unit" if any(b is not None for b in bounds) else None, *bounds)
    results: list[A.AuditResult] = []

    def emit(new: list[A.AuditResult]) -> None:
        results.extend(new)
        if not args.json:
            for r in new:
                print(r.line(), flush=True)

    if args.all:
        from dpcube.mechanisms.conformance import case_neighbours

        for name in [args.mechanism] if args.mechanism else sorted(registry.MECHANISMS):
            cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
            if not unit.is_row and cls.unit_refusal:
                print(f"skipped {name}: {cls.unit_refusal}", file=sys.stderr)
                continue
            for case in A.registered_cases(name):
                for neighbour in case_neighbours(case):
                    emit(
                        [
                            A.audit(
                                case,
                                neighbour,
                                runs=args.runs,
                                confidence=args.confidence,
                                seed=args.seed,
                                unit=unit,
                            )
                        ]
                    )
    else:
        cls = registry.resolve(registry.MECHANISMS, args.mechanism, "mechanism")
        params = parse_params(args.param)
        refuse_unknown_params(cls, params)
        params = coerce_params(cls, params)
        epsilon = 1.0 if args.epsilon is None else args.epsilon
        neighbours = [args.neighbour] if args.neighbour else None
        schema = Schema.from_file(args.schema) if args.schema else None
        if schema is not None and schema.size > _MAX_SCHEMA_CELLS:
            raise UsageError(
                f"--schema {args.schema}: {schema.size} cells; the audit repeats each release "
                f"thousands of times, use a schema of at most {_MAX_SCHEMA_CELLS} cells"
            )
        sweep = A.parameter_sweep(args.mechanism, params) if args.sweep else [params]
        for configuration in sweep:
            try:
                found = A.audit_configuration(
                    args.mechanism,
                    configuration,
                    epsilon,
                    delta=args.delta,
                    neighbours=neighbours,
                    schema=schema,
                    runs=args.runs,
                    confidence=args.confidence,
                    seed=args.seed,
                    unit=unit,
                )
            except DPCubeError as exc:
                if not args.sweep:
                    raise
                print(f"skipped {args.mechanism} {configuration}: {exc}", file=sys.stderr)
                continue
            except (TypeError, ValueError) as exc:
                accepted = ", ".join(cls.accepted_params()) or "none"
                raise DataError(
                    f"--param: {args.mechanism} refused its parameters ({exc}); accepted: {accepted}"
                ) from None
            emit(found)
        if not results:
            raise DataError(f"--sweep: {args.mechanism} refused every configuration")
    worst = max(results, key=lambda r: r.lower_bound - r.claimed)
    violation = any(r.violation for r in results)
    if args.json:
        print(
            json.dumps(
                {
                    "claimed": worst.claimed,
                    "lower_bound": worst.lower_bound,
                    "confidence": worst.confidence,
                    "violation": violation,
                    "audits": [r.to_dict() for r in results],
                },
                indent=2,
            )
        )
    else:
        verdict = "VIOLATION" if violation else "no violation found"
        print(
            f"{verdict}: largest lower bound {worst.lower_bound:.4g} at "
            f"{worst.confidence:.0%} confidence against claimed epsilon {worst.claimed:g} "
            f"({worst.case} [{worst.neighbour}])",
            file=sys.stdout,
        )
    return 1 if violation else 0
