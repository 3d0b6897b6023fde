"""The seed-003 FFN acceptance test, and the demo and version commands."""

from __future__ import annotations

import json
from pathlib import Path

import coremltools as ct
import numpy as np
import pytest
from click.testing import CliRunner

import anekit
from anekit import demo
from anekit.cli import cli
from anekit.passes import ANE_PIPELINE
from tracing import run_program


def test_ffn_traces_validates_and_computes_what_numpy_computes() -> None:
    ffn = demo.make_ffn()
    x = demo.example_input()
    program = anekit.compile(ffn, x, passes=False)  # the trace itself; passes: below
    program.program.validate()
    assert [spec.describe() for spec in program.input_specs] == ["x: float16[256, 512]"]
    assert [spec.describe() for spec in program.output_specs] == ["output: float16[256, 512]"]
    assert sorted({w.name for w in program.weights()}) == ["W1_T", "W2_T", "W3_T", "g"]
    # fp16 program evaluated op by op in fp16 matches NumPy's fp16 evaluation.
    (got,) = run_program(program, x)
    want = ffn(x)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=0, atol=1e-2)
    # ... and the same function traced at fp32 matches NumPy fp32 closely.
    x32 = x.astype(np.float32)
    program32 = anekit.compile(ffn, x32, passes=False)
    (got32,) = run_program(program32, x32)
    np.testing.assert_allclose(got32, ffn(x32), rtol=1e-5, atol=1e-5)


def test_ffn_package_loads_back_with_the_expected_ops(tmp_path: Path) -> None:
    result = demo.run(tmp_path)
    model = ct.models.MLModel(str(result.package), skip_model_load=True)
    spec = model.get_spec()
    function = spec.mlProgram.functions["main"]
    ops = [op.type for op in function.block_specializations[function.opset].operations]
    # the ANE passes scaled the RMSNorm by each row's max |x| and made the matmuls 1x1 convs
    for expected in ("conv", "abs", "reduce_max", "sqrt", "exp", "real_div", "mul", "add"):
        assert expected in ops, ops
    assert ops.count("conv") == 3
    assert "matmul" not in ops
    (inp,) = spec.description.input
    (out,) = spec.description.output
    assert (inp.name, list(inp.type.multiArrayType.shape)) == ("x", [256, 512])
    assert (out.name, list(out.type.multiArrayType.shape)) == ("output", [256, 512])
    # three 512x1536 fp16 matrices and the norm weight
    assert result.package_bytes > 3 * 512 * 1536 * 2


@pytest.mark.slow  # ~1 minute: simulates 32 chunks through the package; --no-model runs fast
def test_demo_command_json(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["demo", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["inputs"] == [{"name": "x", "shape": [256, 512], "dtype": "float16"}]
    program = anekit.compile(demo.make_ffn(), demo.example_input())
    assert payload["compute_ops"] == sum(1 for op in program.ops() if op.op_type != "const")
    assert [item["pass"] for item in payload["passes"]["passes"]] == list(ANE_PIPELINE)
    assert Path(payload["package"]["path"]).is_dir()
    assert payload["package"]["bytes"] > 4_000_000
    # the embedding model's package: placement and simulated fidelity (issue 6)
    model = payload["model"]
    assert model["simulated"] is True and model["chunks"] == 32
    assert model["min_cosine_to_fp32"] >= 0.9999
    assert model["all_on_ane"] is True
    assert sorted(model["placement"]) == [f"seq{size}" for size in (128, 192, 256, 320, 384, 512)]
    assert all(item["ane"] == item["compute_ops"] for item in model["placement"].values())


def test_demo_command_text(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path), "--no-model"])
    assert result.exit_code == 0, result.output
    for text in ("Inputs and outputs", "conv1x1", "demo.py:", "ffn.mlpackage", "weight tensors"):
        assert text in result.output


def test_demo_defaults_to_anekit_home() -> None:
    import os

    result = CliRunner().invoke(cli, ["demo", "--json", "--no-model"])
    assert result.exit_code == 0, result.output
    package = Path(json.loads(result.output)["package"]["path"])
    assert package.parent == Path(os.environ["ANEKIT_HOME"]) / "demo"


def test_version_command() -> None:
    result = CliRunner().invoke(cli, ["version", "--json"])
    assert result.exit_code == 0
    payload = json.loads(result.output)
    assert payload["coremltools"] == "9.0"
    assert "TraceError" in payload["error_codes"]
    assert "ANEKIT_HOME" in payload["environment"]


def test_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "out"
    blocker.write_text("a file where the demo wants a directory")
    result = CliRunner().invoke(cli, ["demo", "--out", str(blocker / "sub"), "--json"])
    assert result.exit_code == 2
    payload = json.loads(result.output)
    assert payload["error"] == "ProgramError"


def test_demo_simulates_the_saved_package(tmp_path: Path) -> None:
    result = demo.run(tmp_path)
    fidelity = result.fidelity
    assert fidelity.report.simulated
    assert fidelity.report.mode == "ane"
    assert fidelity.report.first_nonfinite is None
    # fp16 storage costs accuracy, but not much: the AppleNeuralEngine.jl announcement
    # reports 6.5e-4 relative error for this block on an M2 Max.
    assert 1e-5 < fidelity.max_relative_error < 5e-3
    assert fidelity.min_cosine > 0.9999
    payload = result.to_json()["fidelity"]
    assert payload["simulated"] is True
    assert payload["numerics"]["mode"] == "ane"


def test_simulate_command(tmp_path: Path) -> None:
    package = demo.run(tmp_path).package
    runner = CliRunner()
    text = runner.invoke(cli, ["simulate", str(package), "--top", "3"])
    assert text.exit_code == 0, text.output
    assert "no inf or NaN produced" in text.output
    assert "simulated" in text.output
    payload = json.loads(runner.invoke(cli, ["simulate", str(package), "--json"]).output)
    assert payload["simulated"] is True
    assert payload["outputs"] == [{"name": "output", "shape": [256, 512], "dtype": "float16"}]
    reference = json.loads(
        runner.invoke(cli, ["simulate", str(package), "--json", "--mode", "fp32"]).output
    )
    assert reference["mode"] == "fp32"


def test_simulate_command_exit_codes(tmp_path: Path) -> None:
    import numpy as np

    overflowing = anekit.compile(lambda x: np.exp(x) * 2, np.zeros((2, 8), np.float32))
    package = overflowing.save(tmp_path / "exp.mlpackage")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, x=np.full((2, 8), 20.0, np.float32))  # exp(20) > 65504
    runner = CliRunner()
    result = runner.invoke(cli, ["simulate", str(package), "--inputs", str(inputs)])
    assert result.exit_code == 1
    assert "first inf/NaN: " in result.output
    assert "[sim.nonfinite]" in result.output
    missing = runner.invoke(cli, ["simulate", str(tmp_path / "none.mlpackage"), "--json"])
    assert missing.exit_code == 2
    assert json.loads(missing.output)["error"] == "ProgramError"
    np.savez(inputs, y=np.zeros(3))
    wrong = runner.invoke(cli, ["simulate", str(package), "--inputs", str(inputs)])
    assert wrong.exit_code == 2
    assert "no array for input(s) x" in wrong.output
