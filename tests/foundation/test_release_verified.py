"""A save deletes only what it wrote, known by a keyed mark; a loaded release is verified whole:
every field of its manifest, its tables as regular files of the recorded size and hash, the
schema against the tables."""

from __future__ import annotations

import json
import os
import stat
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dpcube.release.base as release_base
from dpcube.errors import ReleaseError
from dpcube.histogram import Histogram
from dpcube.mechanisms.identity import Identity
from dpcube.release.base import MANIFEST, load_release
from dpcube.schema import Schema

SCHEMA = {
    "attributes": [
        {"name": "a", "kind": "ordinal", "range": [0, 5], "width": 1},
        {"name": "b", "kind": "nominal", "categories": ["x", "y", "z"]},
    ]
}


def small_release(seed: int = 1) -> Any:
    schema = Schema.from_dict(SCHEMA)
    counts = np.random.default_rng(seed).integers(0, 20, schema.shape)
    return Identity(1.0).release(Histogram(schema, counts), random_state=seed)


def read_manifest(d: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((d / MANIFEST).read_text())
    return manifest


def write_manifest(d: Path, manifest: dict[str, Any], *, reseal: bool = False) -> None:
    """Write an edited manifest; ``reseal``: recompute its integrity as a deliberate forger
    would (the hashes carry no key: only the checks against the tables can catch that)."""
    if reseal:
        manifest["integrity"] = release_base.manifest_integrity(manifest)
    (d / MANIFEST).write_text(json.dumps(manifest, indent=2))


def table_file(d: Path) -> Path:
    return d / next(iter(read_manifest(d)["tables"].values()))


# -- saving never deletes what it did not write -------------------------------------------------


def test_a_manifest_listing_a_users_file_as_a_table_never_gets_it_deleted(tmp_path: Path) -> None:
    d = small_release(1).save(tmp_path / "rel")
    thesis = d / "thesis.txt"
    thesis.write_text("four years of work")
    manifest = read_manifest(d)
    manifest["tables"]["notes"] = "thesis.txt"
    manifest["sha256"]["notes"] = release_base._sha256(thesis.read_bytes())
    marks = manifest.get("marks", {})
    marks["thesis.txt"] = next(iter(marks.values()), "0" * 64)  # a mark copied from a table
    manifest["marks"] = marks
    write_manifest(d, manifest, reseal=True)
    # The edited manifest is no longer dpcube's either: refused, naming it, and all kept.
    with pytest.raises(ReleaseError, match=r"not a dpcube release \('manifest\.json' and 1 more"):
        small_release(2).save(d, overwrite=True)
    assert thesis.read_text() == "four years of work"
    assert load_release_id(d) == manifest["metadata"]["release_id"]  # nothing else changed either


def load_release_id(d: Path) -> str:
    return str(read_manifest(d)["metadata"]["release_id"])


@pytest.mark.parametrize(
    "name", [".dpcube-tmp-notes", ".dpcube-tmp-draft.parquet", ".dpcube-tmp-0123.pending"]
)
def test_a_users_file_with_dpcubes_temporary_prefix_is_kept(tmp_path: Path, name: str) -> None:
    d = small_release(1).save(tmp_path / "rel")
    mine = d / name
    mine.write_text('["mine"]')
    with pytest.raises(ReleaseError, match=rf"\({name!r}\)".replace(".", r"\.")):
        small_release(2).save(d, overwrite=True)
    assert mine.read_text() == '["mine"]'


@pytest.mark.parametrize("form", ["list", "journal"])
def test_a_forged_journal_removes_nothing(tmp_path: Path, form: str) -> None:
    d = tmp_path / "rel"
    d.mkdir()
    token = "ab" * 16 if form == "journal" else "ab" * 6
    victim = d / f"cells-{token}.parquet"  # named exactly as a save names its tables
    victim.write_bytes(b"my data")
    journal = d / f"{release_base.TEMP_PREFIX}{token}.pending"
    if form == "list":  # a list of names, as journals were
        journal.write_text(json.dumps([victim.name]))
    else:  # dpcube's journal format, with a mark made up
        body = {"token": token, "tables": [victim.name], "replaces": {}}
        journal.write_text(json.dumps({"journal": body, "mark": "f" * 64}))
    with pytest.raises(ReleaseError, match=r"not a dpcube release"):
        small_release().save(d)
    assert victim.read_bytes() == b"my data" and journal.exists()


def test_a_table_replaced_by_a_users_file_is_not_deleted(tmp_path: Path) -> None:
    d = small_release(1).save(tmp_path / "rel")
    table = table_file(d)
    table.write_bytes(b"the user's own bytes under the table's name")
    with pytest.raises(ReleaseError, match=table.name.replace(".", r"\.")):
        small_release(2).save(d, overwrite=True)
    assert table.read_bytes() == b"the user's own bytes under the table's name"


def test_a_release_written_under_another_key_is_never_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = small_release(1).save(tmp_path / "rel")
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    monkeypatch.setenv("DPCUBE_HOME", str(tmp_path / "another-home"))
    with pytest.raises(ReleaseError, match=r"not a dpcube release .*DPCUBE_HOME"):
        small_release(2).save(d, overwrite=True)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_the_key_is_private_and_its_release_is_replaced(tmp_path: Path) -> None:
    d = small_release(1).save(tmp_path / "rel")
    from dpcube.release.marks import KEY_FILE

    key = Path(os.environ["DPCUBE_HOME"]) / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    second = small_release(2)
    second.save(d, overwrite=True)
    assert load_release(d).metadata.release_id == second.metadata.release_id
    assert sorted(p.suffix for p in d.iterdir()) == [".json", ".md", ".parquet"]


def test_leftovers_of_a_crash_after_the_commit_are_cleaned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = small_release(1).save(tmp_path / "rel")
    real_write = release_base.write_atomic

    def crash_on_report(path: Path, data: bytes, **kw: Any) -> None:
        if path.name == release_base.REPORT:
            raise KeyboardInterrupt
        real_write(path, data, **kw)

    monkeypatch.setattr(release_base, "write_atomic", crash_on_report)
    second = small_release(2)
    with pytest.raises(KeyboardInterrupt):
        second.save(d, overwrite=True)
    monkeypatch.setattr(release_base, "write_atomic", real_write)
    assert load_release(d).metadata.release_id == second.metadata.release_id  # committed
    third = small_release(3)
    third.save(d, overwrite=True)  # the earlier tables, the old report, the journal: all dpcube's
    assert load_release(d).metadata.release_id == third.metadata.release_id
    assert sorted(p.suffix for p in d.iterdir()) == [".json", ".md", ".parquet"]


# -- a release is verified whole when loaded ---------------------------------------------------


def test_removing_an_attribute_from_the_schema_is_refused(tmp_path: Path) -> None:
    d = small_release().save(tmp_path / "rel")
    manifest = read_manifest(d)
    manifest["schema"]["attributes"] = manifest["schema"]["attributes"][:1]
    write_manifest(d, manifest)
    with pytest.raises(ReleaseError, match=r"manifest\.json': field 'schema' does not match"):
        load_release(d)
    # Even with the integrity recomputed, the schema no longer fits the table's columns.
    write_manifest(d, manifest, reseal=True)
    with pytest.raises(ReleaseError, match=r"'cells' table has columns .* schema's axes"):
        load_release(d)


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("state", lambda m: m["state"]["variance_model"].update(cell_variance=0.01)),
        ("metadata", lambda m: m["metadata"].update(epsilon=100.0)),
        ("metadata", lambda m: m["metadata"]["params"].update(noise="gaussian")),
        ("sha256", lambda m: m["sha256"].update(cells="0" * 64)),
        ("sizes", lambda m: m["sizes"].update(cells=1)),
        ("kind", lambda m: m.update(kind="cuboids")),
        ("extra", lambda m: m.update(extra={"note": 1})),
        ("integrity", lambda m: m.pop("integrity")),
    ],
)
def test_every_field_of_the_manifest_is_covered(
    tmp_path: Path, field: str, edit: Callable[[dict[str, Any]], Any]
) -> None:
    d = small_release().save(tmp_path / "rel")
    manifest = read_manifest(d)
    if field == "state":
        assert "cell_variance" in manifest["state"]["variance_model"]
    edit(manifest)
    write_manifest(d, manifest)
    with pytest.raises(ReleaseError, match=rf"manifest\.json'.*'{field}'"):
        load_release(d)


def test_an_older_format_is_refused_with_how_to_recreate_it(tmp_path: Path) -> None:
    d = small_release().save(tmp_path / "rel")
    manifest = read_manifest(d)
    manifest["format_version"] = 2
    for key in ("integrity", "sizes", "marks"):
        del manifest[key]
    write_manifest(d, manifest)
    with pytest.raises(ReleaseError, match=r"format_version 2, .*re-create it with `dpcube rel"):
        load_release(d)


def run_with_rescue(fn: Callable[[], Any], fifo: Path, timeout: float = 20.0) -> Any:
    """Run ``fn`` in a thread; if it still blocks after ``timeout`` s (a regression: the FIFO
    was opened for reading), open the FIFO's other end so the reader sees end of file and the
    test fails instead of hanging."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    blocked = thread.is_alive()
    if blocked:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(timeout)
    assert not blocked, f"reading blocked on the FIFO {fifo}"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("which", ["table", "manifest"])
def test_a_fifo_in_place_of_a_file_is_refused_without_blocking(tmp_path: Path, which: str) -> None:
    d = small_release().save(tmp_path / "rel")
    target = table_file(d) if which == "table" else d / MANIFEST
    target.unlink()
    os.mkfifo(target)
    with pytest.raises(ReleaseError, match="not a regular file"):
        run_with_rescue(lambda: load_release(d), target)


def test_a_symlinked_table_is_refused(tmp_path: Path) -> None:
    d = small_release().save(tmp_path / "rel")
    table = table_file(d)
    copy = d / "copy.bin"
    copy.write_bytes(table.read_bytes())
    table.unlink()
    table.symlink_to(copy.name)  # inside the directory, same bytes: still not a regular file
    with pytest.raises(ReleaseError, match="symbolic link"):
        load_release(d)


def test_an_oversized_table_is_refused_before_it_is_read(tmp_path: Path) -> None:
    d = small_release().save(tmp_path / "rel")
    table = table_file(d)
    table.unlink()
    with table.open("wb") as f:
        f.truncate(256 << 20)  # sparse: 256 MiB of size, no data written
    tracemalloc.start()
    try:
        with pytest.raises(ReleaseError, match=r"268,435,456 bytes, not the .* recorded"):
            load_release(d)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak:,} bytes allocated: the table was read before its size check"


def test_a_users_page_with_dpcubes_report_tag_is_not_deleted(tmp_path: Path) -> None:
    d = small_release(1).save(tmp_path / "rel")
    page = d / release_base.REPORT_HTML
    text = f"<html><head>{release_base.REPORT_HTML_MARKER}</head><body>my edits</body></html>"
    page.write_text(text)  # dpcube's <meta> tag, but not a file dpcube wrote
    with pytest.raises(ReleaseError, match=r"not a dpcube release \('report\.html'"):
        small_release(2).save(d, overwrite=True)
    assert page.read_text() == text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_query_and_serve_refuse_a_fifo_table_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dpcube.cli.main import main

    d = small_release().save(tmp_path / "rel")
    target = table_file(d)
    target.unlink()
    os.mkfifo(target)
    code = run_with_rescue(lambda: main(["query", str(d), "--where", "a=0..2"]), target)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "not a regular file" in err
    served = pytest.importorskip("dpcube.serve.served")
    with pytest.raises(ReleaseError, match="not a regular file"):
        run_with_rescue(lambda: served.load_served([d], runs=None, seed=None), target)


def test_a_release_of_an_older_format_is_not_overwritten(tmp_path: Path) -> None:
    d = small_release(1).save(tmp_path / "rel")
    manifest = read_manifest(d)
    manifest["format_version"] = 2
    for key in ("integrity", "sizes", "marks"):
        del manifest[key]
    write_manifest(d, manifest)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    with pytest.raises(ReleaseError, match=r"earlier dpcube \(format_version 2\).*remove that"):
        small_release(2).save(d, overwrite=True)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_non_ascii_marks_and_hashes_are_refused_not_crashed(tmp_path: Path) -> None:
    d = small_release(1).save(tmp_path / "rel")
    manifest = read_manifest(d)
    manifest["marks"] = {name: "é" * 64 for name in manifest["marks"]}
    manifest["integrity"]["schema"] = "é"
    write_manifest(d, manifest)
    with pytest.raises(ReleaseError, match=r"not a dpcube release \('cells-"):
        small_release(2).save(d, overwrite=True)
    assert len(list(d.glob("*.parquet"))) == 1
    with pytest.raises(ReleaseError, match="field 'marks'"):
        load_release(d)
