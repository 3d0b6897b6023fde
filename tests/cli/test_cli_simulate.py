"""``anekit simulate``: unreadable --inputs files are one-line errors, and the report
names the accumulation the simulator actually used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import anekit
from anekit.cli import cli


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One input ``x`` (8 x 64 fp16): a matmul, then a column sum."""
    weight = np.full((64, 64), 0.01, np.float16)
    program = anekit.compile(
        lambda x: np.sum(np.tanh(x @ weight), axis=0, keepdims=True),
        np.zeros((8, 64), np.float16),
    )
    return Path(program.save(tmp_path_factory.mktemp("simulate") / "tiny.mlpackage"))


def _simulate(*args: str) -> Result:
    return CliRunner().invoke(cli, ["simulate", *args])


# --- --inputs files that cannot be read -----------------------------------------------------


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncated(path: Path) -> None:
    np.savez(path, x=np.ones((8, 64), np.float16))
    path.write_bytes(path.read_bytes()[:100])


def _corrupt_member(path: Path) -> None:
    """The zip directory is intact, the array inside is not."""
    np.savez(path, x=np.ones((8, 64), np.float16))
    data = bytearray(path.read_bytes())
    data[40:60] = bytes(20)
    path.write_bytes(bytes(data))


def _single_array(path: Path) -> None:
    with path.open("wb") as handle:
        np.save(handle, np.ones((8, 64), np.float16))


@pytest.mark.parametrize(
    ("write", "reason"),
    [
        (_empty, "the file is empty"),
        (_truncated, "File is not a zip file"),
        (_corrupt_member, "Bad CRC-32 for file 'x.npy'"),
        (_single_array, "it holds a single .npy array, not named arrays"),
    ],
    ids=["empty", "truncated", "corrupt-member", "npy"],
)
def test_an_unreadable_npz_is_a_one_line_error(
    write: object, reason: str, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "inputs.npz")  # type: ignore[operator]
    result = _simulate(str(package), "--inputs", "inputs.npz")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error (ProgramError): --inputs inputs.npz: not a readable .npz file ({reason}); "
        "write one with numpy.savez(path, NAME=array, ...)\n"
    )
    as_json = _simulate(str(package), "--inputs", "inputs.npz", "--json")
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["error"] == "ProgramError"


def test_an_npz_without_the_input_names_what_it_has(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "other.npz", y=np.ones(3), z=np.ones(2))
    result = _simulate(str(package), "--inputs", "other.npz")
    assert result.exit_code == 2
    assert result.stderr == (
        "error (ProgramError): --inputs other.npz: has no array for input(s) x (it has y, z)\n"
    )


def test_a_readable_npz_is_used(package: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "inputs.npz", x=np.full((8, 64), 0.5, np.float16))
    result = _simulate(str(package), "--inputs", str(tmp_path / "inputs.npz"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outputs"][0]["shape"] == [1, 64]


# --- which accumulation was used ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "accumulation"),
    [
        ([], "fp16"),
        (["--accumulation", "fp32"], "fp32"),
        (["--numerics", "fp32"], "fp32"),
        (["--mode", "fp32"], "fp32"),  # the older name
        (["--numerics", "fp32", "--accumulation", "fp32"], "fp32"),
        (["--executor", "interpreter"], "fp16"),
        (["--engine", "interpreter", "--numerics", "fp32"], "fp32"),  # the older name
    ],
)
def test_the_report_names_the_accumulation_used(
    args: list[str], accumulation: str, package: Path
) -> None:
    result = _simulate(str(package), *args, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["accumulation"] == accumulation
    text = _simulate(str(package), *args)
    assert f" numerics, {accumulation} accumulation) over " in text.stdout


def test_fp16_accumulation_in_fp32_mode_is_refused(package: Path) -> None:
    result = _simulate(str(package), "--mode", "fp32", "--accumulation", "fp16")
    assert result.exit_code == 2
    assert result.stderr.endswith(
        "Error: Invalid value for --accumulation: fp16 accumulation applies to --numerics ane; "
        "fp32 numerics accumulate in fp32\n"
    )


# --- garbage outputs: named, and fatal with --strict -----------------------------------------


@pytest.fixture(scope="module")
def overflowing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """x * x for an input of 300s: every output value is inf in fp16."""
    program = anekit.compile(lambda x: x * x, np.zeros((8, 64), np.float16), passes=False)
    return Path(program.save(tmp_path_factory.mktemp("garbage") / "square.mlpackage"))


def _inputs_of_300(tmp_path: Path) -> str:
    np.savez(tmp_path / "inputs.npz", x=np.full((8, 64), 300, np.float16))
    return str(tmp_path / "inputs.npz")


def test_a_garbage_output_is_named_on_stderr_and_in_json(overflowing: Path, tmp_path: Path) -> None:
    inputs = _inputs_of_300(tmp_path)
    result = _simulate(str(overflowing), "--inputs", inputs)
    assert result.exit_code == 1  # inf/NaN appeared, as before
    assert "NumericsWarning: output 'output' holds 512 inf/NaN values: " in result.stderr
    payload = json.loads(_simulate(str(overflowing), "--inputs", inputs, "--json").stdout)
    (problem,) = payload["problems"]
    assert problem.startswith("output 'output' holds 512 inf/NaN values: ")


def test_strict_turns_garbage_into_an_error(
    overflowing: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = _inputs_of_300(tmp_path)
    result = _simulate(str(overflowing), "--inputs", inputs, "--strict", "--json")
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["error"] == "NumericsError"
    assert "output 'output' holds 512 inf/NaN values" in payload["message"]
    monkeypatch.setenv("ANEKIT_STRICT_NUMERICS", "1")
    assert _simulate(str(overflowing), "--inputs", inputs).exit_code == 2


def test_a_clean_package_passes_strict(package: Path) -> None:
    result = _simulate(str(package), "--strict", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["problems"] == []
