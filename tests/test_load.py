"""anekit.load: packages read back into MIL on any OS, run in the simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import coremltools as ct
import coremltools.optimize.coreml as cto
import numpy as np
import pytest

import anekit
from anekit import errors, sim

F32 = np.float32


def ffn(d_model: int = 64, d_hidden: int = 128) -> tuple[Any, np.ndarray]:
    from anekit import demo

    return demo.make_ffn(d_model, d_hidden), demo.example_input(16, d_model)


@pytest.fixture(scope="module")
def ffn_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fn, x = ffn()
    return anekit.compile(fn, x).save(tmp_path_factory.mktemp("load") / "ffn.mlpackage")


def test_round_trip_keeps_the_contract_and_the_values(ffn_package: Path) -> None:
    fn, x = ffn()
    loaded = anekit.load(ffn_package)
    assert [spec.describe() for spec in loaded.input_specs] == ["x: float16[16, 64]"]
    assert [spec.describe() for spec in loaded.output_specs] == ["output: float16[16, 64]"]
    assert loaded.source == str(ffn_package)
    got = loaded(x)  # the simulator off macOS, Core ML on a Mac
    want = fn(x.astype(F32))
    assert np.abs(got.astype(F32) - want).max() / np.abs(want).max() < 5e-3
    assert loaded.last_run is not None


def test_loaded_program_saves_again(ffn_package: Path, tmp_path: Path) -> None:
    loaded = anekit.load(ffn_package)
    again = anekit.load(loaded.save(tmp_path / "again.mlpackage"))
    _, x = ffn()
    np.testing.assert_array_equal(again(x, backend="sim"), loaded(x, backend="sim"))


def _compressed(
    package: Path, tmp_path: Path, name: str, compress: Any, target: Any = None
) -> Path:
    model = ct.models.MLModel(str(package), skip_model_load=True)
    compressed = compress(model)
    path = tmp_path / f"{name}.mlpackage"
    compressed.save(str(path))
    return path


@pytest.mark.parametrize(
    ("name", "op_type", "config"),
    [
        (
            "int8_per_channel",
            "constexpr_blockwise_shift_scale",
            lambda m: cto.linear_quantize_weights(
                m,
                cto.OptimizationConfig(
                    global_config=cto.OpLinearQuantizerConfig(
                        mode="linear_symmetric", granularity="per_channel"
                    )
                ),
            ),
        ),
        (
            "palettized_4bit",
            "constexpr_lut_to_dense",
            lambda m: cto.palettize_weights(
                m,
                cto.OptimizationConfig(
                    global_config=cto.OpPalettizerConfig(mode="uniform", nbits=4)
                ),
            ),
        ),
        (
            "pruned_half",
            "constexpr_sparse_to_dense",
            lambda m: cto.prune_weights(
                m,
                cto.OptimizationConfig(
                    global_config=cto.OpMagnitudePrunerConfig(target_sparsity=0.5)
                ),
            ),
        ),
    ],
)
def test_compressed_weights_are_materialized(
    ffn_package: Path, tmp_path: Path, name: str, op_type: str, config: Any
) -> None:
    path = _compressed(ffn_package, tmp_path, name, config)
    loaded = anekit.load(path)
    ops = [op.op_type for op in loaded.ops()]
    assert op_type in ops, ops
    _, x = ffn()
    reference = anekit.load(ffn_package)(x, backend="sim").astype(F32)
    got = loaded(x, backend="sim").astype(F32)
    assert np.isfinite(got).all()
    cosine = float((got * reference).sum() / np.linalg.norm(got) / np.linalg.norm(reference))
    assert cosine > (0.99 if name != "pruned_half" else 0.8), cosine


def test_affine_dequantize_for_older_targets(tmp_path: Path) -> None:
    fn, x = ffn()
    package = anekit.compile(fn, x, deployment_target="macOS14").save(tmp_path / "ios17.mlpackage")
    model = ct.models.MLModel(str(package), skip_model_load=True)
    config = cto.OptimizationConfig(
        global_config=cto.OpLinearQuantizerConfig(mode="linear_symmetric")
    )
    path = tmp_path / "int8.mlpackage"
    cto.linear_quantize_weights(model, config).save(str(path))
    loaded = anekit.load(path)
    assert "constexpr_affine_dequantize" in [op.op_type for op in loaded.ops()]
    result = sim.run(loaded.program, {"x": x}, mode="ane")
    reference = fn(x.astype(F32))
    got = result.outputs["output"].astype(F32)
    assert np.abs(got - reference).max() / np.abs(reference).max() < 2e-2


def test_multifunction_package(tmp_path: Path) -> None:
    fn = ffn()[0]
    short = anekit.compile(fn, np.zeros((8, 64), np.float16)).save(tmp_path / "short.mlpackage")
    long = anekit.compile(fn, np.zeros((32, 64), np.float16)).save(tmp_path / "long.mlpackage")
    descriptor = ct.utils.MultiFunctionDescriptor()
    descriptor.add_function(str(short), src_function_name="main", target_function_name="seq8")
    descriptor.add_function(str(long), src_function_name="main", target_function_name="seq32")
    descriptor.default_function_name = "seq8"
    combined = tmp_path / "buckets.mlpackage"
    ct.utils.save_multifunction(descriptor, str(combined))

    default = anekit.load(combined)
    assert default.function_name == "seq8"
    assert default.input_specs[0].shape == (8, 64)
    chosen = anekit.load(combined, function="seq32")
    assert chosen.input_specs[0].shape == (32, 64)
    x = np.random.default_rng(3).standard_normal((32, 64)).astype(np.float16)
    got = chosen(x, backend="sim").astype(F32)
    want = fn(x.astype(F32))
    assert np.abs(got - want).max() / np.abs(want).max() < 5e-3
    assert set(chosen.program.functions) == {"seq32"}  # only the function it runs is read
    with pytest.raises(errors.ProgramError, match="seq32, seq8"):
        anekit.load(combined, function="seq64")


def _snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every file's bytes and every file's and folder's mtime under ``root``."""
    return {
        str(path.relative_to(root)): (
            path.read_bytes() if path.is_file() else None,
            path.stat().st_mtime_ns,
        )
        for path in [root, *sorted(root.rglob("*"))]
    }


def test_load_leaves_the_package_untouched(ffn_package: Path, tmp_path: Path) -> None:
    import json
    import os
    import shutil

    from anekit.analysis import analyze

    package = Path(shutil.copytree(ffn_package, tmp_path / "mine.mlpackage"))
    # a manifest as another tool writes it (compact), and old timestamps
    manifest = package / "Manifest.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text())))
    for path in [package, *package.rglob("*")]:
        os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = _snapshot(package)
    loaded = anekit.load(package)
    analyze(package)
    assert _snapshot(package) == before
    _, x = ffn()
    np.testing.assert_array_equal(
        loaded(x, backend="sim"), anekit.load(ffn_package)(x, backend="sim")
    )


def test_load_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(errors.ProgramError, match="no such file"):
        anekit.load(tmp_path / "missing.mlpackage")
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(errors.ProgramError, match=r"\.mlpackage"):
        anekit.load(tmp_path / "model.onnx")
    broken = tmp_path / "broken.mlpackage"
    broken.mkdir()
    with pytest.raises(errors.ProgramError, match=r"broken\.mlpackage"):
        anekit.load(broken)
    (broken / "Manifest.json").write_text("{")
    with pytest.raises(errors.ProgramError, match=r"broken\.mlpackage: unreadable Manifest"):
        anekit.load(broken)
