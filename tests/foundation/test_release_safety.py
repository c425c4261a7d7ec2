"""Saving never destroys what it did not write; everything that does
not depend on the noise is checked before the ledger is charged; releases are verified on load."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpcube.release.base as release_base
from dpcube import registry
from dpcube.errors import DPCubeError, ReleaseError, ResourceError
from dpcube.histogram import Histogram
from dpcube.mechanisms.conformance import tiny_histograms
from dpcube.mechanisms.identity import Identity
from dpcube.privacy.ledger import BudgetLedger
from dpcube.release.base import MANIFEST, ReleaseMetadata, load_release
from dpcube.schema import Schema


def small_release(seed: int = 1) -> Any:
    schema = Schema.from_dict(
        {"attributes": [{"name": "a", "kind": "ordinal", "range": [0, 5], "width": 1}]}
    )
    counts = np.random.default_rng(seed).integers(0, 20, schema.shape)
    return Identity(1.0).release(Histogram(schema, counts), random_state=seed)


# -- 2. saving never destroys what it did not write ---------------------------------------------


def test_save_into_a_data_folder_refuses_and_deletes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "people.parquet"
    source.write_bytes(b"the data")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(ReleaseError, match=r"not a dpcube release \('notes.txt'"):
        small_release().save(tmp_path)
    assert source.read_bytes() == b"the data"
    assert notes.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "people.parquet"]


def test_overwriting_an_earlier_release_needs_overwrite(tmp_path: Path) -> None:
    d = tmp_path / "rel"
    first = small_release(1)
    first.save(d)
    with pytest.raises(ReleaseError, match="already holds a dpcube release; pass --overwrite"):
        small_release(2).save(d)
    assert load_release(d).metadata.release_id == first.metadata.release_id
    second = small_release(2)
    second.save(d, overwrite=True)
    assert load_release(d).metadata.release_id == second.metadata.release_id
    assert len(list(d.glob("*.parquet"))) == 1


def test_overwrite_removes_only_files_the_manifest_owns(tmp_path: Path) -> None:
    d = tmp_path / "rel"
    small_release(1).save(d)
    (d / "other.parquet").write_bytes(b"not ours")
    with pytest.raises(ReleaseError, match=r"other\.parquet"):
        small_release(2).save(d, overwrite=True)
    assert (d / "other.parquet").read_bytes() == b"not ours"


def test_a_file_as_out_and_an_uncreatable_out_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ReleaseError, match="is a file, not a directory"):
        release_base.check_output_directory(f)
    with pytest.raises(ReleaseError, match="cannot be created"):
        release_base.check_output_directory(f / "sub")
    assert release_base.check_output_directory(tmp_path / "new" / "deeper") == set()
    assert not (tmp_path / "new").exists()  # checking writes nothing


def test_a_read_only_out_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    if os.geteuid() == 0:
        # root may write into a 0500 directory; answer os.access as the kernel answers any
        # other user, so the check is exercised on every machine (CI runs as root).
        real_access = os.access

        def access(path: str | os.PathLike[str], mode: int) -> bool:
            if Path(path) == d and mode & os.W_OK:
                return False
            return real_access(path, mode)

        monkeypatch.setattr(release_base.os, "access", access)
    try:
        with pytest.raises(ReleaseError, match="not writable"):
            release_base.check_output_directory(d)
    finally:
        d.chmod(0o700)


def test_leftovers_of_an_interrupted_save_are_removed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "rel"
    real_write = release_base.write_atomic

    def crash_on_manifest(path: Path, data: bytes, **kw: Any) -> None:
        if path.name == MANIFEST:
            raise KeyboardInterrupt
        real_write(path, data, **kw)

    monkeypatch.setattr(release_base, "write_atomic", crash_on_manifest)
    with pytest.raises(KeyboardInterrupt):
        small_release(1).save(d)
    monkeypatch.setattr(release_base, "write_atomic", real_write)  # DPCUBE_HOME stays
    assert any(
        p.name.startswith(release_base.TEMP_PREFIX) for p in d.iterdir()
    )  # the pending journal
    release_base.check_output_directory(d)  # dpcube's own leftovers are not foreign files
    # A user's file that merely carries the temporary prefix is not dpcube's: refused, kept.
    stray = d / f"{release_base.TEMP_PREFIX}stray.parquet"
    stray.write_bytes(b"half written")
    with pytest.raises(ReleaseError, match=r"\.dpcube-tmp-stray\.parquet"):
        small_release(2).save(d)
    assert stray.read_bytes() == b"half written"
    stray.unlink()
    small_release(2).save(d)
    names = sorted(p.name for p in d.iterdir())
    assert not [n for n in names if n.startswith(release_base.TEMP_PREFIX)]
    assert len([n for n in names if n.endswith(".parquet")]) == 1
    load_release(d)


def test_files_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        d = small_release().save(tmp_path / "rel")
    finally:
        os.umask(old)
    for p in d.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644, p.name


# -- 5. releases are verified when loaded ----------------------------------------------------


def edit_manifest(d: Path, **changes: Any) -> None:
    manifest = json.loads((d / MANIFEST).read_text())
    manifest.update(changes)
    (d / MANIFEST).write_text(json.dumps(manifest))


def test_manifest_records_version_and_hashes(tmp_path: Path) -> None:
    d = small_release().save(tmp_path / "rel")
    manifest = json.loads((d / MANIFEST).read_text())
    assert manifest["format_version"] == release_base.FORMAT_VERSION
    assert set(manifest["sha256"]) == set(manifest["tables"])


@pytest.mark.parametrize("version", [99, 1, None])
def test_unknown_format_version_is_refused(tmp_path: Path, version: Any) -> None:
    d = small_release().save(tmp_path / "rel")
    edit_manifest(d, format_version=version)
    with pytest.raises(ReleaseError, match=f"format_version {version!r}"):
        load_release(d)


@pytest.mark.parametrize("where", ["../other/x.parquet", "/etc/passwd", "sub/x.parquet", ".."])
def test_tables_outside_the_directory_are_refused(tmp_path: Path, where: str) -> None:
    d = small_release().save(tmp_path / "rel")
    manifest = json.loads((d / MANIFEST).read_text())
    name = next(iter(manifest["tables"]))
    edit_manifest(d, tables={name: where})
    with pytest.raises(ReleaseError, match="not a plain file name inside the release directory"):
        load_release(d)


def test_a_symlink_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    d = small_release().save(tmp_path / "rel")
    (tmp_path / "elsewhere.parquet").write_bytes(b"x")
    (d / "link.parquet").symlink_to(tmp_path / "elsewhere.parquet")
    manifest = json.loads((d / MANIFEST).read_text())
    edit_manifest(d, tables={next(iter(manifest["tables"])): "link.parquet"})
    with pytest.raises(ReleaseError, match="resolves outside the release directory"):
        load_release(d)


def test_edited_counts_are_detected(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    d = small_release().save(tmp_path / "rel")
    manifest = json.loads((d / MANIFEST).read_text())
    fname = next(iter(manifest["tables"].values()))
    table = pq.read_table(d / fname)
    column = table.column_names[-1]
    edited = table.set_column(
        table.column_names.index(column), column, [np.asarray(table[column]) + 1000]
    )
    pq.write_table(edited, d / fname)
    with pytest.raises(ReleaseError, match=f"{fname}.*does not match the SHA-256"):
        load_release(d)


def test_publication_warning_names_the_reason() -> None:
    def meta(**kw: Any) -> ReleaseMetadata:
        return ReleaseMetadata("t", {}, 1.0, None, "add_remove", **kw)

    assert release_base.publication_warning(meta()) is None
    seeded = release_base.publication_warning(meta(seeded=True))
    assert seeded is not None and "NOT FOR PUBLICATION" in seeded and "seeded" in seeded
    noiseless = release_base.publication_warning(meta(noiseless=True))
    assert noiseless is not None and "noise switched off" in noiseless


# -- 3. validate everything, then charge, then draw noise ----------------------------------------


def ledger_at(tmp_path: Path, name: str) -> BudgetLedger:
    ledger = BudgetLedger(tmp_path / f"{name}.ledger")
    ledger.set_total(100.0, 0.5)
    return ledger


def case_input(cls: Any) -> tuple[Any, dict[str, Any], Any]:
    case = cls.conformance_cases()[0]
    params = case.make(cls.neighbours[0].value).get_params()
    return case, params, case.prepare(tiny_histograms(case.schema)[2])


@pytest.mark.parametrize("name", sorted(registry.MECHANISMS))
def test_an_epsilon_too_small_for_the_samplers_costs_nothing(tmp_path: Path, name: str) -> None:
    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    _, params, data = case_input(cls)
    ledger = ledger_at(tmp_path, name)
    for epsilon in (1e-300, 1e-17):
        try:
            mechanism = cls(**{**params, "epsilon": epsilon})
        except DPCubeError:
            continue  # refused by the constructor: nothing to charge
        with pytest.raises(DPCubeError, match="epsilon"):
            mechanism.release(data, random_state=1, ledger=ledger)
        assert ledger.spent().epsilon == 0, epsilon
        assert ledger.charges() == []


#: Parameters inside their declared domains that only the data (schema) or the other
#: parameters refuse: still before the charge.
LATE_BAD_PARAMS: dict[str, dict[str, Any]] = {
    "htf": {"eps_level": 2.0},
    "privelet-plus": {"plain_attributes": ["no_such_attribute"]},
    "datacube": {"publish": "no_such_attribute"},
}


def test_htf_budget_left_for_the_data_is_checked_before_the_charge(tmp_path: Path) -> None:
    cls = registry.resolve(registry.MECHANISMS, "htf", "mechanism")
    _, params, data = case_input(cls)
    ledger = ledger_at(tmp_path, "htf")
    with pytest.raises(DPCubeError, match="leaves no data budget"):
        cls(**{**params, "height": 4, "eps_level": 0.5}).release(data, ledger=ledger)
    assert ledger.charges() == []


@pytest.mark.parametrize("name", sorted(LATE_BAD_PARAMS))
def test_a_parameter_rejected_against_the_data_costs_nothing(tmp_path: Path, name: str) -> None:
    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    _, params, data = case_input(cls)
    ledger = ledger_at(tmp_path, name)
    mechanism = cls(**{**params, **LATE_BAD_PARAMS[name]})
    with pytest.raises(DPCubeError):
        mechanism.release(data, random_state=1, ledger=ledger)
    assert ledger.charges() == []


@pytest.mark.parametrize("name", sorted(registry.MECHANISMS))
def test_unknown_params_are_refused_naming_the_accepted(name: str) -> None:
    from dpcube.cli.params import refuse_unknown_params

    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    with pytest.raises(DPCubeError, match=r"--param no_such_thing: .* \(accepted: "):
        refuse_unknown_params(cls, {"no_such_thing": 1})
    with pytest.raises(DPCubeError, match="use --epsilon"):
        refuse_unknown_params(cls, {"epsilon": 1})
    refuse_unknown_params(cls, {p: None for p in cls.accepted_params()})


def test_a_journal_never_removes_a_file_a_save_did_not_name(tmp_path: Path) -> None:
    d = tmp_path / "rel"
    d.mkdir()
    (d / "people.csv").write_text("data")
    forged = d / f"{release_base.TEMP_PREFIX}x.pending"
    forged.write_text(json.dumps(["people.csv"]))
    with pytest.raises(ReleaseError, match=r"\.dpcube-tmp-x\.pending' and 1 more"):
        small_release().save(d)
    assert (d / "people.csv").read_text() == "data"
    assert forged.exists()  # a journal without dpcube's mark is not dpcube's: kept
    (tmp_path / "outside.parquet").write_text("data")
    (d / "people.csv").unlink()
    forged.write_text(json.dumps(["../outside.parquet"]))
    with pytest.raises(ReleaseError, match=r"\.dpcube-tmp-x\.pending'\)"):
        small_release().save(d)
    assert (tmp_path / "outside.parquet").read_text() == "data"
    assert forged.exists()


def test_accepted_params_are_the_constructor_arguments_only() -> None:
    from dpcube import registry

    for name in registry.MECHANISMS:
        cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
        accepted = cls.accepted_params()
        assert "self" not in accepted and "epsilon" not in accepted, (name, accepted)


# -- resources are bounded before the charge -----------------------------------------------------


@pytest.mark.parametrize("name", sorted(registry.MECHANISMS))
def test_a_release_beyond_the_available_memory_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    import dpcube.mechanisms.base as mechanisms_base

    monkeypatch.setattr(mechanisms_base, "available_memory", lambda: 1 << 20)
    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    _, params, data = case_input(cls)
    ledger = ledger_at(tmp_path, name)
    with pytest.raises(ResourceError, match=r"needs about .* GiB of memory .* is available"):
        cls(**params).release(data, random_state=1, ledger=ledger)
    assert ledger.charges() == []


def _grid_schema(name: str, side: int) -> Schema:
    from dpcube.mechanisms.spatial._common import spatial_case_schema

    if name in SPATIAL:
        return spatial_case_schema(side, side)
    return Schema.from_dict(
        {
            "attributes": [
                {"name": "x", "kind": "ordinal", "range": [0, side - 1], "width": 1},
                {"name": "y", "kind": "ordinal", "range": [0, side - 1], "width": 1},
            ]
        }
    )


SPATIAL = ("htf", "ug", "ag", "quadtree", "kdtree", "privtree", "uniform", "singular")
MEASURED = (*SPATIAL, "identity", "privelet", "privelet-plus", "datacube", "matrix")


@pytest.mark.parametrize("name", MEASURED)
def test_the_memory_estimate_covers_the_measured_peak(name: str) -> None:
    """The peak a release allocates (tracemalloc sees numpy's buffers) on a 256 x 256 domain is
    within the estimate checked before the charge (the estimate also adds 64 MiB a release)."""
    import tracemalloc

    schema = _grid_schema(name, 256)
    counts = np.random.default_rng(0).poisson(3, size=schema.shape)
    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    mechanism = cls(1.0, strategy="identity") if name == "matrix" else cls(1.0)
    data = Histogram(schema, counts)
    tracemalloc.start()
    try:
        mechanism.release(data, random_state=1, account=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    cells = mechanism.materialised_cells(data)
    assert peak <= mechanism.bytes_per_cell * cells, (name, peak / cells)


def test_a_failure_after_the_charge_says_the_budget_was_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpcube.errors import SpentBudgetError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("out of memory\nsecond line")

    monkeypatch.setattr(Identity, "_release", broken)
    _, params, data = case_input(Identity)
    ledger = ledger_at(tmp_path, "identity")
    with pytest.raises(SpentBudgetError) as failure:
        Identity(**params).release(data, random_state=1, ledger=ledger)
    line = str(failure.value)
    assert "\n" not in line
    assert "failed after its budget was charged (epsilon=1)" in line
    assert "nothing was released or written: MemoryError: out of memory" in line
    assert len(ledger.charges()) == 1


@pytest.mark.parametrize("name", sorted(registry.MECHANISMS))
def test_an_unknown_keyword_is_one_line_naming_the_parameters(name: str) -> None:
    from dpcube.errors import ParameterError

    cls = registry.resolve(registry.MECHANISMS, name, "mechanism")
    with pytest.raises(ParameterError) as refused:
        cls(1.0, no_such_thing=1)
    line = str(refused.value)
    assert line.startswith(f"{name}: ") and "'no_such_thing'" in line and "\n" not in line
    assert line.endswith("parameters: " + (", ".join(cls.accepted_params()) or "none"))


def test_a_cells_table_giving_a_cell_twice_is_refused() -> None:
    import pyarrow as pa

    from dpcube.release.cells import check_cells_table

    schema = Schema.from_dict(
        {"attributes": [{"name": "x", "kind": "ordinal", "range": [0, 3], "width": 1}]}
    )
    check_cells_table(schema, pa.table({"x": [3, 1, 2, 0], "count": [1.0, 2.0, 3.0, 4.0]}))
    with pytest.raises(ReleaseError, match="gives a cell twice"):
        check_cells_table(schema, pa.table({"x": [0, 1, 1, 3], "count": [1.0, 2.0, 3.0, 4.0]}))
