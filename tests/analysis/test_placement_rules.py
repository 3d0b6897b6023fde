"""Each constraint rule: a small MIL program that trips it, and one that does not.

Programs are built with coremltools' MIL builder and analysed as they are (no
passes), so each test controls exactly which ops the analysis sees. ``_body``
wraps the op under test in three 1x1 convolutions on a (1, 64, 1, 64) fp16
activation, so that the program-level rules stay quiet unless a test wants them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import get_new_symbol, types

from anekit._coremltools import ct
from anekit.analysis import RULES, PlacementReport, analyze, package_facts
from anekit.analysis.analyzer import PackageFacts, analyze_program
from anekit.analysis.report import FunctionReport, OpPlacement
from anekit.analysis.rules import OP_CHECKS, PROGRAM_CHECKS, placement_rules

FP16 = types.fp16
SHAPE = (1, 64, 1, 64)
TARGET = ct.target.iOS18


def _conv(x: Any, channels: int = 64, seed: int = 0) -> Any:
    in_channels = int(x.shape[1])
    weight = np.random.default_rng(seed).standard_normal((channels, in_channels, 1, 1)) * 0.1
    return mb.conv(x=x, weight=weight.astype(np.float16))


def _body(core: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Three convolutions around ``core``: enough work to be worth an ANE dispatch."""

    def body(x: Any) -> Any:
        x = _conv(x, seed=1)
        x = core(x)
        x = _conv(x, seed=2)
        return _conv(x, seed=3)

    return body


def _program(
    core: Callable[..., Any],
    shapes: tuple[tuple[Any, ...], ...] = (SHAPE,),
    dtypes: tuple[Any, ...] = (FP16,),
    wrap: bool = True,
) -> Any:
    specs = [mb.TensorSpec(shape, dtype=dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
    function: Callable[..., Any] = _body(core) if wrap else core
    build = mb.program(input_specs=specs, opset_version=TARGET)
    # mb.program reads the parameter names, so one wrapper per arity.
    if len(specs) == 1:

        def one(x: Any) -> Any:
            return function(x)

        return build(one)

    def two(x: Any, y: Any) -> Any:
        return function(x, y)

    return build(two)


def _report(program: Any, **kwargs: Any) -> FunctionReport:
    report: PlacementReport = analyze_program(program, source="test", **kwargs)
    return report.functions[0]


def _op_rules(function: FunctionReport) -> set[str]:
    return {rule for op in function.compute_ops() for rule in op.rules}


def _program_rules(function: FunctionReport) -> set[str]:
    return {finding.rule for finding in function.findings}


def _op(function: FunctionReport, op_type: str) -> OpPlacement:
    return next(op for op in function.compute_ops() if op.op_type == op_type)


def test_the_baseline_program_trips_no_rule() -> None:
    function = _report(_program(lambda x: mb.relu(x=x)))
    assert _op_rules(function) == set()
    assert _program_rules(function) == set()
    assert function.fallbacks("a14") == 0


# --- op.table -------------------------------------------------------------------------


def test_op_table_cpu_verdict_trips_and_ane_verdict_does_not() -> None:
    tripped = _report(_program(lambda x: mb.topk(x=x, k=64, axis=1)[0]))
    topk = _op(tripped, "topk")
    assert "op.table" in topk.rules
    assert set(topk.device.values()) == {"cpu"}
    clean = _report(_program(lambda x: mb.sigmoid(x=x)))
    assert _op(clean, "sigmoid").rules == []


def test_op_table_ane_if_condition_is_checked() -> None:
    """conv needs a constant weight: a runtime weight compiles but is ignored (SKY)."""

    def runtime_weight(x: Any, w: Any) -> Any:
        return mb.conv(x=x, weight=w)

    tripped = _report(
        _program(runtime_weight, shapes=(SHAPE, (64, 64, 1, 1)), dtypes=(FP16, FP16), wrap=False)
    )
    conv = _op(tripped, "conv")
    assert "op.table" in conv.rules
    assert "compile-time constant" in conv.reason("a14")
    clean = _report(_program(lambda x: mb.relu(x=x)))
    assert all(op.device["a14"] == "ane" for op in clean.compute_ops() if op.op_type == "conv")


def test_op_table_decompose_verdict_gives_the_rewrite() -> None:
    function = _report(
        _program(lambda x: mb.acos(x=mb.clip(x=x, alpha=np.float16(-0.5), beta=np.float16(0.5))))
    )
    acos = _op(function, "acos")
    assert acos.table["a14"] == "decompose"
    assert "rewrite:" in acos.fix("a14")


def test_op_table_verdicts_differ_by_family() -> None:
    """cast is disputed before A17 (conservatively off the ANE) and runs on A17+."""
    function = _report(
        _program(lambda x: mb.cast(x=mb.cast(x=x, dtype="fp32"), dtype="fp16")),
        families=["a14", "a17"],
    )
    cast = _op(function, "cast")
    assert cast.device == {"a14": "cpu", "a17": "ane"}
    table_findings = [finding for finding in cast.findings if finding.rule == "op.table"]
    assert table_findings and table_findings[0].families == ("a14",)
    assert "disputed" in table_findings[0].message


# --- shapes ---------------------------------------------------------------------------


def test_shape_dynamic_trips_on_a_flexible_dimension() -> None:
    flexible = (1, 64, 1, get_new_symbol())
    tripped = _report(_program(lambda x: mb.relu(x=x), shapes=(flexible,)))
    assert "shape.dynamic" in _op(tripped, "relu").rules
    assert tripped.fallbacks("a14") == len(tripped.compute_ops())
    clean = _report(_program(lambda x: mb.relu(x=x)))
    assert "shape.dynamic" not in _op_rules(clean)


def test_shape_plumbing_trips_on_runtime_shapes_only() -> None:
    def reshape_to_own_shape(x: Any) -> Any:
        return mb.reshape(x=x, shape=mb.shape(x=x))

    flexible = (1, 64, 1, get_new_symbol())
    tripped = _report(_program(reshape_to_own_shape, shapes=(flexible,)))
    assert "shape.plumbing" in _op(tripped, "shape").rules
    assert "shape.plumbing" in _op(tripped, "reshape").rules
    # With static shapes the shape op is known at compile time and folded away.
    clean = _report(_program(reshape_to_own_shape))
    assert "shape.plumbing" not in _op_rules(clean)
    assert not any(op.op_type == "shape" for op in clean.compute_ops())


def test_shape_enumerated_trips_for_enumerated_inputs() -> None:
    program = _program(lambda x: mb.relu(x=x))
    tripped = _report(program, package=PackageFacts(enumerated_inputs=("x",)))
    assert "shape.enumerated" in _program_rules(tripped)
    assert tripped.on_ane("a17") == 0
    assert "shape.enumerated" not in _program_rules(_report(program))


def test_package_facts_reads_enumerated_shapes_from_a_package(tmp_path: Path) -> None:
    program = _program(lambda x: mb.relu(x=x), shapes=((1, 64, 1, get_new_symbol()),))
    model = ct.convert(
        program,
        inputs=[
            ct.TensorType("x", shape=ct.EnumeratedShapes(shapes=[(1, 64, 1, 64), (1, 64, 1, 128)]))
        ],
        minimum_deployment_target=TARGET,
        compute_precision=ct.precision.FLOAT16,
        skip_model_load=True,
    )
    path = tmp_path / "enumerated.mlpackage"
    model.save(str(path))
    facts = package_facts(path, model.get_spec())
    assert facts.enumerated_inputs == ("x",)
    assert facts.size_bytes is not None and facts.size_bytes > 0
    report = analyze(path)
    assert "shape.enumerated" in _program_rules(report.functions[0])


def test_rank_5_trips_on_rank_5_tensors() -> None:
    def rank5(x: Any) -> Any:
        y = mb.reshape(x=x, shape=(1, 4, 16, 1, 64))
        return mb.reshape(x=mb.relu(x=y), shape=SHAPE)

    tripped = _report(_program(rank5))
    assert "rank.5" in _op(tripped, "relu").rules
    assert "rank.5" not in _op_rules(_report(_program(lambda x: mb.relu(x=x))))


def test_axis_limit_trips_above_65536() -> None:
    long_axis = (1, 8, 1, 65600)
    tripped = _report(_program(lambda x: mb.relu(x=x), shapes=(long_axis,)))
    assert "shape.axis_limit" in _op(tripped, "relu").rules
    at_limit = _report(_program(lambda x: mb.relu(x=x), shapes=((1, 8, 1, 65536),)))
    assert "shape.axis_limit" not in _op_rules(at_limit)


# --- dtypes and I/O -------------------------------------------------------------------


def test_dtype_fp32_trips_on_fp32_compute() -> None:
    tripped = _report(_program(lambda x: mb.relu(x=x), dtypes=(types.fp32,), wrap=False))
    assert "dtype.fp32" in _op(tripped, "relu").rules
    assert "dtype.fp32" not in _op_rules(_report(_program(lambda x: mb.relu(x=x))))


def test_dtype_int_trips_on_integer_compute_but_not_on_shape_operands() -> None:
    def integer_add(x: Any, ids: Any) -> Any:
        summed = mb.add(x=ids, y=np.int32(1))
        return mb.add(x=x, y=mb.cast(x=summed, dtype="fp16"))

    tripped = _report(
        _program(integer_add, shapes=(SHAPE, SHAPE), dtypes=(FP16, types.int32), wrap=False)
    )
    integer_ops = [op for op in tripped.compute_ops() if "dtype.int" in op.rules]
    assert [op.op_type for op in integer_ops] == ["add"]
    # reshape takes an int32 shape operand but computes in fp16.
    clean = _report(_program(lambda x: mb.reshape(x=x, shape=(1, 64, 1, 64))))
    assert "dtype.int" not in _op_rules(clean)


def test_io_int_input_trips_on_integer_inputs() -> None:
    def ids_plus(x: Any, ids: Any) -> Any:
        return mb.add(x=x, y=mb.cast(x=ids, dtype="fp16"))

    tripped = _report(
        _program(ids_plus, shapes=(SHAPE, SHAPE), dtypes=(FP16, types.int32), wrap=False)
    )
    assert "io.int_input" in _program_rules(tripped)
    assert "io.int_input" not in _program_rules(_report(_program(lambda x: mb.relu(x=x))))


def test_io_narrow_trips_below_32_values_on_the_last_axis() -> None:
    tripped = _report(_program(lambda x: mb.relu(x=x), shapes=((1, 64, 1, 16),)))
    assert "io.narrow" in _program_rules(tripped)
    assert RULES["io.narrow"].severity == "risk"
    at_32 = _report(_program(lambda x: mb.relu(x=x), shapes=((1, 64, 1, 32),)))
    assert "io.narrow" not in _program_rules(at_32)


# --- ops with their own rules ---------------------------------------------------------


def test_tile_trips() -> None:
    def tiled(x: Any) -> Any:
        half = mb.slice_by_index(x=x, begin=[0, 0, 0, 0], end=[1, 64, 1, 32])
        return mb.tile(x=half, reps=[1, 1, 1, 2])

    tripped = _report(_program(tiled))
    assert "op.tile" in _op(tripped, "tile").rules
    assert "op.tile" not in _op_rules(_report(_program(lambda x: mb.relu(x=x))))


def test_conv_kernel_width_trips_at_16() -> None:
    def wide_kernel(width: int) -> Callable[[Any], Any]:
        def conv(x: Any) -> Any:
            weight = np.full((64, 64, 1, width), 0.01, np.float16)
            return mb.conv(x=x, weight=weight, pad_type="same")

        return conv

    tripped = _report(_program(wide_kernel(16)))
    assert any("conv.kernel_width" in op.rules for op in tripped.compute_ops())
    assert "conv.kernel_width" not in _op_rules(_report(_program(wide_kernel(15))))


def _attention(queries: int, keys: int) -> Callable[[Any, Any], Any]:
    def attention(q: Any, k: Any) -> Any:
        scores = mb.matmul(x=q, y=k, transpose_y=True)
        weights = mb.softmax(x=mb.mul(x=scores, y=np.float16(0.125)), axis=-1)
        return mb.matmul(x=weights, y=k)

    return attention


def test_attention_score_size_trips_at_2_pow_20_per_head() -> None:
    big = (1, 2, 1024, 64)  # 2 heads, 1024 x 1024 scores each: 2^20
    tripped = _report(
        _program(_attention(1024, 1024), shapes=(big, big), dtypes=(FP16, FP16), wrap=False)
    )
    softmax = _op(tripped, "softmax")
    assert "attention.score_size" in softmax.rules
    assert "1048576" in softmax.reason("a14")
    small = (1, 2, 512, 64)
    clean = _report(
        _program(_attention(512, 512), shapes=(small, small), dtypes=(FP16, FP16), wrap=False)
    )
    assert "attention.score_size" not in _op_rules(clean)


def test_state_trips() -> None:
    def stateful(state: Any, x: Any) -> Any:
        value = mb.add(x=mb.read_state(input=state), y=x)
        mb.coreml_update_state(state=state, value=value)
        return value

    specs = [mb.StateTensorSpec((1, 64), dtype=FP16), mb.TensorSpec((1, 64), dtype=FP16)]
    function = _report(mb.program(input_specs=specs, opset_version=TARGET)(stateful))
    assert "state" in _op(function, "read_state").rules
    assert "state" in _op(function, "coreml_update_state").rules
    assert "state" not in _op_rules(_report(_program(lambda x: mb.relu(x=x))))


def test_control_flow_trips_on_cond_and_the_ops_inside_it() -> None:
    def branchy(x: Any) -> Any:
        positive = mb.greater(x=mb.reduce_sum(x=x, axes=[0, 1, 2, 3]), y=np.float16(0))
        return mb.cond(
            pred=positive, _true_fn=lambda: mb.relu(x=x), _false_fn=lambda: mb.sigmoid(x=x)
        )

    function = _report(_program(branchy))
    assert "control_flow" in _op(function, "cond").rules
    inner = _op(function, "sigmoid")
    assert "control_flow" in inner.rules
    assert inner.device["a17"] == "cpu"
    assert "control_flow" not in _op_rules(_report(_program(lambda x: mb.relu(x=x))))


def test_weights_compressed_is_a_risk() -> None:
    def compressed(x: Any) -> Any:
        weight = mb.constexpr_affine_dequantize(
            quantized_data=np.ones((64, 64, 1, 1), np.int8),
            zero_point=np.int8(0),
            scale=np.float16(0.01),
            axis=0,
        )
        return mb.conv(x=x, weight=weight)

    function = _report(_program(compressed))
    assert "weights.compressed" in _op_rules(function)
    assert RULES["weights.compressed"].severity == "risk"
    assert function.fallbacks("a17") == 0  # a risk does not move the op
    assert "weights.compressed" not in _op_rules(_report(_program(lambda x: mb.relu(x=x))))


def _palette(scale: bool) -> Callable[..., Any]:
    """A conv whose weight is a 4-bit palette (iOS18 constexpr_lut_to_dense), with or
    without a per-channel scale after it (what enable_per_channel_scale emits)."""

    def core(x: Any) -> Any:
        indices = (np.arange(64 * 64) % 16).astype(types.np_uint4_dtype).reshape(64, 64, 1, 1)
        lut = np.linspace(-1, 1, 16, dtype=np.float16).reshape(1, 1, 1, 1, 16, 1)
        weight = mb.constexpr_lut_to_dense(indices=indices, lut=lut)
        if scale:
            per_channel = np.full((64, 1, 1, 1), 0.5, np.float16)
            weight = mb.constexpr_blockwise_shift_scale(data=weight, scale=per_channel)
        return mb.conv(x=x, weight=weight)

    return core


def test_a_palette_is_not_flagged_but_a_scaled_palette_is() -> None:
    plain = _op_rules(_report(_program(_palette(scale=False))))
    assert "weights.palette_scale" not in plain and "weights.compressed" not in plain
    scaled = _report(_program(_palette(scale=True)))
    assert "weights.palette_scale" in _op_rules(scaled)
    assert "weights.compressed" not in _op_rules(scaled)  # a palette, not an int weight
    assert RULES["weights.palette_scale"].severity == "risk"
    (message,) = [
        finding.message
        for op in scaled.compute_ops()
        for finding in op.findings
        if finding.rule == "weights.palette_scale"
    ]
    assert "constexpr_lut_to_dense -> constexpr_blockwise_shift_scale" in message


# --- program-level rules --------------------------------------------------------------


def test_weights_sram_trips_above_32_mb() -> None:
    def big_weights(x: Any) -> Any:
        weight = np.zeros((4160, 64, 1, 1), np.float16)  # 0.5 MB
        wide = mb.conv(x=x, weight=weight)
        return mb.conv(x=wide, weight=np.zeros((64, 4160, 1, 1), np.float16))

    small = _report(_program(big_weights))
    assert "weights.sram" not in _program_rules(small)

    def huge(x: Any) -> Any:
        weight = np.zeros((4160, 4096, 1, 1), np.float16)  # 32.5 MiB
        y = mb.conv(x=mb.conv(x=x, weight=np.zeros((4096, 64, 1, 1), np.float16)), weight=weight)
        return mb.conv(x=y, weight=np.zeros((64, 4160, 1, 1), np.float16))

    tripped = _report(_program(huge))
    finding = next(f for f in tripped.findings if f.rule == "weights.sram")
    assert finding.severity == "risk" and "MB of weights" in finding.message
    assert tripped.fallbacks("a14") == 0


@pytest.mark.parametrize(
    ("platform", "size", "trips"),
    [
        ("macos", 3 * 2**30, True),
        ("macos", int(1.5 * 2**30), False),
        ("ios", int(1.5 * 2**30), True),
        ("ios", 2**29, False),
    ],
)
def test_package_size_limit_depends_on_the_platform(platform: str, size: int, trips: bool) -> None:
    function = _report(
        _program(lambda x: mb.relu(x=x)),
        package=PackageFacts(size_bytes=size),
        platform=platform,
    )
    assert ("package.size" in _program_rules(function)) is trips
    if trips:
        assert function.on_ane("a17") == 0


def test_program_too_small_trips_under_three_layers() -> None:
    tripped = _report(_program(lambda x: mb.relu(x=_conv(x)), wrap=False))
    assert "program.too_small" in _program_rules(tripped)
    assert tripped.on_ane("a14") == 0
    clean = _report(_program(lambda x: mb.relu(x=x)))
    assert "program.too_small" not in _program_rules(clean)


def test_program_too_small_trips_on_tiny_tensors() -> None:
    tiny = (1, 4, 1, 4)

    def tiny_layers(x: Any) -> Any:
        for seed in range(3):
            x = _conv(x, channels=4, seed=seed)
        return x

    tripped = _report(_program(tiny_layers, shapes=(tiny,), wrap=False))
    assert any(f.rule == "program.too_small" and "elements" in f.message for f in tripped.findings)


def test_every_rule_has_a_test_here() -> None:
    source = Path(__file__).read_text()
    untested = [rule.id for rule in placement_rules() if f'"{rule.id}"' not in source]
    assert untested == []


def test_dtype_int_trips_on_casts_to_integers_only() -> None:
    def to_int_and_back(x: Any) -> Any:
        return mb.cast(x=mb.cast(x=x, dtype="int32"), dtype="fp16")

    function = _report(_program(to_int_and_back), families=["a17"])
    casts = [op for op in function.compute_ops() if op.op_type == "cast"]
    assert ["dtype.int" in op.rules for op in casts] == [True, False]


def test_layout_not_bc1s_is_a_risk_on_linears_outside_the_ane_layout() -> None:
    def row_layout(x: Any) -> Any:
        weight = np.full((64, 64), 0.01, np.float16)
        return mb.linear(x=mb.reshape(x=x, shape=(64, 64)), weight=weight)

    tripped = _report(_program(lambda x: mb.reshape(x=row_layout(x), shape=SHAPE)))
    linear = _op(tripped, "linear")
    assert "layout.not_bc1s" in linear.rules
    assert RULES["layout.not_bc1s"].severity == "risk"
    assert linear.device["a14"] == "ane"
    assert "layout.not_bc1s" not in _op_rules(_report(_program(lambda x: mb.relu(x=x))))


def test_every_rule_carries_its_one_check() -> None:
    """Each placement rule (a hazard record the analysis finds) but the op table's has
    exactly one check, on ops or on the whole program, and every check is a rule's."""
    for rule in placement_rules():
        checks = [table[rule.id] for table in (OP_CHECKS, PROGRAM_CHECKS) if rule.id in table]
        expected = 0 if rule.id == "op.table" else 1
        assert len(checks) == expected, rule.id
        assert rule.severity in ("fallback", "risk") and rule.source and rule.fix, rule.id
    assert set(OP_CHECKS) | set(PROGRAM_CHECKS) <= {rule.id for rule in placement_rules()}
