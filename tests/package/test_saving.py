"""anekit.package.saving: one atomic save path and one I/O widths key, for single-function
packages (``CompiledProgram.save``) and multifunction ones (``save_functions``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit._coremltools import ct
from anekit._mlpackage import read_spec
from anekit.errors import ProgramError
from anekit.package import save_functions
from anekit.package.saving import (
    IO_WIDTHS_KEY,
    LEGACY_IO_WIDTHS_KEY,
    read_io_widths,
    record_io_widths,
    save_package,
)

X = np.zeros((4, 64), np.float16)


def _tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (relative name -> bytes)."""
    return {
        str(item.relative_to(path)): item.read_bytes()
        for item in sorted(path.rglob("*"))
        if item.is_file()
    }


def _metadata(path: Path) -> dict[str, str]:
    spec, _ = read_spec(path)
    return dict(spec.description.metadata.userDefined)


def _checked_save_path(save_path: str) -> Path:
    """What coremltools 9.0's ``MLModel.save`` (coremltools/models/model.py) takes for an
    ML program: a path whose extension is ``.mlpackage`` (none: it appends one; any other
    raises)."""
    if not isinstance(save_path, str):
        raise TypeError(f"save_path is a str, got {type(save_path).__name__}")
    suffix = Path(save_path).suffix
    if not suffix:
        save_path += ".mlpackage"
    elif suffix != ".mlpackage":
        raise Exception(f"For an ML Program, extension must be .mlpackage (not {suffix}).")
    return Path(save_path)


class FolderModel:
    """Saves like an ML program's ``MLModel``: a directory of files; ``fail`` makes the
    save raise after writing part of it."""

    def __init__(self, content: str, fail: bool = False) -> None:
        self.content = content
        self.fail = fail

    def save(self, save_path: str) -> None:
        folder = _checked_save_path(save_path)
        folder.mkdir()
        (folder / "Manifest.json").write_text(self.content)
        if self.fail:
            (folder / "Data").mkdir()
            (folder / "Data" / "weight.bin").write_bytes(b"half a weight")
            raise RuntimeError("disk full")


@pytest.fixture(scope="module")
def narrow() -> anekit.CompiledProgram:
    program = anekit.compile(lambda x: x[:, :8] * 2, X)
    assert program.io_widths == {"output": 8}
    return program


def _crash_coremltools_save(monkeypatch: pytest.MonkeyPatch) -> None:
    """coremltools' ``MLModel.save`` writes part of the package, then fails."""

    def save(self: Any, save_path: str) -> None:
        folder = _checked_save_path(save_path)
        folder.mkdir(parents=True)
        (folder / "Manifest.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(ct.models.MLModel, "save", save)


# -- the one save path ------------------------------------------------------------------


def test_a_save_replaces_the_package_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "m.mlpackage"
    assert save_package(FolderModel("first"), target) == target
    assert _tree(target) == {"Manifest.json": b"first"}
    save_package(FolderModel("second"), target)
    assert _tree(target) == {"Manifest.json": b"second"}
    assert [item.name for item in target.parent.iterdir()] == ["m.mlpackage"]


def test_a_failed_save_keeps_the_previous_package_and_no_temporary_folder(tmp_path: Path) -> None:
    target = save_package(FolderModel("first"), tmp_path / "m.mlpackage")
    with pytest.raises(RuntimeError, match="disk full"):
        save_package(FolderModel("second", fail=True), target)
    assert _tree(target) == {"Manifest.json": b"first"}
    assert [item.name for item in tmp_path.iterdir()] == ["m.mlpackage"]
    with pytest.raises(RuntimeError, match="disk full"):  # nothing there before either
        save_package(FolderModel("new", fail=True), tmp_path / "new.mlpackage")
    assert [item.name for item in tmp_path.iterdir()] == ["m.mlpackage"]


def test_a_failed_swap_puts_the_previous_package_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = save_package(FolderModel("first"), tmp_path / "m.mlpackage")
    renames: list[tuple[str, str]] = []
    rename = Path.rename

    def flaky(self: Path, destination: Any) -> Any:
        renames.append((self.name, Path(destination).name))
        if len(renames) == 2:  # the new package into place, after the old one went aside
            raise OSError(28, "No space left on device")
        return rename(self, destination)

    monkeypatch.setattr(Path, "rename", flaky)
    with pytest.raises(ProgramError, match=r"could not write the package: .*No space left"):
        save_package(FolderModel("second"), target)
    assert renames[0][0] == "m.mlpackage" and renames[1][1] == "m.mlpackage"
    assert _tree(target) == {"Manifest.json": b"first"}
    assert [item.name for item in tmp_path.iterdir()] == ["m.mlpackage"]


def test_a_previous_package_that_cannot_go_back_is_kept_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = save_package(FolderModel("first"), tmp_path / "m.mlpackage")
    rename = Path.rename
    calls = 0

    def failing(self: Path, destination: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls >= 2:  # the new package into place, and the old one back
            raise OSError(5, "Input/output error")
        return rename(self, destination)

    monkeypatch.setattr(Path, "rename", failing)
    with pytest.raises(ProgramError, match=r"nor put the previous one back .* it is at ") as raised:
        save_package(FolderModel("second"), target)
    kept = Path(str(raised.value).rsplit("it is at ", 1)[1])
    assert kept.parent.parent == tmp_path and kept.name == "previous.mlpackage"
    assert _tree(kept) == {"Manifest.json": b"first"}  # not deleted with the scratch folder
    assert not target.exists()


def test_the_stand_in_refuses_what_coremltools_refuses(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"extension must be \.mlpackage"):
        FolderModel("x").save(str(tmp_path / "m.mlmodel"))
    with pytest.raises(TypeError, match="save_path is a str"):
        FolderModel("x").save(tmp_path / "m.mlpackage")  # type: ignore[arg-type]


def test_bad_targets_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match=r"must end in \.mlpackage"):
        save_package(FolderModel("x"), tmp_path / "m.mlmodel")
    (tmp_path / "file.mlpackage").write_text("a file")
    with pytest.raises(ProgramError, match="not a directory"):
        save_package(FolderModel("x"), tmp_path / "file.mlpackage")
    assert sorted(item.name for item in tmp_path.iterdir()) == ["file.mlpackage"]


def test_an_interrupted_program_save_keeps_the_previous_package(
    narrow: anekit.CompiledProgram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = narrow.save(tmp_path / "narrow.mlpackage")
    before = _tree(target)
    _crash_coremltools_save(monkeypatch)
    with pytest.raises(RuntimeError, match="disk full"):
        narrow.save(target)
    assert _tree(target) == before
    assert [item.name for item in tmp_path.iterdir()] == ["narrow.mlpackage"]
    monkeypatch.undo()
    np.testing.assert_array_equal(anekit.load(target)(X + 1), (X + 1)[:, :8] * 2)


def test_an_interrupted_multifunction_save_keeps_the_previous_package(
    narrow: anekit.CompiledProgram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = save_functions({"narrow": narrow}, tmp_path / "two.mlpackage")
    before = _tree(target)
    real_save = ct.models.MLModel.save
    staged: list[Path] = []

    def save(self: Any, save_path: str) -> None:
        real_save(self, save_path)
        if Path(save_path).parent.parent == tmp_path:  # the finished package, beside target
            staged.append(Path(save_path))
            raise RuntimeError("disk full")

    monkeypatch.setattr(ct.models.MLModel, "save", save)
    with pytest.raises(RuntimeError, match="disk full"):
        save_functions({"narrow": narrow, "again": narrow}, target)
    assert [path.name for path in staged] == ["two.mlpackage"]
    assert _tree(target) == before
    assert [item.name for item in tmp_path.iterdir()] == ["two.mlpackage"]


# -- the one I/O widths key -------------------------------------------------------------


def test_a_single_function_package_records_its_widths_under_the_one_key(
    narrow: anekit.CompiledProgram, tmp_path: Path
) -> None:
    metadata = _metadata(narrow.save(tmp_path / "narrow.mlpackage"))
    assert json.loads(metadata[IO_WIDTHS_KEY]) == {"main": {"output": 8}}
    assert LEGACY_IO_WIDTHS_KEY not in metadata
    loaded = anekit.load(tmp_path / "narrow.mlpackage")
    assert loaded.io_widths == {"output": 8} and loaded.output_specs[0].shape == (4, 8)


def test_a_multifunction_package_records_its_widths_under_the_same_key(
    narrow: anekit.CompiledProgram, tmp_path: Path
) -> None:
    wide = anekit.compile(lambda x: x * 2, X)
    path = save_functions([("wide", wide), ("narrow", narrow)], tmp_path / "two.mlpackage")
    metadata = _metadata(path)
    assert json.loads(metadata[IO_WIDTHS_KEY]) == {"narrow": {"output": 8}}
    assert LEGACY_IO_WIDTHS_KEY not in metadata
    assert anekit.load(path, function="narrow").io_widths == {"output": 8}
    assert anekit.load(path, function="wide").io_widths == {}


def test_a_package_written_with_the_old_key_still_loads_its_widths(
    narrow: anekit.CompiledProgram, tmp_path: Path
) -> None:
    model = narrow.to_mlmodel()
    model.user_defined_metadata[LEGACY_IO_WIDTHS_KEY] = json.dumps({"output": 8})
    del model.user_defined_metadata[IO_WIDTHS_KEY]
    path = tmp_path / "old.mlpackage"
    model.save(str(path))
    assert IO_WIDTHS_KEY not in _metadata(path)
    loaded = anekit.load(path)
    assert loaded.io_widths == {"output": 8}
    np.testing.assert_array_equal(loaded(X + 1), (X + 1)[:, :8] * 2)


def test_widths_metadata_round_trips() -> None:
    metadata: dict[str, str] = {}
    record_io_widths(metadata, {"seq32": {"y": 8, "x": 16}, "seq64": {}})
    assert json.loads(metadata[IO_WIDTHS_KEY]) == {"seq32": {"x": 16, "y": 8}}
    assert read_io_widths(metadata, "seq32") == {"x": 16, "y": 8}
    assert read_io_widths(metadata, "seq64") == {}
    record_io_widths(metadata, {"main": {}})
    assert metadata == {}
    assert read_io_widths({LEGACY_IO_WIDTHS_KEY: '{"y": 8}'}, "main") == {"y": 8}
    with pytest.raises(ValueError, match="not a map of functions"):
        read_io_widths({IO_WIDTHS_KEY: "[1, 2]"}, "main")
