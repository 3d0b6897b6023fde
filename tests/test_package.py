"""anekit.package.save_functions: several functions as one multifunction package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit.errors import ProgramError
from anekit.package import save_functions

WIDTH = 64
rng = np.random.default_rng(7)
WEIGHT = (rng.standard_normal((WIDTH, WIDTH)) / 8).astype(np.float16)


def _project(x: np.ndarray) -> np.ndarray:
    return np.tanh(x @ WEIGHT)


def _bucket(length: int) -> anekit.CompiledProgram:
    return anekit.compile(_project, np.zeros((length, WIDTH), np.float16))


@pytest.fixture(scope="module")
def buckets() -> dict[str, anekit.CompiledProgram]:
    return {f"seq{length}": _bucket(length) for length in (32, 64)}


def _weight_bytes(package: Path) -> int:
    return sum(path.stat().st_size for path in package.rglob("weight.bin"))


def test_functions_share_one_copy_of_their_weights(
    buckets: dict[str, anekit.CompiledProgram], tmp_path: Path
) -> None:
    one = save_functions({"seq32": buckets["seq32"]}, tmp_path / "one.mlpackage")
    both = save_functions(buckets, tmp_path / "both.mlpackage", default="seq64")
    stored = _weight_bytes(both)
    assert stored >= WEIGHT.nbytes
    assert stored == _weight_bytes(one)  # the second function added no weight bytes
    x = rng.standard_normal((64, WIDTH)).astype(np.float16)
    for name, length in (("seq32", 32), ("seq64", 64)):
        program = anekit.load(both, function=name)
        assert program.input_specs[0].shape == (length, WIDTH)
        got = np.asarray(program(x[:length]), np.float32)
        want = np.tanh(x[:length].astype(np.float32) @ WEIGHT.astype(np.float32))
        np.testing.assert_allclose(got, want, atol=1e-2)
    assert anekit.load(both).input_specs[0].shape == (64, WIDTH)  # the default function


def test_each_function_keeps_its_own_widened_outputs(tmp_path: Path) -> None:
    narrow = anekit.compile(lambda x: x[:, :8] * 2, np.zeros((4, 64), np.float16))
    wide = anekit.compile(lambda x: x * 2, np.zeros((4, 64), np.float16))
    assert narrow.io_widths == {"output": 8}
    path = save_functions([("narrow", narrow), ("wide", wide)], tmp_path / "two.mlpackage")
    x = np.arange(256, dtype=np.float16).reshape(4, 64) / 256
    loaded = anekit.load(path, function="narrow")
    assert loaded.output_specs[0].shape == (4, 8)
    np.testing.assert_array_equal(loaded(x), x[:, :8] * 2)
    assert anekit.load(path, function="wide").output_specs[0].shape == (4, 64)


def _op_types(path: Path, function: str) -> set[str]:
    program = anekit.load(path, function=function).program
    return {op.op_type for op in program.functions[function].operations}


@pytest.mark.parametrize(
    ("weights", "expected", "floor"),
    [("int8", "constexpr_", 0.9999), ("palettize4", "constexpr_lut_to_dense", 0.99)],
)
def test_compressed_weights_are_stored_compressed_and_stay_close(
    buckets: dict[str, anekit.CompiledProgram],
    tmp_path: Path,
    weights: str,
    expected: str,
    floor: float,
) -> None:
    path = save_functions(buckets, tmp_path / f"{weights}.mlpackage", weights=weights)
    for name in buckets:
        assert any(op.startswith(expected) for op in _op_types(path, name)), weights
    assert _weight_bytes(path) < WEIGHT.nbytes  # fewer bytes than the fp16 weight
    x = rng.standard_normal((32, WIDTH)).astype(np.float16)
    got = np.asarray(anekit.load(path, function="seq32")(x), np.float32)
    want = np.tanh(x.astype(np.float32) @ WEIGHT.astype(np.float32))
    cosine = float((got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cosine >= floor


@pytest.mark.parametrize(
    ("functions", "path", "options", "message"),
    [
        ("two", "out.pkg", {}, "must end in .mlpackage"),
        ("none", "out.mlpackage", {}, "at least one function"),
        ("two", "out.mlpackage", {"default": "seq99"}, "'seq99' is not among seq32, seq64"),
        ("two", "out.mlpackage", {"weights": "int5"}, "unknown weight compression .int5."),
        ("two", "out.mlpackage", {"weights": "palettize5"}, "a palette has 1, 2, 3, 4, 6, 8 bits"),
        ("same", "out.mlpackage", {}, "two functions are named 'seq32'"),
    ],
)
def test_bad_requests_are_refused_by_name(
    buckets: dict[str, anekit.CompiledProgram],
    tmp_path: Path,
    functions: str,
    path: str,
    options: dict[str, Any],
    message: str,
) -> None:
    given: Any = {
        "two": buckets,
        "none": {},
        "same": [("seq32", buckets["seq32"]), ("seq32", buckets["seq64"])],
    }[functions]
    with pytest.raises(ProgramError, match=message):
        save_functions(given, tmp_path / path, **options)
    assert not (tmp_path / path).exists()
