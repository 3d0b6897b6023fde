"""Placement reports of whole programs: an ANE-layout encoder traced with anekit (all
on the ANE), coremltools' plain conversions of all-MiniLM-L6-v2 (not), the report's
stability and its JSON schema."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import anekit
from anekit.analysis import PlacementReport, analyze
from anekit.analysis.report import json_schema
from anekit.frontends.function_ref import resolve_function

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ane_attention.py"


def _encoder_program(layers: int = 3, channels: int = 128, sequence: int = 64) -> Any:
    make_encoder = resolve_function(f"{EXAMPLE}:make_encoder")
    example = resolve_function(f"{EXAMPLE}:example_input")
    encoder = make_encoder(channels=channels, heads=4, layers=layers)
    return anekit.compile(encoder, example(sequence=sequence, channels=channels))


@pytest.fixture(scope="module")
def encoder_report() -> PlacementReport:
    return analyze(_encoder_program())


def test_the_ane_layout_encoder_is_all_on_the_ane_for_every_family(
    encoder_report: PlacementReport,
) -> None:
    assert encoder_report.families == ["a14", "a15", "a17"]
    (function,) = encoder_report.functions
    compute = function.compute_ops()
    for family in encoder_report.families:
        assert function.on_ane(family) == len(compute)
        assert function.transitions(family) == 0
    assert encoder_report.all_on_ane
    assert function.findings == []
    assert all(op.findings == [] for op in compute)


def test_the_encoder_is_the_ane_recipe(encoder_report: PlacementReport) -> None:
    """1x1 convs, per-head softmax over the keys axis, layer_norm over channels."""
    (function,) = encoder_report.functions
    counts = Counter(op.op_type for op in function.compute_ops())
    assert counts["conv"] == 3 * 6
    assert counts["softmax"] == 3 * 4  # one per head and layer
    assert counts["layer_norm"] == 3 * 2
    assert "linear" not in counts
    outputs = {op.outputs for op in function.compute_ops() if op.op_type == "layer_norm"}
    assert outputs == {"fp16[1, 128, 1, 64]"}


def test_the_report_points_at_the_traced_source(encoder_report: PlacementReport) -> None:
    (function,) = encoder_report.functions
    located = [op.location for op in function.compute_ops() if op.location]
    assert located and all("ane_attention.py:" in location for location in located)


def test_a_row_layout_block_with_a_tiny_program_falls_back() -> None:
    """One small matmul is not worth an ANE dispatch: everything stays on the CPU."""
    import numpy as np

    weight = np.full((64, 64), 0.01, np.float16)
    program = anekit.compile(lambda x: np.tanh(x @ weight), np.zeros((8, 64), np.float16))
    report = analyze(program)
    (function,) = report.functions
    assert not report.all_on_ane
    assert {finding.rule for finding in function.findings} == {"program.too_small"}
    assert function.on_ane("a17") == 0


def test_the_same_program_gives_byte_identical_json() -> None:
    first = analyze(_encoder_program(layers=1)).dumps()
    second = analyze(_encoder_program(layers=1)).dumps()
    assert first == second
    assert json.loads(first)["schema"] == 1


def test_the_json_follows_the_documented_schema(encoder_report: PlacementReport) -> None:
    jsonschema.validate(json.loads(encoder_report.dumps()), json_schema())


def test_the_schema_rejects_a_malformed_report(encoder_report: PlacementReport) -> None:
    payload = json.loads(encoder_report.dumps())
    payload["functions"][0]["ops"][0]["device"]["a14"] = "tpu"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(payload, json_schema())


def test_markdown_lists_every_compute_op(encoder_report: PlacementReport) -> None:
    text = encoder_report.to_markdown()
    (function,) = encoder_report.functions
    assert f"{len(function.compute_ops())} of {len(function.compute_ops())} compute ops" in text
    for op in function.compute_ops():
        assert f"| {op.name} | {op.op_type} |" in text


def test_a_saved_package_reports_like_the_traced_program(
    tmp_path: Path, encoder_report: PlacementReport
) -> None:
    program = _encoder_program()
    path = program.save(tmp_path / "encoder.mlpackage")
    from_package = analyze(path)
    (function,) = from_package.functions
    (traced,) = encoder_report.functions
    assert from_package.all_on_ane
    assert Counter(op.op_type for op in function.compute_ops()) == Counter(
        op.op_type for op in traced.compute_ops()
    )


# --- all-MiniLM-L6-v2, coremltools' plain conversion (torch extra) ------------------------


@pytest.fixture(scope="module")
def minilm_flexible(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    import minilm

    directory = tmp_path_factory.mktemp("minilm-flexible")
    return minilm.convert(directory / "flexible.mlpackage", precision="fp16", flexible_length=True)


def test_minilm_with_flexible_length_is_reported_with_its_fallbacks(
    minilm_flexible: Path,
) -> None:
    report = analyze(minilm_flexible)
    (function,) = report.functions
    compute = function.compute_ops()
    rules = Counter(rule for op in compute for rule in op.rules)
    assert rules["shape.dynamic"] > len(compute) // 2  # the flexible sequence axis
    assert rules["shape.plumbing"] >= 1  # shape ops feeding slices and reshapes
    assert rules["op.tile"] >= 1
    gathers = [op for op in compute if op.op_type.startswith("gather")]
    assert gathers and all("op.table" in op.rules for op in gathers)
    assert {finding.rule for finding in function.findings} >= {"io.int_input", "weights.sram"}
    assert not report.all_on_ane
    for family in report.families:
        # coremltools#2370 measured 0-2 % on the ANE for RangeDim models.
        assert function.fallbacks(family) > 0.9 * len(compute)


def test_minilm_report_is_stable_across_reads(minilm_flexible: Path) -> None:
    """Symbolic dimensions get fresh names on every read; the report renames them."""
    first = analyze(minilm_flexible).dumps()
    second = analyze(minilm_flexible).dumps()
    assert first == second
    assert "s0]" in first
    assert re.search(r"[\[ ]is\d+[\],]", first) is None  # coremltools' own symbol names


def test_minilm_at_a_fixed_shape_loses_the_dynamic_findings(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import minilm

    path = minilm.convert(tmp_path / "fixed.mlpackage", precision="fp16", length=128)
    report = analyze(path)
    (function,) = report.functions
    rules = Counter(rule for op in function.compute_ops() for rule in op.rules)
    assert rules["shape.dynamic"] == 0
    assert rules["shape.plumbing"] == 0
    assert any(op.op_type == "gather" and "op.table" in op.rules for op in function.compute_ops())
    for family in report.families:
        assert function.on_ane(family) > 0.9 * len(function.compute_ops())
