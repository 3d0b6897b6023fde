"""``anekit doctor`` and ``anekit ops``: outputs, exit codes, errors, and the compute-plan
merge (off macOS through tests/standins.py's contract-enforcing stand-ins for
coremltools' ``compile_model`` and Core ML's compute plan, under anekit's real calls;
the real ones in tests marked ``macos``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

import anekit
from anekit._coremltools import ct
from anekit.analysis import analyze, compute_plan
from anekit.cli import cli
from anekit.errors import PlacementError
from standins import CoreMLComputePlan, CoreMLTools

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ane_attention.py"
ENCODER = f"{EXAMPLE}:make_encoder"


def _doctor(*args: str) -> Result:
    return CliRunner().invoke(cli, ["doctor", *args], catch_exceptions=False)


def _small_encoder(layers: int = 3) -> Any:
    from anekit.frontends.function_ref import resolve_function

    encoder = resolve_function(ENCODER)(channels=64, heads=2, layers=layers)
    x = np.zeros((1, 64, 1, 32), np.float16)
    return anekit.compile(encoder, x)


@pytest.fixture(scope="module")
def encoder_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doctor") / "encoder.mlpackage"
    return Path(_small_encoder().save(path))


@pytest.fixture(scope="module")
def tiny_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-matmul program: too small for the ANE, so every op falls back."""
    weight = np.full((64, 64), 0.01, np.float16)
    program = anekit.compile(lambda x: np.tanh(x @ weight), np.zeros((8, 64), np.float16))
    return Path(program.save(tmp_path_factory.mktemp("doctor") / "tiny.mlpackage"))


# --- doctor ------------------------------------------------------------------------------


def test_doctor_on_a_traced_function_exits_0_when_all_ops_are_on_the_ane() -> None:
    result = _doctor(f"{EXAMPLE}:encoder", "--shape", "x=1,256,1,64:float16")
    assert result.exit_code == 0, result.output
    assert "compute ops expected on the ANE (a14); 0 ANE/CPU transitions" in result.output
    assert "Ops with findings" not in result.output


def test_doctor_accepts_unnamed_shapes_in_parameter_order() -> None:
    result = _doctor(f"{EXAMPLE}:encoder", "--shape", "1x256x1x64", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["all_on_ane"] is True


def test_doctor_exits_1_and_explains_fallbacks(tiny_package: Path) -> None:
    result = _doctor(str(tiny_package))
    assert result.exit_code == 1
    assert "program.too_small" in result.output
    assert "fix:" in result.output


def test_doctor_json_is_the_library_report_byte_for_byte(tiny_package: Path) -> None:
    result = _doctor(str(tiny_package), "--json")
    assert result.exit_code == 1
    assert result.output == analyze(tiny_package).dumps()


def test_doctor_markdown(encoder_package: Path) -> None:
    result = _doctor(str(encoder_package), "--markdown", "--family", "a17")
    assert result.exit_code == 0
    assert result.output.startswith(f"# Placement report: {encoder_package}")
    assert "| op | type | a17 | rules |" in result.output


def test_doctor_all_lists_every_op(encoder_package: Path) -> None:
    result = _doctor(str(encoder_package), "--all", "--family", "a14")
    assert result.exit_code == 0
    assert "softmax" in result.output and "layer_norm" in result.output


def test_doctor_strict_fails_on_risks() -> None:
    """A sequence of 16 is narrower than the ANE's 64-byte rows: a risk, not a fallback,
    and one that the pad_io_width pass removes."""
    args = [f"{EXAMPLE}:encoder", "--shape", "x=1,256,1,16", "--no-passes"]
    assert _doctor(*args).exit_code == 0
    strict = _doctor(*args, "--strict")
    assert strict.exit_code == 1
    assert "io.narrow" in strict.output
    assert _doctor(*args[:-1], "--strict").exit_code == 0


def _two_function_package(tmp_path: Path, encoder: Any) -> Path:
    """A multifunction package: ``encoder`` (the default function) and a tiny matmul."""
    short = encoder.save(tmp_path / "short.mlpackage")
    weight = np.full((64, 64), 0.01, np.float16)
    tiny = anekit.compile(lambda x: np.tanh(x @ weight), np.zeros((8, 64), np.float16))
    tiny_path = tiny.save(tmp_path / "tiny.mlpackage")
    descriptor = ct.utils.MultiFunctionDescriptor()
    descriptor.add_function(str(short), src_function_name="main", target_function_name="encoder")
    descriptor.add_function(str(tiny_path), src_function_name="main", target_function_name="tiny")
    descriptor.default_function_name = "encoder"
    combined = tmp_path / "both.mlpackage"
    ct.utils.save_multifunction(descriptor, str(combined))
    return combined


def test_doctor_reports_each_function_of_a_multifunction_package(tmp_path: Path) -> None:
    combined = _two_function_package(tmp_path, _small_encoder())

    result = _doctor(str(combined), "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    totals = {item["name"]: item["totals"]["a14"] for item in report["functions"]}
    assert set(totals) == {"encoder", "tiny"}
    assert totals["encoder"]["fallback"] == 0
    assert totals["tiny"]["ane"] == 0
    only = _doctor(str(combined), "--function", "encoder", "--json")
    assert only.exit_code == 0
    assert [item["name"] for item in json.loads(only.output)["functions"]] == ["encoder"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.mlpackage"], "no such file or directory"),
        (["model.onnx"], "expected an .mlpackage"),
        ([f"{EXAMPLE}:encoder"], "give the example input shapes"),
        ([f"{EXAMPLE}:encoder", "--shape", "x=1,a,1"], "dimensions must be integers"),
        ([f"{EXAMPLE}:encoder", "--shape", "y=1,256,1,64"], "does not take"),
        ([f"{EXAMPLE}:encoder", "--shape", "x=1,256,1,64:complex64"], "float16, float32 or int32"),
        ([f"{EXAMPLE}:nothing", "--shape", "1,2"], "has no attribute 'nothing'"),
        (["no_such_module_anywhere:fn", "--shape", "1,2"], "cannot import it"),
        ([f"{EXAMPLE}:encoder", "--shape", "1,256,1,64", "--family", "a99"], "unknown ANE family"),
    ],
)
def test_doctor_errors_exit_2_with_a_clear_message(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"")
    result = CliRunner().invoke(cli, ["doctor", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_doctor_errors_as_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["doctor", str(tmp_path / "gone.mlpackage"), "--json"])
    assert result.exit_code == 2
    payload = json.loads(result.output)
    assert payload["error"] == "ProgramError"


def test_doctor_shape_and_function_options_are_checked(encoder_package: Path) -> None:
    with_shape = CliRunner().invoke(cli, ["doctor", str(encoder_package), "--shape", "1,2"])
    assert with_shape.exit_code == 2 and "--shape applies to module:function" in with_shape.output
    traced = CliRunner().invoke(
        cli, ["doctor", f"{EXAMPLE}:encoder", "--shape", "1,256,1,64", "--function", "main"]
    )
    assert traced.exit_code == 2 and "--function applies to packages" in traced.output


def test_report_disagreements_needs_a_compute_plan(
    encoder_package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compute_plan, "available", lambda: False)
    result = CliRunner().invoke(
        cli, ["doctor", str(encoder_package), "--report-disagreements", str(tmp_path / "d.json")]
    )
    assert result.exit_code == 2
    assert "needs Core ML's compute plan" in result.output


# --- the compute plan, with the stand-ins for coremltools and Core ML -------------------


@dataclass
class Mac:
    """A Mac as far as ``anekit doctor`` goes: coremltools' ``compile_model`` and Core ML's
    compute plan are the contract-enforcing stand-ins of tests/standins.py."""

    tools: CoreMLTools
    plan: CoreMLComputePlan
    #: function name -> first output name of the op the plan moved to the CPU
    moved: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def mac(monkeypatch: pytest.MonkeyPatch) -> Mac:
    """macOS 15.5 on an Apple M1 Pro; Core ML's plan puts each function's first softmax
    on the CPU and every other op on the ANE."""
    moved: dict[str, str] = {}

    def place(function: str, operation: Any) -> str:
        if operation.operator_name == "softmax" and function not in moved:
            moved[function] = operation.outputs[0].name
            return "cpu"
        return "ane"

    monkeypatch.setattr(compute_plan, "core_ml_runtime_available", lambda: True)
    monkeypatch.setattr(compute_plan, "chip", lambda: "Apple M1 Pro")
    tools = CoreMLTools().install(monkeypatch)
    return Mac(tools, CoreMLComputePlan(place=place).install(monkeypatch), moved)


def _op_named_by_output(package: Path, output: str) -> str:
    (op,) = [
        op for op in analyze(package).functions[0].ops if list(op.output_names[:1]) == [output]
    ]
    return str(op.name)


def test_doctor_shows_actual_devices_and_highlights_disagreements(
    encoder_package: Path, mac: Mac, tmp_path: Path
) -> None:
    out = tmp_path / "disagreements.json"
    result = _doctor(str(encoder_package), "--report-disagreements", str(out))
    assert result.exit_code == 0  # the prediction still says all on the ANE
    assert "actual" in result.output
    assert _op_named_by_output(encoder_package, mac.moved["main"]) in result.output
    assert "landed elsewhere than predicted" in result.output
    written = json.loads(out.read_text())
    assert written["family"] == "a14"
    assert written["chip"] == "Apple M1 Pro"
    assert written["macos"] == "15.5"
    [item] = written["disagreements"]
    assert item["type"] == "softmax" and item["predicted"] == "ane" and item["actual"] == "cpu"
    assert item["op"] == _op_named_by_output(encoder_package, mac.moved["main"])


def test_doctor_json_carries_the_actual_device(encoder_package: Path, mac: Mac) -> None:
    result = _doctor(str(encoder_package), "--json")
    report = json.loads(result.output)
    actual = {op["name"]: op["actual"] for op in report["functions"][0]["ops"]}
    assert actual[_op_named_by_output(encoder_package, mac.moved["main"])] == "cpu"
    assert any("compute plan on Apple M1 Pro" in note for note in report["notes"])
    compute = [op for op in report["functions"][0]["ops"] if op["compute"]]
    assert compute and all(op["actual"] in ("ane", "cpu") for op in compute)


def test_the_compute_plan_reads_a_compiled_model_that_is_removed_after(
    encoder_package: Path, mac: Mac
) -> None:
    """MLComputePlan.load_from_path takes the compiled .mlmodelc (not the package),
    compiled to a destination anekit owns and removes once the plan is read."""
    assert _doctor(str(encoder_package), "--json").exit_code == 0
    [(source, destination)] = mac.tools.compiles
    assert source == str(encoder_package)
    assert destination is not None and destination.endswith(".mlmodelc")
    assert mac.plan.loads == [(destination, "CPU_AND_NE")]
    assert not Path(destination).exists(), "the compiled model was left behind"


def test_doctor_saves_a_traced_function_for_the_compute_plan(mac: Mac) -> None:
    result = _doctor(f"{EXAMPLE}:encoder", "--shape", "x=1,256,1,64", "--json")
    assert result.exit_code == 0, result.output
    [(source, _)] = mac.tools.compiles
    assert Path(source).suffix == ".mlpackage" and not Path(source).exists()
    ops = json.loads(result.output)["functions"][0]["ops"]
    assert all(op["actual"] is not None for op in ops if op["compute"])


def test_no_plan_skips_the_compute_plan(encoder_package: Path, mac: Mac) -> None:
    result = _doctor(str(encoder_package), "--no-plan", "--json")
    assert all(op["actual"] is None for op in json.loads(result.output)["functions"][0]["ops"])
    assert mac.tools.compiles == [] and mac.plan.loads == []


def test_doctor_skips_the_compute_plan_before_macos_14_4(
    encoder_package: Path, mac: Mac, tmp_path: Path
) -> None:
    """coremltools raises "MLComputePlan is only available on macOS >= 14.4" there:
    doctor shows the prediction alone instead of failing."""
    mac.plan.macos = "14.3"
    assert not compute_plan.available()
    result = _doctor(str(encoder_package), "--json")
    assert result.exit_code == 0, result.output
    assert all(op["actual"] is None for op in json.loads(result.output)["functions"][0]["ops"])
    assert mac.tools.compiles == [] and mac.plan.loads == []
    out = tmp_path / "d.json"
    refused = CliRunner().invoke(
        cli, ["doctor", str(encoder_package), "--report-disagreements", str(out)]
    )
    assert refused.exit_code == 2 and "macOS 14.4 or later" in refused.output
    with pytest.raises(PlacementError, match=r"macOS 14\.4 or later"):
        compute_plan.actual_devices(encoder_package)


def test_actual_devices_reads_every_function_with_the_compute_units_asked(
    tmp_path: Path, mac: Mac
) -> None:
    combined = _two_function_package(tmp_path, _small_encoder(layers=1))

    mac.plan.place = None  # the default: the ANE where the compute units allow it, else the GPU
    devices = compute_plan.actual_devices(combined, "CPU_AND_GPU")
    assert mac.plan.loads[-1][1] == "CPU_AND_GPU"
    assert set(devices) == {"encoder", "tiny"}
    assert set(devices["tiny"].values()) == {"gpu"} and "output" in devices["tiny"]
    report = analyze(combined)
    for function in report.functions:
        compute = {op.output_names[0] for op in function.compute_ops()}
        assert compute <= set(devices[function.name])
        consts = {op.output_names[0] for op in function.ops if op.op_type == "const"}
        assert not consts & set(devices[function.name]), "const ops have no device"
    assert set(compute_plan.actual_devices(combined, "ALL")["tiny"].values()) == {"ane"}
    with pytest.raises(PlacementError, match="compute units must be one of"):
        compute_plan.actual_devices(combined, "NE")


def test_the_compute_plan_of_an_mlmodel_file(tmp_path: Path, mac: Mac) -> None:
    program = anekit.compile(lambda x: np.tanh(x) * 2 + 1, np.zeros((8, 64), np.float16))
    package = program.save(tmp_path / "small.mlpackage")
    spec = ct.models.MLModel(str(package), skip_model_load=True).get_spec()
    path = tmp_path / "small.mlmodel"
    ct.utils.save_spec(spec, str(path))
    devices = compute_plan.actual_devices(path)
    assert mac.tools.compiles[0][0] == str(path)
    assert set(devices["main"].values()) == {"ane"} and "output" in devices["main"]


def test_a_compute_plan_failure_is_a_placement_error(tmp_path: Path, mac: Mac) -> None:
    mac.tools.fail_compile = "bad weights"
    program = anekit.compile(lambda x: np.tanh(x), np.zeros((8, 64), np.float16))
    package = program.save(tmp_path / "small.mlpackage")
    with pytest.raises(PlacementError, match=r"could not build a compute plan: .*bad weights"):
        compute_plan.actual_devices(package)


@pytest.mark.parametrize(
    ("chip", "family"),
    [
        ("Apple M1", "a14"),
        ("Apple M1 Max", "a14"),
        ("Apple M2 Pro", "a15"),
        ("Apple M3 Max", "a15"),
        ("Apple M4", "a17"),
        ("Apple M5 Pro", "a17"),
        ("Intel(R) Core(TM) i9", None),
    ],
)
def test_chip_names_map_to_op_table_families(chip: str, family: str | None) -> None:
    assert compute_plan.family_of(chip) == family


@pytest.mark.macos
def test_the_real_compute_plan_places_every_compute_op(encoder_package: Path) -> None:
    """Unverified in CI (no Mac): Core ML's plan names a device for every compute op."""
    devices = compute_plan.actual_devices(encoder_package)
    report = analyze(encoder_package)
    names = {op.output_names[0] for op in report.functions[0].compute_ops()}
    assert names <= set(devices["main"])
    assert set(devices["main"].values()) <= {"ane", "gpu", "cpu"}


@pytest.mark.macos
def test_doctor_on_a_mac_writes_disagreements(encoder_package: Path, tmp_path: Path) -> None:
    out = tmp_path / "disagreements.json"
    result = _doctor(str(encoder_package), "--report-disagreements", str(out))
    assert result.exit_code in (0, 1)
    written = json.loads(out.read_text())
    assert written["kind"] == "anekit placement disagreements"
    assert isinstance(written["disagreements"], list)


# --- ops ---------------------------------------------------------------------------------


def test_ops_json_lists_the_table() -> None:
    result = CliRunner().invoke(cli, ["ops", "--json"])
    assert result.exit_code == 0
    payload = json.loads(result.output)
    assert set(payload["families"]) == {"a14", "a15", "a17"}
    by_op = {row["op"]: row for row in payload["ops"]}
    assert by_op["conv"]["families"]["a14"]["condition"] == "const_weight"
    assert by_op["cast"]["families"]["a17"]["verdict"] == "ane"
    assert by_op["cast"]["dispute"]


def test_ops_filters_by_family_and_verdict() -> None:
    result = CliRunner().invoke(cli, ["ops", "--family", "a14", "--verdict", "cpu", "--json"])
    rows = json.loads(result.output)["ops"]
    assert rows and all(row["families"]["a14"]["verdict"] == "cpu" for row in rows)
    assert list(rows[0]["families"]) == ["a14"]
    table = CliRunner().invoke(cli, ["ops", "--family", "a14", "--verdict", "cpu"])
    assert table.exit_code == 0 and "argsort" in table.output


def test_ops_markdown_is_docs_op_support() -> None:
    result = CliRunner().invoke(cli, ["ops", "--markdown"])
    assert result.output == (ROOT / "docs" / "op-support.md").read_text()


def test_ops_rejects_an_unknown_family() -> None:
    result = CliRunner().invoke(cli, ["ops", "--family", "m9"])
    assert result.exit_code == 2
    assert "unknown ANE family m9" in result.output


def test_doctor_reads_an_mlprogram_mlmodel_file(tmp_path: Path) -> None:
    """A weight-free ML program can live in a single .mlmodel file."""
    program = anekit.compile(lambda x: np.tanh(x) * 2 + 1, np.zeros((8, 64), np.float16))
    package = program.save(tmp_path / "small.mlpackage")
    spec = ct.models.MLModel(str(package), skip_model_load=True).get_spec()
    path = tmp_path / "small.mlmodel"
    ct.utils.save_spec(spec, str(path))
    result = _doctor(str(path), "--json")
    assert result.exit_code == 1  # three elementwise ops: too small for the ANE
    report = json.loads(result.output)
    assert [op["type"] for op in report["functions"][0]["ops"] if op["compute"]] == [
        "tanh",
        "mul",
        "add",
    ]
