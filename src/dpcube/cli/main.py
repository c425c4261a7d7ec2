"""The ``dpcube`` command line.

Sub-commands: ``release``, ``query``, ``budget``, ``demo`` and those registered in
:data:`dpcube.registry.COMMANDS`. Errors print as one line (``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dpcube import progress, registry
from dpcube.cli import mechanism_flags
from dpcube.cli.params import bootstrap_runs, coerce_params, query_runs, refuse_unknown_params
from dpcube.errors import DPCubeError, QueryError, UsageError, library_error_line
from dpcube.query_text import parse_where

if TYPE_CHECKING:
    from dpcube.privacy.ledger import Charge, RequestedTotal


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_params(pairs: list[str]) -> dict[str, Any]:
    """``["k=v", ...]`` -> dict, values parsed as JSON where they parse (``3``, ``[1,2]``, ``true``).

    >>> parse_params(["levels=3", "strategy=lsa"])
    {'levels': 3, 'strategy': 'lsa'}
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise QueryError(f"--param expects key=value, got {pair!r}")
        out[key.strip().replace("-", "_")] = _parse_value(value.strip())
    return out


# -- release ----------------------------------------------------------------------------------


def _ledger(args: argparse.Namespace) -> tuple[Any, str]:
    """The ledger of the data set and its identity: named by ``--dataset``, else the fingerprint
    of the records (returned so that counting does not fingerprint the data a second time; it is
    never printed or released)."""
    from dpcube.privacy.accounting import identity_of_path, name_identity
    from dpcube.privacy.ledger import BudgetLedger

    if args.dataset:
        identity = name_identity(args.dataset)
    else:
        with progress.step("fingerprinting the data"):
            identity = identity_of_path(args.data)
    ledger = BudgetLedger.for_identity(identity, args.ledger_dir)
    if not args.dataset:
        ledger.source = str(args.data)
    return ledger, identity


def _refuse_out_in_budget_state(args: argparse.Namespace) -> None:
    """Refuse a release directory that is, holds or lies inside dpcube's budget state
    (``$DPCUBE_HOME``, ``--ledger-dir``): the ledgers are written there before the release."""
    from dpcube.privacy.ledger import _home

    out = Path(args.out).expanduser().resolve()
    for state in (_home(), Path(args.ledger_dir) if args.ledger_dir else None):
        if state is None:
            continue
        state = state.expanduser().resolve()
        if out == state or state in out.parents or out in state.parents:
            raise DPCubeError(
                f"--out {args.out!r} overlaps dpcube's budget ledgers in {str(state)!r}; "
                "write the release to a directory of its own"
            )


def _configure_engine(args: argparse.Namespace) -> None:
    """Pass ``--spark-master``/``--spark-conf`` to the Spark sessions, or refuse them on DuckDB."""
    master, conf = getattr(args, "spark_master", None), getattr(args, "spark_conf", None) or []
    if getattr(args, "engine", "duckdb") != "spark":
        given = [
            flag for flag, value in (("--spark-master", master), ("--spark-conf", conf)) if value
        ]
        if given:
            raise UsageError(
                f"{' and '.join(given)} configure the Spark engine, but the counting runs on "
                f"--engine {getattr(args, 'engine', 'duckdb')}; add --engine spark or drop them"
            )
        return
    from dpcube.engine.spark_engine import configure, parse_conf

    configure(master, parse_conf(conf))  # no --spark-master: spark-submit's, else local[*]


def cmd_release(args: argparse.Namespace) -> int:
    """Validate everything (output directory, parameters, data, plan), then charge, then release.

    Nothing that can be checked without the noise is checked after the ledger is charged.
    """
    from dpcube.release import curator
    from dpcube.release.base import check_output_directory
    from dpcube.release.marks import file_key
    from dpcube.release.uncertainty import MIN_RUNS
    from dpcube.schema import Schema

    if args.plan is not None:
        return cmd_publication(args)
    if args.mechanism is None:
        raise UsageError("dpcube release needs --mechanism NAME (or --plan FILE)")
    curator_log = curator.check_path(args.curator_log, args.out) if args.curator_log else None
    if args.bootstrap_runs is not None and not (
        args.bootstrap_runs == 0 or args.bootstrap_runs >= MIN_RUNS
    ):
        raise UsageError(
            f"--bootstrap-runs must be 0 (store none) or at least {MIN_RUNS}, got "
            f"{args.bootstrap_runs}"
        )
    cls = registry.resolve(registry.MECHANISMS, args.mechanism, "mechanism")
    mechanism_flags.refuse_foreign_flags(args, args.mechanism, cls)
    _refuse_out_in_budget_state(args)
    check_output_directory(args.out, args.overwrite)
    _probe_writable(args.out, "--out")
    if curator_log is not None:
        _probe_writable(curator_log, "--curator-log")
    schema = Schema.from_file(args.schema) if args.schema else None
    params = parse_params(args.param)
    refuse_unknown_params(cls, params)
    _configure_engine(args)
    params = coerce_params(cls, params)
    mechanism = mechanism_flags.build_mechanism(args, args.mechanism, cls, params)
    adaptive = bool(getattr(mechanism, "adaptive", False))
    if schema is not None and args.mechanism in mechanism_flags.PLANS_FROM_SCHEMA and not adaptive:
        cast(Any, mechanism).choose(schema)  # plan now, before any data is read or counted
    mechanism_flags.check_input_flags(args, args.mechanism)
    if args.integer:
        why = mechanism.integer_unavailable(schema)
        if why is not None:
            raise UsageError(f"--integer cannot apply to this release: {why} (nothing was charged)")
    # Printed once the release succeeded, so that a refused command stays one error line.
    note = (
        f"note: {args.mechanism} draws Laplace noise here (pure epsilon-DP): --delta "
        f"{args.delta} is neither claimed nor charged"
        if args.delta and mechanism.charged_delta is None
        else ""
    )
    requested = _requested_total(args)
    ledger, identity = _ledger(args)
    if requested is not None:
        ledger.check_requested_total(requested)  # early; charged under it in one transaction
    else:
        ledger.total()  # refuses a data set with no total budget, before the data is counted
    with progress.step("counting the data"):
        data = mechanism_flags.count_input(args, args.mechanism, schema, dataset_identity=identity)
    check_output_directory(args.out, args.overwrite)  # again, right before the charge
    _probe_writable(args.out, "--out")
    if curator_log is not None:
        _probe_writable(curator_log, "--curator-log")
    file_key()  # the key that marks the files the save writes: made (or refused) before the charge
    args.pending_before = _pending_files(args.out)
    try:
        with progress.step(f"releasing with {args.mechanism}"):
            release = mechanism.release(
                data, random_state=args.seed, ledger=ledger, requested_total=requested
            )
        if args.integer:
            with progress.step("making the tables whole and consistent (no budget spent)"):
                release = release.to_integer()
        bootstrap_note = _store_bootstrap(release, args.bootstrap_runs, args.seed)
        out = release.save(args.out, overwrite=args.overwrite)
    except (Exception, KeyboardInterrupt) as exc:
        charge = ledger.last_charge
        if charge is None:
            raise  # nothing was charged: the error is the usual one line
        print(f"error: {_charged_not_written(args, charge, exc)}", file=sys.stderr)
        if args.debug:
            raise
        return 130 if isinstance(exc, KeyboardInterrupt) else 2
    # The release is saved and charged: what follows must not lose it.
    report = None if args.no_report else _write_report(out, args.seed)
    summary = curator.summary(release.curator_log)
    if summary:
        print(summary, file=sys.stderr)
    if curator_log is not None:
        try:
            curator.write(curator_log, release.curator_log, release.metadata.release_id)
        except OSError as exc:
            print(
                f"error: the release is saved in {str(out)!r}, but the curator log "
                f"{str(curator_log)!r} was NOT written ({exc.strerror}); its figures are "
                "printed above",
                file=sys.stderr,
            )
            return 2
    if note:
        print(note, file=sys.stderr)
    if bootstrap_note:
        print(bootstrap_note, file=sys.stderr)
    left = ledger.remaining()
    used = release.metadata.mechanism
    chosen_bound = _chosen_bound(release.metadata.privacy_unit)
    if args.json:
        print(
            json.dumps(
                {
                    "release": str(out),
                    "release_id": release.metadata.release_id,
                    "mechanism": used,
                    "chosen_by_auto": used != args.mechanism,
                    "epsilon": args.epsilon,
                    "delta": mechanism.charged_delta,
                    "budget_left": {"epsilon": left.epsilon, "delta": left.delta},
                    "for_publication": release.metadata.for_publication,
                    "report": None if report is None else str(report),
                    **({"max_rows_per_unit_chosen": chosen_bound} if chosen_bound else {}),
                }
            )
        )
        return 0
    chosen = f"{used} (chosen by --mechanism auto)" if used != args.mechanism else used
    print(f"released {args.data} with {chosen} (epsilon={args.epsilon}) to {out}")
    if chosen_bound:
        dropped = chosen_bound["rows_dropped_share_noisy"]
        print(
            f"max rows per unit: K={chosen_bound['chosen_max_rows_per_unit']} chosen privately "
            f"with epsilon={chosen_bound['epsilon']:.6g} ({chosen_bound['share_of_epsilon']:.0%} "
            f"of {args.epsilon}); "
            + (
                f"noisy share of rows dropped: {dropped:.1%} (an estimate inside the guarantee)"
                if dropped is not None
                else "share of rows dropped not estimated: no size of unit was common enough "
                "to show through the noise (too few units for this epsilon; K=1, the least noise)"
            )
        )
    print(
        f"budget left for this data set: epsilon={left.epsilon:.6g}"
        + (f", delta={left.delta:.3g}" if left.delta else "")
    )
    if report is not None:
        print(f"report: {report}")
    if not release.metadata.for_publication:
        print("warning: seeded release, NOT FOR PUBLICATION (the noise is reproducible)")
    return 0


def _chosen_bound(unit: Any) -> dict[str, Any] | None:
    """The manifest's record of a privately chosen K (``--max-rows-per-unit auto``), or None."""
    chosen = unit.get("chosen_privately") if isinstance(unit, dict) else None
    return chosen if isinstance(chosen, dict) else None


#: ``dpcube release`` flags a publication (``--plan``) takes from its file, or has no use for.
_NOT_WITH_PLAN = (
    "mechanism",
    "schema",
    "param",
    "delta",
    "overwrite",
    "integer",
    "curator_log",
    "bootstrap_runs",
    "show_values",
    "spark_master",
    "spark_conf",
    "privacy_unit",
    "max_rows_per_unit",
    "max_cells_per_unit",
    "max_rows_per_cell",
)


def cmd_publication(args: argparse.Namespace) -> int:
    """``dpcube release DATA --plan FILE``: every table checked, one charge, one directory."""
    from dpcube.planning.publication import Publication, release_publication

    for dest in _NOT_WITH_PLAN:
        value = getattr(args, dest, None)
        if value not in (None, False, []):
            flag = "--" + dest.replace("_", "-")
            raise UsageError(
                f"{flag} does not apply with --plan: each table's mechanism, schema and "
                "parameters are in the publication file"
            )
    for spec in mechanism_flags.FLAGS:
        if spec.given(args):
            raise UsageError(
                f"{spec.flag} does not apply with --plan: give it as a field of the table in the "
                "publication file"
            )
    if args.on_out_of_domain != "error":
        raise UsageError(
            "--on-out-of-domain does not apply with --plan: give on_out_of_domain in each table "
            "of the publication file"
        )
    if args.engine != "duckdb":
        raise UsageError("--plan counts with the duckdb engine only; leave out --engine")
    publication = Publication.from_file(args.plan)
    _refuse_out_in_budget_state(args)
    _probe_writable(args.out, "--out")
    requested = _requested_total(args)
    ledger, identity = _ledger(args)
    if requested is not None:
        ledger.check_requested_total(requested)
    else:
        ledger.total()
    try:
        with progress.step("counting, planning and releasing the tables"):
            published = release_publication(
                publication,
                args.data,
                args.epsilon,
                args.out,
                ledger=ledger,
                dataset=identity,
                requested_total=requested,
                random_state=args.seed,
                report_writer=None if args.no_report else _publication_reports(args.out, args.seed),
            )
    except (Exception, KeyboardInterrupt) as exc:
        charge = ledger.last_charge
        if charge is None:
            raise  # nothing was charged: the error is the usual one line
        print(f"error: {_charged_not_written(args, charge, exc)}", file=sys.stderr)
        if args.debug:
            raise
        return 130 if isinstance(exc, KeyboardInterrupt) else 2
    if args.json:
        print(json.dumps(published.manifest))
        return 0
    print(
        f"released {args.data} as {len(published.releases)} tables (epsilon={args.epsilon}, "
        f"charged once) to {published.directory}"
    )
    for t in published.manifest["tables"]:
        print(f"  {t['name']}: {t['mechanism']}, epsilon {t['epsilon']:.4g} ({t['basis']})")
    left = ledger.remaining()
    print(f"budget left for this data set: epsilon={left.epsilon:.6g}")
    if args.seed is not None:
        print("warning: seeded publication, NOT FOR PUBLICATION (the noise is reproducible)")
    return 0


def _requested_total(args: argparse.Namespace) -> RequestedTotal | None:
    """The total budget ``--total-epsilon``/``--total-delta`` ask for, or None."""
    from dpcube.errors import BudgetError
    from dpcube.privacy.ledger import RequestedTotal, validate_privacy

    if args.total_epsilon is None:
        if args.total_delta is not None:
            raise UsageError(
                f"--total-delta {args.total_delta:g} sets the total budget together with "
                "--total-epsilon; add --total-epsilon, or set it with `dpcube budget DATA "
                "--set-total EPSILON --set-total-delta DELTA`"
            )
        return None
    try:
        validate_privacy(args.total_epsilon, args.total_delta)
    except BudgetError as exc:
        raise UsageError(f"--total-epsilon/--total-delta: {exc}") from None
    return RequestedTotal(args.total_epsilon, args.total_delta)


#: Bytes :func:`_probe_writable` writes: enough that a full file system refuses them.
_PROBE_BYTES = 1 << 16


def _probe_writable(target: str | Path, flag: str) -> None:
    """Refuse, before the charge, a directory (or the nearest existing directory above it, where
    it does not exist yet) in which a file cannot be written: create a probe file of dpcube's own
    name there (never an existing one), write :data:`_PROBE_BYTES` to it, sync and remove it."""
    import errno
    import os

    from dpcube.errors import ReleaseError
    from dpcube.files import TEMP_PREFIX

    where = Path(target).expanduser()
    while not where.is_dir() and where != where.parent:
        where = where.parent  # a file to be written (or replaced) lands in its directory
    probe = where / f"{TEMP_PREFIX}probe-{os.urandom(6).hex()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise ReleaseError(
            f"{flag} {str(target)!r}: cannot write into {str(where)!r} ({exc.strerror}); "
            "choose another location (nothing was charged)"
        ) from None
    try:
        os.write(fd, b"\0" * _PROBE_BYTES)
        os.fsync(fd)
    except OSError as exc:
        why = (
            "the file system is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror
        )
        raise ReleaseError(
            f"{flag} {str(target)!r}: cannot write into {str(where)!r} ({why}); free some space "
            "or choose another location (nothing was charged)"
        ) from None
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def _pending_files(out: str | Path) -> set[Path]:
    """The journals (``*.pending``) of unfinished saves in ``out``."""
    try:
        return {p for p in Path(out).iterdir() if p.name.endswith(".pending")}
    except OSError:
        return set()


def _charged_not_written(args: argparse.Namespace, charge: Charge, exc: BaseException) -> str:
    """One line for a failure after the charge: what was spent, that nothing was released, why,
    and where an unfinished save's journal lies."""
    cause = "interrupted" if isinstance(exc, KeyboardInterrupt) else library_error_line(exc)
    if cause is None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        cause = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    spent = f"epsilon={charge.epsilon:g}" + (f", delta={charge.delta:g}" if charge.delta else "")
    pending = sorted(
        str(p) for p in _pending_files(args.out) - getattr(args, "pending_before", set())
    )
    left = f"; the unfinished save left {', '.join(pending)}" if pending else ""
    return (
        f"{spent} WAS charged to the budget of {args.data!r} (release id {charge.release_id}), "
        f"but the release was NOT written to {args.out!r} ({cause}){left}; the budget is spent "
        "all the same: check `dpcube budget` before retrying"
    )


def _publication_reports(out: str, seed: int | None) -> Callable[[Path, dict[str, Any]], None]:
    """The writer :func:`~dpcube.planning.publication.release_publication` calls in its staging
    directory before the rename: each table's ``report.html``, then ``publication.html`` linking
    them. A report that fails is a warning, never a lost publication."""

    def write(staging: Path, manifest: dict[str, Any]) -> None:
        from dpcube.report.publication import write_publication_report

        linked = {
            t["name"]
            for t in manifest["tables"]
            if _write_report(staging / t["name"], seed, Path(out) / t["name"]) is not None
        }
        try:
            write_publication_report(staging, manifest, linked=linked)
        except (DPCubeError, OSError) as exc:
            print(
                f"warning: the publication is saved, but its HTML page was not written ({exc})",
                file=sys.stderr,
            )

    return write


def _write_report(out: Path, seed: int | None, shown: Path | None = None) -> Path | None:
    """The HTML report of the release just saved in ``out`` (``dpcube report``), from the saved
    release alone, with the replicates saved with it if any, else the fewest bootstrap replicates
    (``RELEASE_REPORT_RUNS``), and no bootstrap at all when those would take more than
    ``RELEASE_BOOTSTRAP_BUDGET_S`` CPU seconds (releasing stays quick; the report says so); a
    seeded release seeds its bootstrap too.
    The release is saved and charged by now: a failure here is a warning, never a lost release."""
    from dpcube.report import RELEASE_BOOTSTRAP_BUDGET_S, RELEASE_REPORT_RUNS, write_report

    try:
        with progress.step("writing the HTML report"):
            return write_report(
                out,
                seed=seed,
                default_runs=RELEASE_REPORT_RUNS,
                bootstrap_budget_s=RELEASE_BOOTSTRAP_BUDGET_S,
            )
    except (DPCubeError, OSError) as exc:
        print(
            f"warning: the release is saved, but its HTML report was not written ({exc}); "
            f"retry with `dpcube report {shown or out}`",
            file=sys.stderr,
        )
        return None


def _store_bootstrap(release: Any, runs: int | None, seed: int | None) -> str:
    """Store ``runs`` bootstrap replicates with a release whose error is a bootstrap (default
    :data:`~dpcube.release.uncertainty.RELEASE_RUNS`); a note for the user, or "". A seeded
    release seeds its replicates too, so that the whole release directory is reproducible.

    Runs after the charge, on the public release only: a failure here must not lose the release
    it has paid for, so it is reported as a note and the release is saved without replicates.
    """
    from dpcube.release.uncertainty import RELEASE_RUNS, store_bootstrap, uncertainty_kind

    kind, _ = uncertainty_kind(release)
    has_model = callable(getattr(release, "bootstrap_world", None)) and not getattr(
        release, "bootstrap_unavailable", None
    )
    if kind != "bootstrap" and not (kind in ("bound", "none") and has_model):
        if runs:
            return f"note: --bootstrap-runs has no effect: this release's error is {kind}"
        return ""
    runs = RELEASE_RUNS if runs is None else runs
    if runs == 0:
        return ""
    try:
        with progress.step(f"computing {runs} bootstrap replicates (no budget spent)"):
            store_bootstrap(release, runs, seed)
    except Exception as exc:  # the release is paid for: save it whatever happens here
        release.stored_replicates = None
        return (
            f"note: the bootstrap replicates could not be stored ({type(exc).__name__}: {exc}); "
            "queries will re-run the mechanism instead"
        )
    return ""


# -- query ------------------------------------------------------------------------------------


def _overlapping_query(release: Any, query: dict[str, Any]) -> dict[str, Any]:
    if release.schema is None:
        raise UsageError(
            f"--overlapping applies to releases with a schema; a {release.kind!r} release has "
            "none (its values are whole numbers)"
        )
    result: dict[str, Any] = release.schema.with_overlapping(query)
    return result


def cmd_query(args: argparse.Namespace) -> int:
    """One answer with its interval (or a table with ``--group-by``), never a bare number where
    the release has an error estimate."""
    from dpcube.cli.export import check_level, format_table
    from dpcube.query_text import split_names
    from dpcube.release.base import load_release, publication_warning
    from dpcube.release.formats import answer_json, precision_for, table_json

    level = check_level(args.level)
    release = load_release(args.release)
    query = parse_where(args.where)
    if args.overlapping:
        query = _overlapping_query(release, query)
    covered = release.schema.coverage(query) if args.overlapping and release.schema else {}
    if args.group_by is not None:
        from dpcube.release.tables import rows_from_cells

        names = split_names(args.group_by, "--group-by")
        labels, queries = release.table_cells(names, query)
        table = rows_from_cells(
            release,
            labels,
            queries,
            level=level,
            runs=args.runs,
            seed=args.bootstrap_seed,
            intervals=args.intervals,
        )
        if args.json:
            print(json.dumps({**table_json(table), "covered": covered}))
        else:
            print(format_table(table, precision_for(release, args.full_precision)))
    else:
        from dpcube.release.uncertainty import format_answer

        u = release.uncertainty(
            [query],
            level=level,
            runs=args.runs,
            seed=args.bootstrap_seed,
            intervals=args.intervals,
        )
        answer = float(u.answers[0])
        if args.json:
            result = answer_json(u, 0, level=level)
            if covered:
                result["covered"] = covered
            print(json.dumps(result))
        else:
            print(format_answer(answer, u, 0, precision_for(release, args.full_precision)))
    if args.runs is not None or args.bootstrap_seed is not None:
        from dpcube.release.uncertainty import uncertainty_kind

        kind, _ = uncertainty_kind(release)
        if args.intervals == "model" and kind in ("bound", "none"):
            kind = "bootstrap"  # the model-based interval is the bootstrap
        if kind != "bootstrap":  # a flag is never silently ignored
            print(
                f"note: --runs/--bootstrap-seed have no effect here: this release's error is "
                f"{kind}, not a bootstrap",
                file=sys.stderr,
            )
    if covered and not args.json:
        parts = ", ".join(f"{k}={v}" for k, v in covered.items())
        print(f"note: --overlapping: answered over the bins that cover {parts}", file=sys.stderr)
    warning = publication_warning(release.metadata)
    if warning:  # after the answer, so that a refused query stays one error line
        print(warning, file=sys.stderr)
    return 0


# -- budget -----------------------------------------------------------------------------------


def cmd_budget(args: argparse.Namespace) -> int:
    from rich.table import Table

    from dpcube.progress import stdout_console

    ledger, _ = _ledger(args)
    if args.set_total is not None:
        ledger.set_total(args.set_total, args.set_total_delta)
    elif args.set_total_delta is not None:
        raise UsageError(
            "--set-total-delta changes the total together with --set-total; add --set-total "
            "EPSILON (the current total epsilon to keep it)"
        )
    if not ledger.has_total():
        how = (
            f"set one with `dpcube budget {args.data} --set-total EPSILON` (or pass "
            "--total-epsilon to the first `dpcube release`)"
        )
        if args.json:
            none = {"epsilon": 0.0, "delta": 0.0}
            print(
                json.dumps(
                    {
                        "dataset": ledger.dataset,
                        "ledger": str(ledger.path),
                        "total": None,
                        "spent": none,
                        "remaining": None,
                        "releases": [],
                        "note": f"no total budget is set; {how}",
                    }
                )
            )
        else:
            print(f"no total budget is set for {args.data!r} and nothing is spent; {how}")
        return 0
    total, spent = ledger.total(), ledger.spent()
    left = ledger.remaining()
    charges = ledger.charges()
    if args.json:
        print(
            json.dumps(
                {
                    "dataset": ledger.dataset,
                    "ledger": str(ledger.path),
                    "total": {"epsilon": total.epsilon, "delta": total.delta},
                    "spent": {"epsilon": spent.epsilon, "delta": spent.delta},
                    "remaining": {"epsilon": left.epsilon, "delta": left.delta},
                    "releases": [c.__dict__ for c in charges],
                }
            )
        )
        return 0
    console = stdout_console()
    console.print(f"data set: {ledger.dataset}\nledger:   {ledger.path}")
    console.print(
        f"epsilon: spent {spent.epsilon:.6g} of {total.epsilon:.6g}, [bold]{left.epsilon:.6g} left[/bold]"
        + (f"; delta: spent {spent.delta:.3g} of {total.delta:.3g}" if total.delta else "")
    )
    if charges:
        table = Table("time (UTC)", "mechanism", "epsilon", "delta", "release id")
        import datetime as dt

        for c in charges:
            when = dt.datetime.fromtimestamp(c.time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
            table.add_row(when, c.mechanism, f"{c.epsilon:g}", f"{c.delta:g}", c.release_id)
        console.print(table)
    return 0


# -- demo -------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    from dpcube.demo.run import run_demo

    if args.rows < 1:
        raise UsageError(f"--rows must be a positive number of persons, got {args.rows}")
    return run_demo(rows=args.rows, out=Path(args.out), epsilon=args.epsilon, seed=args.seed)


# -- parser -----------------------------------------------------------------------------------


#: Every sub-command's one-line help, read without importing the module that builds it.
SUMMARIES: dict[str, str] = {
    "release": "release a data set under a mechanism",
    "query": "answer a query from a release",
    "budget": "show (or set) a data set's privacy budget",
    "demo": "generate a synthetic person table, release it and query it",
    "plan": "expected error of every mechanism on a workload, or the epsilon a target error "
    "needs (no data read, no budget spent)",
    "export": "write a release's labelled table (CSV or Parquet)",
    "audit": "statistical privacy audit of a mechanism on synthetic neighbouring data",
    "serve": "answer queries on releases over HTTP (read-only)",
    "report": "write a release's self-contained HTML report (figures with error bars)",
}


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command named in ``argv`` (the first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def _add_release(sub: Any, with_domains: bool = True) -> None:
    p = sub.add_parser("release", help=SUMMARIES["release"])
    p.add_argument("data", help="CSV/Parquet file or directory of Parquet files")
    p.add_argument("--schema", help="schema file (YAML or JSON)")
    p.add_argument(
        "--mechanism",
        default=None,
        choices=sorted(registry.MECHANISMS),
        help="the mechanism (required unless --plan)",
    )
    p.add_argument(
        "--plan",
        default=None,
        metavar="FILE",
        help="a publication file (YAML) listing several tables: release them all under --epsilon, "
        "split to minimise their weighted error and charged once, into --out as one directory",
    )
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--delta", type=float, default=None)
    p.add_argument("--neighbour", default="add_remove", choices=["add_remove", "replace"])
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="mechanism parameter"
    )
    p.add_argument(
        "--out", required=True, help="release directory (new, empty, or an earlier release)"
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace the earlier dpcube release in --out"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="seed the noise (the release is NOT for publication)"
    )
    p.add_argument("--on-out-of-domain", default="error", choices=["error", "drop", "clip"])
    p.add_argument(
        "--show-values",
        action="store_true",
        help="name the commonest out-of-domain values in the error (they are private data; "
        "by default only their counts are printed)",
    )
    p.add_argument(
        "--curator-log",
        default=None,
        metavar="FILE",
        help="write the exact input diagnostics (rows, dropped, clipped, users; NOT private) as "
        "JSON to FILE, which must lie outside --out",
    )
    p.add_argument(
        "--engine", default="duckdb", choices=["duckdb", "spark"], help="where the counting runs"
    )
    p.add_argument(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master for --engine spark (default: spark-submit's --master when run under "
        "spark-submit, else local[*]; e.g. spark://host:7077, yarn)",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark configuration for --engine spark, passed to the SparkSession builder "
        "(repeatable)",
    )
    p.add_argument(
        "--ledger-dir", default=None, help="where budget ledgers live (default ~/.dpcube/ledgers)"
    )
    p.add_argument(
        "--dataset",
        default=None,
        metavar="NAME",
        help="name the data set whose budget is charged (default: the fingerprint of its records)",
    )
    p.add_argument(
        "--total-epsilon",
        type=float,
        default=None,
        help="the data set's total budget: set with the first charge if none is recorded, "
        "else it must equal the recorded one",
    )
    p.add_argument(
        "--total-delta",
        type=float,
        default=None,
        help="with --total-epsilon: the data set's total delta (default 0 for a new total; must "
        "equal the recorded one otherwise)",
    )
    p.add_argument(
        "--bootstrap-runs",
        type=bootstrap_runs,
        default=None,
        metavar="N",
        help="for releases whose error is a bootstrap (spatial trees, census, non-linear cubes): "
        "store N replicates with the release so that queries answer without re-running the "
        "mechanism (default 100; 0 stores none; at most 5000; post-processing, no budget spent)",
    )
    p.add_argument(
        "--integer",
        action="store_true",
        help="publish non-negative whole numbers that stay consistent (every cuboid sums to its "
        "parents, every region to its children, every total to its parts): TopDown's "
        "non-negative fit and controlled rounding of the release (post-processing, no budget "
        "spent; the manifest records how)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--no-report",
        action="store_true",
        help="do not write the HTML report (REL/report.html; `dpcube report REL` writes it later)",
    )
    mechanism_flags.add_unit_flags(p)
    mechanism_flags.add_flags(p, with_domains=with_domains)
    p.set_defaults(func=cmd_release)


def _add_query(sub: Any) -> None:
    p = sub.add_parser("query", help=SUMMARIES["query"])
    p.add_argument("release", help="release directory")
    p.add_argument(
        "--where",
        default="",
        help='JSON, or "age=18..64, sex=F, occupation=Professional, loc=33.9..34.1:-118.3..-118.1"'
        " (values, inclusive; #3..5 names bins by number)",
    )
    p.add_argument(
        "--group-by",
        default=None,
        metavar="A,B",
        help="print a table: one row per combination of these attributes' bins (inside --where)",
    )
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the interval")
    p.add_argument(
        "--overlapping",
        action="store_true",
        help="answer value ranges off the bin edges with the bins they overlap (and say so)",
    )
    p.add_argument(
        "--runs",
        type=query_runs,
        default=None,
        help="bootstrap replicates for releases whose error is estimated by re-running the "
        "mechanism on the release (default: those stored with the release, else 200; at least "
        "20; a number other than the stored one re-runs the mechanism)",
    )
    p.add_argument(
        "--bootstrap-seed",
        type=int,
        default=None,
        help="seed the bootstrap replicates (the same interval on every call)",
    )
    p.add_argument(
        "--intervals",
        choices=("trusted", "model"),
        default="trusted",
        help="trusted (default): exact noise intervals, or bounds valid on any data where the "
        "release has them; model: the model-based bootstrap interval (narrower, NOT trusted: it "
        "holds only as far as the data resembles the bootstrap's world)",
    )
    p.add_argument(
        "--full-precision",
        action="store_true",
        help="print every digit of the answers (default: counts as whole numbers, each interval "
        "rounded outward; --json always carries every digit)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_query)


def _add_budget(sub: Any) -> None:
    p = sub.add_parser("budget", help=SUMMARIES["budget"])
    p.add_argument("data")
    p.add_argument("--set-total", type=float, default=None, metavar="EPSILON")
    p.add_argument(
        "--set-total-delta", type=float, default=None, metavar="DELTA", help="default: unchanged"
    )
    p.add_argument("--ledger-dir", default=None)
    p.add_argument("--dataset", default=None, metavar="NAME", help="the data set's name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_budget)


def _add_demo(sub: Any) -> None:
    p = sub.add_parser("demo", help=SUMMARIES["demo"])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--out", default="dpcube-demo")
    p.add_argument("--epsilon", type=float, default=0.5)
    p.add_argument(
        "--seed", type=int, default=2024, help="seed of the synthetic data (not of the noise)"
    )
    p.set_defaults(func=cmd_demo)


#: The sub-commands built here; the others are registered in :data:`dpcube.registry.COMMANDS`.
_BUILT_IN: dict[str, Any] = {
    "release": _add_release,
    "query": _add_query,
    "budget": _add_budget,
    "demo": _add_demo,
}


def build_parser(
    command: str | None = None, *, help_wanted: bool = False
) -> argparse.ArgumentParser:
    """The ``dpcube`` parser.

    With no ``command`` every sub-command is built in full (the generated reference, the fuzz
    tests). With one, only that sub-command is: the others are placeholders that carry their
    one-line help (:data:`SUMMARIES`), so that no module of a command not run is imported
    (``dpcube query`` and ``dpcube --version`` import no mechanism, planner or web framework).
    ``help_wanted``: ``release --help`` states the declared domains (it imports the mechanisms).
    """
    return _parser(command, everything=command is None, help_wanted=help_wanted)


def _parser(command: str | None, *, everything: bool, help_wanted: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dpcube", description="Differentially private counts.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"dpcube {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in (*_BUILT_IN, *sorted(registry.COMMANDS)):
        if not everything and name != command:
            sub.add_parser(name, help=SUMMARIES[name])
        elif name == "release":
            _add_release(sub, with_domains=everything or help_wanted)
        elif name in _BUILT_IN:
            _BUILT_IN[name](sub)
        else:
            registry.resolve(registry.COMMANDS, name, "command")(sub)
    return parser


def _version() -> str:
    from dpcube.version import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv
    try:
        help_wanted = "-h" in argv or "--help" in argv
        command = _command_of(argv)
        parser = _parser(command, everything=False, help_wanted=help_wanted)
        args = parser.parse_args(argv)
        progress.enable()
        code: int = args.func(args)
        return code
    except DPCubeError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout stopped early (``dpcube export ... | head``): not an error of
        # dpcube. Point stdout at /dev/null so that the interpreter's final flush stays quiet.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        # The last-resort boundary: a library's error on the user's input (DuckDB, Arrow, SQLite,
        # YAML, the file system) is one line; anything else is a bug, reported as one line too.
        if debug:
            raise
        line = library_error_line(exc)
        if line is not None:
            print(f"error: {line} (rerun with --debug for the traceback)", file=sys.stderr)
            return 2
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(
            f"error: internal error, please report: {type(exc).__name__}: {first} "
            "(rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
