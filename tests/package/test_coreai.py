"""The Core AI emitter, checked by Apple's own runtime: each program is written as an
``.aimodel`` by ``coreai.authoring``, verified, and run on Core AI's bundled CPU runtime
(real, not a stand-in; Apple's CPU reference, never an ANE figure), against anekit's
simulator in fp32."""

from __future__ import annotations

import builtins
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
import anekit.nn as nn
from anekit import sim
from anekit.errors import ProgramError
from anekit.ops.groups import CONSTEXPR
from anekit.ops.registry import OPS
from anekit.sim.single_op import single_op_program

coreai = pytest.importorskip("coreai.authoring", reason="the coreai extra")

from anekit.package.coreai import run_coreai, save_coreai, to_coreai, unlowerable  # noqa: E402

F32 = np.float32
RNG = np.random.default_rng(3)
W1 = (RNG.standard_normal((64, 96)) * 0.1).astype(F32)
W2 = (RNG.standard_normal((96, 64)) * 0.1).astype(F32)
B1 = (RNG.standard_normal(96) * 0.1).astype(F32)


def _ffn(x: Any) -> Any:
    """The seed-003 feed-forward shape: project, gelu, project back, softmax."""
    return nn.softmax(nn.gelu(x @ W1 + B1) @ W2, axis=-1)


@pytest.fixture(scope="module")
def ffn() -> anekit.CompiledProgram:
    return anekit.compile(_ffn, RNG.standard_normal((8, 64)).astype(F32))


def _against_the_simulator(
    program: Any, feeds: dict[str, np.ndarray], path: Path, mode: str = "fp32"
) -> float:
    """Max |Core AI CPU - anekit's simulation| over the outputs of ``main`` (``mode``
    ``ane`` where the program holds fp16 values, which Core AI stores as fp16 too)."""
    save_coreai(program, path, ["main"])
    assert coreai.AIModelAsset.is_valid(path)
    got = run_coreai(path, feeds, "main")
    want = sim.run(program, feeds, mode=mode).outputs
    assert set(got) == set(want)
    return max(
        float(np.max(np.abs(np.asarray(got[name], F32) - np.asarray(want[name], F32))))
        for name in want
    )


def test_the_ffn_after_the_ane_passes_runs_on_apples_runtime_as_simulated(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    kinds = {op.op_type for op in ffn.program.functions["main"].operations}
    assert "conv" in kinds  # the ANE passes' 1x1 projections, not matmuls
    x = RNG.standard_normal((8, 64)).astype(F32)
    feeds = ffn.package_feeds({str(ffn.input_specs[0].name): x})
    assert _against_the_simulator(ffn.program, feeds, tmp_path / "ffn.aimodel") < 1e-5


def test_program_save_writes_an_asset_of_the_package_by_its_suffix(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    """The asset holds the program Core ML's package holds (fp16 inside, casts at the
    edges), and the package itself, bound to the bytecode: what anekit.load reads."""
    import json

    path = ffn.save(tmp_path / "ffn.aimodel")
    assert sorted(item.name for item in path.iterdir()) == [
        "anekit",
        "main.hash",
        "main.mlirb",
        "metadata.json",
    ]
    assert [item.name for item in tmp_path.iterdir()] == ["ffn.aimodel"]  # nothing beside
    record = json.loads((path / "anekit" / "source.json").read_text())
    assert record["functions"] == ["main"]
    bytecode = (path / "main.mlirb").read_bytes()
    assert record["bytecode_sha256"] == hashlib.sha256(bytecode).hexdigest()
    loaded = anekit.load(path)
    assert loaded.package_path == path / "anekit" / "source.mlpackage"
    assert "cast" in {op.op_type for op in loaded.program.functions["main"].operations}
    x = RNG.standard_normal((8, 64)).astype(F32)
    on_core_ai = run_coreai(path, loaded.package_feeds({str(loaded.input_specs[0].name): x}))
    simulated = np.asarray(loaded(x, backend="sim"), F32)  # the ANE's fp16 numerics
    assert np.max(np.abs(np.asarray(next(iter(on_core_ai.values())), F32) - simulated)) < 2e-4


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupt_asset_is_refused_before_core_ai_reads_it(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    """coreai-core aborts the process on corrupt bytecode (std::bad_cast): the hash
    check must come first, for loading and for running."""
    path = ffn.save(tmp_path / "ffn.aimodel")
    _flip_a_byte(path / "main.mlirb")
    message = r"ffn\.aimodel: main\.mlirb does not match main\.hash \(a corrupt or changed asset\)"
    with pytest.raises(ProgramError, match=message):
        anekit.load(path)
    with pytest.raises(ProgramError, match=message):
        run_coreai(path, {"x": np.zeros((8, 64), F32)})
    (path / "main.hash").unlink()
    with pytest.raises(ProgramError, match=r"not a Core AI asset \(no main\.hash\)"):
        anekit.load(path)


def test_an_asset_changed_since_anekit_wrote_it_is_not_read_back(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    path = ffn.save(tmp_path / "ffn.aimodel")
    other, _ = single_op_program("relu", RNG.standard_normal((4,)).astype(F32))
    replaced = save_coreai(other, tmp_path / "other.aimodel")  # a valid asset, hash and all
    for name in ("main.mlirb", "main.hash"):
        (path / name).write_bytes((replaced / name).read_bytes())
    with pytest.raises(ProgramError, match="is not the bytecode anekit wrote with the source"):
        anekit.load(path)


def test_an_asset_without_a_source_program_is_refused_with_the_reason(tmp_path: Path) -> None:
    program, _ = single_op_program("relu", RNG.standard_normal((4,)).astype(F32))
    path = save_coreai(program, tmp_path / "foreign.aimodel")
    with pytest.raises(ProgramError, match=r"holds no anekit source .* not Core AI bytecode"):
        anekit.load(path)
    (out,) = run_coreai(path, {"x": np.array([-1, 2, -3, 4], F32)}).values()
    np.testing.assert_array_equal(out, [0, 2, 0, 4])  # Core AI still runs it


def test_a_program_runs_on_the_coreai_cpu_backend_by_name(ffn: anekit.CompiledProgram) -> None:
    x = RNG.standard_normal((8, 64)).astype(F32)
    got = ffn(x, backend="coreai-cpu")
    report = ffn.last_run
    assert report is not None and report.backend == "coreai-cpu" and not report.simulated
    assert report.device == "CPU (Core AI reference runtime; not an ANE)"
    want = ffn(x, backend="sim", mode="fp32")
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=1e-5)
    again = ffn(x, backend="coreai-cpu")  # the loaded asset, run again
    np.testing.assert_array_equal(np.asarray(again), np.asarray(got))
    assert ffn.last_run is not None and ffn.last_run.load_seconds is None


def test_anekit_run_takes_the_coreai_cpu_backend(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    import json

    from click.testing import CliRunner

    from anekit.cli import cli

    package = ffn.save(tmp_path / "ffn.mlpackage")
    result = CliRunner().invoke(
        cli, ["run", str(package), "--backend", "coreai-cpu", "--repeat", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["backend"] == "coreai-cpu" and report["simulated"] is False
    assert report["device"] == "CPU (Core AI reference runtime; not an ANE)"


def test_a_saved_fp16_package_runs_on_core_ai_in_fp16(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    """The package as Core ML gets it (fp16 inside, casts at the edges), read back and
    run by Core AI: within fp16's reach of the simulator's ANE numerics."""
    loaded = anekit.load(ffn.save(tmp_path / "ffn.mlpackage"))
    kinds = {op.op_type for op in loaded.program.functions["main"].operations}
    assert "cast" in kinds
    x = RNG.standard_normal((8, 64)).astype(F32)
    got = np.asarray(loaded(x, backend="coreai-cpu"), F32)
    want = np.asarray(loaded(x, backend="sim"), F32)  # ANE numerics: fp16 storage
    exact = np.asarray(ffn(x, backend="sim", mode="fp32"), F32)
    assert np.max(np.abs(got - want)) < 2e-4
    assert np.max(np.abs(got - exact)) > 0  # computed in fp16, not in fp32


#: One-op programs: op -> its non-constant inputs and its attributes.
_BINARY = ("add", "sub", "mul", "real_div", "maximum", "minimum")
_UNARY: tuple[str, ...] = ("abs", "exp", "tanh", "sin", "cos", "sinh", "cosh", "erf")
_UNARY += ("identity", "relu", "sigmoid", "silu")
_REDUCTIONS: tuple[str, ...] = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")
_REDUCTIONS += ("reduce_prod",)
_REDUCTIONS += ("reduce_sum_square", "reduce_l1_norm", "reduce_l2_norm")


def _cases() -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    x = RNG.standard_normal((2, 3, 8)).astype(F32)
    y = RNG.uniform(0.5, 2.0, (2, 3, 8)).astype(F32)
    row = RNG.uniform(0.5, 2.0, (8,)).astype(F32)
    cases: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    cases += [(op, (x, y), {}) for op in _BINARY]
    cases += [("add (broadcast)", (x, row), {})]
    cases += [(op, (x,), {}) for op in _UNARY]
    positive = np.abs(x) + F32(0.1)
    cases += [
        ("sqrt", (positive,), {}),
        ("pow", (positive, y), {}),
        ("expand_dims", (x,), {"axes": np.array([1], np.int32)}),
        ("squeeze", (x[:, :1],), {"axes": np.array([1], np.int32)}),
        ("log", (positive,), {"epsilon": F32(1e-3)}),
        ("rsqrt", (positive,), {"epsilon": F32(1e-3)}),
        ("inverse", (positive,), {"epsilon": F32(1e-3)}),
        ("gelu", (x,), {"mode": "EXACT"}),
        ("gelu", (x,), {"mode": "TANH_APPROXIMATION"}),
        ("gelu", (x,), {"mode": "SIGMOID_APPROXIMATION"}),
        ("softmax", (x,), {"axis": np.int32(1)}),
        ("matmul", (x, RNG.standard_normal((2, 8, 5)).astype(F32)), {}),
        ("matmul", (x, RNG.standard_normal((2, 5, 8)).astype(F32)), {"transpose_y": True}),
        (
            "linear",
            (x,),
            {
                "weight": RNG.standard_normal((5, 8)).astype(F32),
                "bias": RNG.standard_normal(5).astype(F32),
            },
        ),
        ("reshape", (x,), {"shape": np.array([6, 8], np.int32)}),
        ("cast", (x,), {"dtype": "fp16"}),
        ("cast", (x * 4,), {"dtype": "int32"}),
        ("transpose", (x,), {"perm": np.array([2, 0, 1], np.int32)}),
        (
            "conv",
            (RNG.standard_normal((1, 8, 1, 16)).astype(F32),),
            {"weight": RNG.standard_normal((4, 8, 1, 1)).astype(F32), "pad_type": "valid"},
        ),
        (
            "conv (same, strided, biased)",
            (RNG.standard_normal((1, 2, 7, 6)).astype(F32),),
            {
                "weight": RNG.standard_normal((3, 2, 3, 3)).astype(F32),
                "bias": RNG.standard_normal(3).astype(F32),
                "pad_type": "same",
                "strides": np.array([2, 1], np.int32),
            },
        ),
        (
            "conv (custom, uneven pads)",
            (RNG.standard_normal((1, 2, 5, 6)).astype(F32),),
            {
                "weight": RNG.standard_normal((3, 2, 3, 2)).astype(F32),
                "pad_type": "custom",
                "pad": np.array([2, 0, 0, 1], np.int32),
            },
        ),
        (
            "conv (custom: Whisper's front end)",
            (RNG.standard_normal((1, 4, 1, 12)).astype(F32),),
            {
                "weight": RNG.standard_normal((5, 4, 1, 3)).astype(F32),
                "pad_type": "custom",
                "pad": np.array([0, 0, 1, 1], np.int32),
            },
        ),
        ("layer_norm", (x,), {"axes": np.array([-1], np.int32), "epsilon": F32(1e-5)}),
        (
            "layer_norm (affine, two axes)",
            (x,),
            {
                "axes": np.array([1, 2], np.int32),
                "gamma": RNG.uniform(0.5, 2.0, (3, 8)).astype(F32),
                "beta": RNG.standard_normal((3, 8)).astype(F32),
                "epsilon": F32(1e-5),
            },
        ),
        ("concat", ([x, y, x[:, :1]],), {"axis": np.int32(1)}),
        (
            "slice_by_index",
            (x,),
            {
                "begin": np.array([1, 0, 1], np.int32),
                "end": np.array([2, 3, 7], np.int32),
                "stride": np.array([1, 2, 3], np.int32),
            },
        ),
        (
            "slice_by_index (masks, squeezed)",
            (x,),
            {
                "begin": np.array([0, 2, -4], np.int32),
                "end": np.array([0, 3, 0], np.int32),
                "begin_mask": np.array([True, False, False]),
                "end_mask": np.array([True, False, True]),
                "squeeze_mask": np.array([False, True, False]),
            },
        ),
        (
            "slice_by_size",
            (x,),
            {"begin": np.array([0, 1, 2], np.int32), "size": np.array([-1, 2, 4], np.int32)},
        ),
        ("split", (x,), {"axis": np.int32(2), "split_sizes": np.array([3, 5], np.int32)}),
        ("tile", (x,), {"reps": np.array([1, 2, 3], np.int32)}),
        ("pad", (x,), {"pad": np.array([1, 0, 2, 3], np.int32), "constant_val": F32(0.5)}),
    ]
    cases += [
        (op, (x,), {"axes": np.array([1, -1], np.int32), "keep_dims": keep})
        for op in _REDUCTIONS
        for keep in (False, True)
    ]
    return cases


@pytest.mark.parametrize(
    ("name", "arrays", "attributes"),
    _cases(),
    ids=[f"{index}-{case[0]}" for index, case in enumerate(_cases())],
)
def test_each_lowered_op_agrees_with_the_simulator(
    name: str, arrays: tuple[np.ndarray, ...], attributes: dict[str, Any], tmp_path: Path
) -> None:
    op_type = name.split(" ")[0]
    program, feeds = single_op_program(op_type, *arrays, **attributes)
    mode = "ane" if attributes.get("dtype") == "fp16" else "fp32"
    error = _against_the_simulator(program, feeds, tmp_path / "op.aimodel", mode)
    scale = max(float(np.max(np.abs(value))) for value in feeds.values())
    assert error <= 2e-5 * max(scale, 1.0) ** 2, (name, error)


def test_every_op_the_table_covers_is_lowered() -> None:
    """The ops these tests run are exactly the ops with a Core AI lowering (a new
    lowering comes with a case above)."""
    lowered = {name for name, record in OPS.items() if "coreai" in record.lowerings}
    tested = {case[0].split(" ")[0] for case in _cases()} | CONSTEXPR
    assert lowered == tested


def _compressed_weights() -> dict[str, Any]:
    """Builders of one compressed (8, 16) fp16 weight per form the lowering takes, each
    with the Core AI op it should become (None: stored dense)."""
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    data = RNG.integers(-128, 128, (8, 16)).astype(np.int8)
    per_row = RNG.uniform(0.01, 0.1, (8, 1)).astype(np.float16)
    offsets = RNG.integers(-4, 4, (8, 1)).astype(np.int8)
    uint4 = types.nptype_from_builtin(types.uint4)
    palette = RNG.standard_normal((2, 1, 16, 1)).astype(np.float16)  # a palette per 4 rows
    indices = RNG.integers(0, 16, (8, 16)).astype(uint4)
    int4 = RNG.integers(-8, 8, (8, 16)).astype(types.nptype_from_builtin(types.int4))
    blocks = RNG.uniform(0.01, 0.1, (8, 2)).astype(np.float16)  # blocks of 8 columns
    return {
        "int8 per channel": (
            "dequantize",
            lambda: mb.constexpr_blockwise_shift_scale(data=data, scale=per_row, offset=offsets),
        ),
        "int8 per tensor": (
            "dequantize",
            lambda: mb.constexpr_blockwise_shift_scale(data=data, scale=per_row[:1, :1]),
        ),
        "palette of 16 per group": (
            "lut_to_dense",
            lambda: mb.constexpr_lut_to_dense(indices=indices, lut=palette),
        ),
        "int4 in blocks of 8": (
            None,
            lambda: mb.constexpr_blockwise_shift_scale(data=int4, scale=blocks),
        ),
        "int8 with a fractional offset": (
            None,  # Core AI's offset is of the data's type: stored dense, not truncated
            lambda: mb.constexpr_blockwise_shift_scale(
                data=data, scale=per_row, offset=(offsets + 0.5).astype(np.float16)
            ),
        ),
        "a full 256-entry palette": (
            "lut_to_dense",
            lambda: mb.constexpr_lut_to_dense(
                indices=RNG.integers(0, 256, (8, 16)).astype(np.uint8),
                lut=RNG.standard_normal((1, 1, 256, 1)).astype(np.float16),
            ),
        ),
    }


@pytest.mark.parametrize("form", list(_compressed_weights()))
def test_compressed_weights_run_on_core_ai_as_decompressed(form: str, tmp_path: Path) -> None:
    """A compressed weight (iOS18 constexpr ops, as coremltools writes anekit's int8 and
    palettized packages) stays compressed in the asset where Core AI has the form, and
    gives the weight coremltools' own decompression gives."""
    import coremltools as ct
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    op, weight = _compressed_weights()[form]

    def build(x: Any) -> Any:
        return mb.linear(x=x, weight=weight(), name="y")

    program = mb.program(
        input_specs=[mb.TensorSpec(shape=(3, 16), dtype=types.fp16)],
        opset_version=ct.target.iOS18,
    )(build)
    feeds = {"x": RNG.standard_normal((3, 16)).astype(np.float16)}
    path = tmp_path / "w.aimodel"
    error = _against_the_simulator(program, feeds, path, mode="ane")
    peak = float(np.max(np.abs(sim.run(program, feeds, mode="ane").outputs["y"])))
    assert error <= 2e-3 * peak, (error, peak)  # fp16 sums of 16 products, rounded apart
    built = str(to_coreai(program))  # the module's MLIR text
    if op is None:
        assert "dequantize" not in built and "lut_to_dense" not in built
    else:
        assert f"coreai.{op}" in built


def test_an_op_without_a_lowering_is_refused_by_name_before_anything_is_written(
    tmp_path: Path,
) -> None:
    program, _ = single_op_program("topk", RNG.standard_normal((2, 8)).astype(F32), k=np.int32(3))
    assert unlowerable(program.functions.values()) == {"topk": 1}
    target = tmp_path / "topk.aimodel"
    with pytest.raises(ProgramError, match=r"no Core AI lowering for these ops: topk \(1\)"):
        save_coreai(program, target)
    assert list(tmp_path.iterdir()) == []


def test_an_op_variant_a_lowering_cannot_take_is_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    program, _ = single_op_program(
        "pad", RNG.standard_normal((2, 5)).astype(F32), pad=np.array([1, 1], np.int32),
        mode="reflect",
    )  # fmt: skip
    with pytest.raises(ProgramError, match=r"pad .*: Core AI cannot take it: pad mode reflect"):
        save_coreai(program, tmp_path / "pad.aimodel")
    assert list(tmp_path.iterdir()) == []


def test_a_dynamic_shape_is_refused_with_the_input_named(tmp_path: Path) -> None:
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil import get_new_symbol

    @mb.program(input_specs=[mb.TensorSpec(shape=(get_new_symbol(), 4))])  # type: ignore[untyped-decorator]
    def program(x: Any) -> Any:
        return mb.relu(x=x, name="y")

    with pytest.raises(ProgramError, match=r"x: Core AI needs a static shape"):
        save_coreai(program, tmp_path / "dynamic.aimodel")
    assert list(tmp_path.iterdir()) == []


def test_a_path_without_the_suffix_and_a_missing_function_are_refused(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    with pytest.raises(ProgramError, match=r"a Core AI asset is a folder ending in \.aimodel"):
        save_coreai(ffn.program, tmp_path / "ffn.mlpackage")
    with pytest.raises(ProgramError, match="the program has no function 'nope'"):
        save_coreai(ffn.program, tmp_path / "ffn.aimodel", ["nope"])
    assert list(tmp_path.iterdir()) == []


def test_a_new_asset_replaces_the_old_one_whole(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    target = tmp_path / "m.aimodel"
    program, _ = single_op_program("relu", RNG.standard_normal((4,)).astype(F32))
    save_coreai(program, target)
    save_coreai(ffn.program, target)
    x = RNG.standard_normal((8, 64)).astype(F32)
    got = run_coreai(target, {str(ffn.input_specs[0].name): x})
    assert next(iter(got.values())).shape == (8, 64)  # the FFN, not the relu
    assert [item.name for item in tmp_path.iterdir()] == ["m.aimodel"]


def test_a_failed_swap_keeps_the_previous_asset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = tmp_path / "m.aimodel"
    first, _ = single_op_program("relu", RNG.standard_normal((4,)).astype(F32))
    save_coreai(first, target)
    before = {item.name: item.read_bytes() for item in target.iterdir()}
    rename, calls = Path.rename, []

    def flaky(self: Path, destination: Any) -> Any:
        calls.append(self.name)
        if len(calls) == 2:  # the new asset into place, after the old one went aside
            raise OSError(28, "No space left on device")
        return rename(self, destination)

    monkeypatch.setattr(Path, "rename", flaky)
    second, _ = single_op_program("sigmoid", RNG.standard_normal((4,)).astype(F32))
    with pytest.raises(ProgramError, match="No space left"):
        save_coreai(second, target)
    assert {item.name: item.read_bytes() for item in target.iterdir()} == before
    assert [item.name for item in tmp_path.iterdir()] == ["m.aimodel"]


def test_without_the_extra_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = builtins.__import__

    def without_coreai(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("coreai"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_coreai)
    program, _ = single_op_program("relu", RNG.standard_normal((4,)).astype(F32))
    with pytest.raises(ProgramError, match=r"pip install 'anekit\[coreai\]'"):
        save_coreai(program, tmp_path / "relu.aimodel")
    assert list(tmp_path.iterdir()) == []


def test_simulate_and_doctor_read_an_asset_and_refuse_a_corrupt_one(
    ffn: anekit.CompiledProgram, tmp_path: Path
) -> None:
    import json

    from click.testing import CliRunner

    from anekit.cli import cli

    path = ffn.save(tmp_path / "ffn.aimodel")
    runner = CliRunner()
    simulated = runner.invoke(cli, ["simulate", str(path), "--json"])
    assert simulated.exit_code == 0, simulated.output
    ops = {row["type"] for row in json.loads(simulated.stdout)["ops"]}
    assert {"conv", "gelu", "softmax"} <= ops
    doctor = runner.invoke(cli, ["doctor", str(path), "--json"])
    report = json.loads(doctor.stdout)
    assert doctor.exit_code == (0 if report["all_on_ane"] else 1), doctor.output
    assert report["source"] == str(path)
    assert {op["type"] for op in report["functions"][0]["ops"]} >= {"conv", "gelu", "softmax"}
    _flip_a_byte(path / "main.mlirb")
    for command in ("simulate", "doctor"):
        refused = runner.invoke(cli, [command, str(path)])
        assert refused.exit_code == 2
        assert refused.output.strip().splitlines() == [
            f"error (ProgramError): {path}: main.mlirb does not match main.hash "
            "(a corrupt or changed asset); write it again"
        ]


def test_a_compressed_program_runs_on_core_ai_with_its_weights_compressed(
    tmp_path: Path,
) -> None:
    """compress='int8': the asset holds the program as it goes into the package (fp16,
    int8 weights as Core AI's dequantize), and agrees with the simulator's run of it."""
    from anekit.backends.coreai import write_asset

    program = anekit.compile(_ffn, RNG.standard_normal((8, 64)).astype(F32), compress="int8")
    path, function = write_asset(program.load_request(), tmp_path)
    assert function == "main"
    assert "coreai.dequantize" in str(coreai.AIModelAsset.load(path).program)
    x = RNG.standard_normal((8, 64)).astype(F32)
    got = np.asarray(program(x, backend="coreai-cpu"), F32)
    want = np.asarray(program(x, backend="sim"), F32)  # the same compressed fp16 program
    assert np.max(np.abs(got - want)) < 2e-3


def test_what_core_ai_itself_refuses_is_a_program_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A lowering that builds what Core AI's verifier refuses (here a transpose whose
    permutation is int32: Core AI takes uint16/uint32) ends as a one-line ProgramError
    quoting the verifier, and nothing is written."""
    record = OPS["transpose"]

    def signed_perm(ai: Any, op: Any) -> Any:
        return ai.ai.transpose(ai.value(op.x), np.asarray([1, 0], np.int32))

    monkeypatch.setitem(record.lowerings, "coreai", signed_perm)
    program, _ = single_op_program(
        "transpose", RNG.standard_normal((2, 3)).astype(F32), perm=np.array([1, 0], np.int32)
    )
    with pytest.raises(ProgramError, match=r"^Core AI refused the program: .*transpose") as error:
        save_coreai(program, tmp_path / "t.aimodel")
    assert "\n" not in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_an_asset_core_ai_cannot_load_is_a_one_line_program_error(tmp_path: Path) -> None:
    """A malformed metadata.json (the hash does not cover it): Core AI's own refusal,
    named with the asset, in one line."""
    from anekit.package.coreai import LoadedAsset

    program, _ = single_op_program("relu", RNG.standard_normal((4,)).astype(F32))
    path = save_coreai(program, tmp_path / "m.aimodel")
    (path / "metadata.json").write_text("{ not json")
    with pytest.raises(ProgramError, match=r"m\.aimodel: Core AI could not load it: ") as error:
        LoadedAsset(path)
    assert "\n" not in str(error.value)
