"""The op records (anekit.ops.registry): one per MIL op type, holding what every layer
asks about that op."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from anekit.ops import defs, groups, registry
from anekit.ops.registry import OPS, record


def test_every_op_with_a_lowering_or_a_cliff_has_a_reference() -> None:
    # The reference defines the semantics the lowering and the cliff checks follow.
    assert defs is not None
    orphans = sorted(
        name for name, entry in OPS.items() if entry.reference is None and entry.op_type != "const"
    )
    assert orphans == [], orphans


def test_groups_are_asked_from_the_record() -> None:
    assert record("matmul").groups >= {"MATMUL_LIKE"}
    assert record("add").groups >= {"BINARY_ELEMENTWISE", "ARITHMETIC", "FLOAT_BINARY"}
    assert "VALUE_PRESERVING" in record("reverse_sequence").groups
    assert "VALUE_PRESERVING" not in record("exp").groups
    assert record("no_such_op").groups == frozenset()


def test_every_group_member_is_a_known_op() -> None:
    # A misspelt name in a group would silently never match.
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    known = set(SSAOpRegistry.core_ops) | set(SSAOpRegistry.dialect_ops)
    for name in groups.__all__:
        unknown = sorted(getattr(groups, name) - known)
        assert unknown == [], (name, unknown)


def test_every_record_has_an_op_table_verdict() -> None:
    # The record's op type is its key in the op table (analysis/data/ops.toml): an op the
    # simulator runs but the table lacks would get no placement verdict.
    from anekit.analysis import load_op_table

    table = load_op_table()
    missing = sorted(name for name in OPS if table.entry(name) is None)
    assert missing == [], missing


def test_the_cliffs_of_a_record_run_through_check() -> None:
    class Op:
        op_type = "matmul"

    saturating = record("matmul").check(Op(), {}, 40000.0)
    assert [rule for rule, _ in saturating] == ["ane.matmul_saturation"]
    assert record("matmul").check(Op(), {}, 100.0) == []
    tiny = {"x": np.array([1e-7, 1.0], np.float32), "epsilon": np.float32(0.0)}
    assert [rule for rule, _ in record("rsqrt").check(Op(), tiny, 1.0)] == ["ane.small_log_input"]
    assert record("exp").check(Op(), tiny, 1e9) == []


def test_a_second_definition_of_the_same_role_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "OPS", {})

    def impl(ctx: Any, x: Any) -> Any:
        return x

    registry.register("twice")(impl)
    registry.lowers("twice")(lambda low, op: [])
    with pytest.raises(RuntimeError, match="reference of MIL op 'twice' defined twice"):
        registry.register("twice")(impl)
    with pytest.raises(RuntimeError, match="onnx lowering of MIL op 'twice' defined twice"):
        registry.lowers("twice")(lambda low, op: [])
    # one lowering per target
    registry.lowers("twice", target="onnx_fused")(lambda low, op: [])
    assert set(registry.OPS["twice"].lowerings) == {"onnx", "onnx_fused"}
    with pytest.raises(ValueError, match="unknown lowering target"):
        registry.lowers("twice", target="no_such_target")
    # cliffs accumulate: an op may have several, each citing a simulator hazard
    registry.cliff("twice", rule="ane.matmul_saturation")(lambda op, inputs, peak: [])
    registry.cliff("twice", rule="ane.small_log_input")(lambda op, inputs, peak: [])
    assert len(registry.OPS["twice"].cliffs) == 2
    with pytest.raises(ValueError, match="not a simulator hazard"):
        registry.cliff("twice", rule="no.such_rule")
    with pytest.raises(ValueError, match="not a simulator hazard"):
        registry.cliff("twice", rule="io.narrow")  # placement only


def test_the_lowering_accessor_is_the_onnx_target() -> None:
    entry = record("layer_norm")
    assert entry.lowering is entry.lowerings["onnx"]
    assert entry.lowering_for("onnx_fused", "onnx") is entry.lowerings["onnx_fused"]
    assert record("exp").lowering_for("onnx_fused", "onnx") is record("exp").lowering
    assert record("no_such_op").lowering_for("onnx") is None


def test_the_exporter_keeps_no_lowering_table_of_its_own() -> None:
    # Its fused operators are lowerings of the records (target onnx_fused).
    from anekit.package import onnx_emitter

    assert not hasattr(onnx_emitter, "FUSED")
    fused = sorted(name for name, entry in OPS.items() if "onnx_fused" in entry.lowerings)
    assert fused == ["gelu", "layer_norm", "softmax"]
    for name in fused:  # a fused form falls back to the op's exact lowering
        assert OPS[name].lowering is not None, name


def test_every_cliff_cites_a_simulator_hazard_with_a_source_and_a_fix() -> None:
    from anekit.ops.hazards import RULES

    cited = {cliff.rule for entry in OPS.values() for cliff in entry.cliffs}
    assert cited >= {
        "ane.matmul_saturation",
        "ane.small_log_input",
        "ane.width_slice_saturation",
        "attention.score_size",
    }
    for rule in cited:
        assert "simulator" in RULES[rule].checked_by, rule
        assert RULES[rule].source and RULES[rule].fix, rule


def test_a_cliff_that_reads_inputs_brings_its_probe() -> None:
    # The compiled engine knows no op by name: what a cliff needs beyond the op's output
    # comes with the cliff (its probe, and stand-ins for the inputs its check reads).
    import inspect

    from anekit.sim import compiled

    source = inspect.getsource(compiled)
    for name, entry in OPS.items():
        if any(cliff.probe is not None for cliff in entry.cliffs):
            assert f'"{name}"' not in source, name
            assert all(cliff.stand_in is not None for cliff in entry.cliffs if cliff.probe)
    assert {cliff.rule for cliff in record("rsqrt").cliffs if cliff.probe} == {
        "ane.small_log_input"
    }
    assert [cliff.stand_in is not None for cliff in record("slice_by_index").cliffs] == [True]


def _known_ops() -> set[str]:
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    return set(SSAOpRegistry.core_ops) | set(SSAOpRegistry.dialect_ops) | set(OPS)


def _op_name_sets(tree: Any, known: set[str]) -> list[tuple[int, list[str]]]:
    """Literal collections of two or more op names that act as a set: a set literal, a
    ``frozenset(...)`` argument, or a tuple/list that is a module-level constant or the
    right side of ``in``. (A decorator's op types, or ``dict.fromkeys`` rows of a
    per-op table, are arguments, not sets.)"""
    import ast

    candidates: list[Any] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Set):
            candidates.append(node)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "frozenset":
            candidates.extend(node.args)
        elif isinstance(node, ast.Compare):
            candidates.extend(
                right
                for op, right in zip(node.ops, node.comparators, strict=True)
                if isinstance(op, ast.In | ast.NotIn)
            )
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            candidates.append(node.value)
    found = []
    seen: set[int] = set()
    for node in candidates:
        if not isinstance(node, ast.Set | ast.Tuple | ast.List) or id(node) in seen:
            continue
        seen.add(id(node))
        names = [
            item.value
            for item in node.elts
            if isinstance(item, ast.Constant) and isinstance(item.value, str)
        ]
        if len(names) >= 2 and len(names) == len(node.elts) and set(names) <= known:
            found.append((node.lineno, names))
    return found


def test_op_name_sets_live_in_groups_only() -> None:
    # Each group of op types is stated once, in anekit.ops.groups, under a name that
    # explains it; a second copy elsewhere drifts (a new op added to one and not the other).
    import ast
    from pathlib import Path

    import anekit

    known = _known_ops()
    root = Path(anekit.__file__).parent
    strays = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "ops" / "groups.py":
            continue
        for line, names in _op_name_sets(ast.parse(path.read_text()), known):
            strays.append(f"{path.relative_to(root)}:{line}: {names}")
    assert strays == [], "\n".join(strays)


def test_the_op_name_scan_sees_each_form_of_set() -> None:
    import ast

    known = _known_ops()
    source = """
A = frozenset({"add", "sub"})
B = ("sqrt", "rsqrt")
def f(op):
    return op.op_type in ("linear", "conv") or op.op_type not in ["mul", "real_div"]
C = {"x", "y"}
D = ("add",)
@register("relu", "sigmoid")
def g(): pass
"""
    found = [names for _, names in _op_name_sets(ast.parse(source), known)]
    assert found.count(["add", "sub"]) == 1  # the set inside frozenset(...), seen once
    assert ["sqrt", "rsqrt"] in found and ["linear", "conv"] in found
    assert ["mul", "real_div"] in found
    assert ["x", "y"] not in found and ["add"] not in found and ["relu", "sigmoid"] not in found


def test_mil_defaults_come_from_coremltools_op_spec() -> None:
    # layer_norm's epsilon and gelu's mode are coremltools' (its op classes'
    # default_inputs), read in one place; no reference restates them.
    import inspect

    from coremltools.converters.mil.mil import Builder as mb

    from anekit._milgraph import mil_defaults, mil_input

    @mb.program(input_specs=[mb.TensorSpec((2, 8))])  # type: ignore[untyped-decorator]
    def program(x: Any) -> Any:
        return mb.gelu(x=mb.layer_norm(x=x, axes=[1]))

    ops = {op.op_type: op for op in program.functions["main"].operations}
    norm, gelu = ops["layer_norm"], ops["gelu"]
    spec = dict(type(norm).default_inputs(norm).items())
    assert mil_defaults(norm)["epsilon"] == spec["epsilon"] == 1e-5
    assert "gamma" not in mil_defaults(norm)  # absent by default: no value
    assert mil_defaults(gelu)["mode"] == "EXACT"
    # without the input, the value is the spec's default
    del norm._input_vars["epsilon"]
    assert mil_input(norm, "epsilon") == 1e-5
    for name in ("layer_norm", "instance_norm", "batch_norm", "l2_norm", "gelu"):
        reference = record(name).reference
        assert reference is not None, name
        parameters = inspect.signature(reference).parameters.values()
        restated = [p.name for p in parameters if p.default not in (inspect.Parameter.empty, None)]
        assert restated == [], (name, restated)


def test_a_default_the_spec_changes_reaches_every_consumer(monkeypatch: pytest.MonkeyPatch) -> None:
    # The interpreter and the lowerings take layer_norm's
    # epsilon from coremltools' spec when the op does not give one.
    from coremltools.converters.mil.mil import Builder as mb
    from coremltools.converters.mil.mil.input_type import DefaultInputs

    from anekit.ops.lowering import Lowering
    from anekit.ops.numerics import Numerics

    @mb.program(input_specs=[mb.TensorSpec((1, 4))])  # type: ignore[untyped-decorator]
    def program(x: Any) -> Any:
        return mb.layer_norm(x=x, axes=[1])

    func = program.functions["main"]
    norm = next(op for op in func.operations if op.op_type == "layer_norm")
    del norm._input_vars["epsilon"]
    monkeypatch.setattr(
        type(norm),
        "default_inputs",
        lambda self: DefaultInputs(axes=range(self.x.rank), gamma=None, beta=None, epsilon=0.25),
    )
    low = Lowering(func, Numerics(mode="fp32"))
    assert low.param(norm, "epsilon") == 0.25
    from anekit.sim.interpreter import _Run

    run = _Run(func, "main", Numerics(mode="fp32"), False)
    run.feed({"x": np.zeros((1, 4), np.float32)})
    for index, op in enumerate(list(func.operations)):
        if op is norm:
            break
        run.execute(index, op)  # the constants layer_norm reads
    assert run.arguments(norm)["epsilon"] == 0.25


def test_no_module_restates_layer_norm_epsilon_or_gelu_mode() -> None:
    # Where these were restated as fallbacks (references, lowerings, the exporter, the
    # norm pass), a change in coremltools' spec would have left copies behind.
    from pathlib import Path

    import anekit

    root = Path(anekit.__file__).parent
    for name in (
        "ops/defs/normalization.py",
        "ops/defs/activation.py",
        "package/onnx_emitter.py",
        "passes/norms.py",
        "ops/lowering.py",
    ):
        text = (root / name).read_text()
        assert "1e-5" not in text and "1e-05" not in text, name
        assert '"EXACT"' not in text, name


class _StandInVar:
    """A stand-in for every input of an op class, enough for ``default_inputs()`` to run
    (conv's strides need x's rank, linear's bias the weight's shape, ...)."""

    rank = 4
    shape = (2, 3, 4, 5)
    val = None

    @property
    def dtype(self) -> Any:
        from coremltools.converters.mil.mil import types

        return types.fp32


def _spec_versions(op_type: str) -> dict[str, dict[str, str]]:
    """For every class coremltools registers for ``op_type`` (each opset version that
    changed it), by module and name: per input, ``required``, ``default`` (optional, and
    the spec's default, which the interpreter fills in, is a value) or ``absent``
    (optional, and its default is "absent")."""
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    versions = {}
    for cls in dict.fromkeys(SSAOpRegistry.core_ops.get(op_type, {}).values()):
        stand_in = cls.__new__(cls)
        inputs = cls.input_spec.input_types
        for name in inputs:
            object.__setattr__(stand_in, name, _StandInVar())
        defaults = dict(cls.default_inputs(stand_in).items())
        versions[f"{cls.__module__.rsplit('.', 2)[-2]}.{cls.__name__}"] = {
            name: "required"
            if not kind.optional
            else "default"
            if defaults.get(name) is not None
            else "absent"
            for name, kind in inputs.items()
        }
    return versions


def _references() -> dict[Any, dict[str, dict[str, str]]]:
    """Each reference with the spec versions of every op type it runs."""
    found: dict[Any, dict[str, dict[str, str]]] = {}
    for name, entry in OPS.items():
        if entry.reference is not None:
            found.setdefault(entry.reference, {}).update(_spec_versions(name))
    return found


#: Python defaults a reference may keep on an input that every version always gives,
#: (reference, parameter) -> reason. Empty: a default is kept only where some op type
#: sharing the reference, or some opset version, lacks the input or leaves it absent.
_KEPT_DEFAULTS: dict[tuple[str, str], str] = {}


def test_no_reference_restates_a_mil_default() -> None:
    # A Python default on an input that every registered opset version of every op the
    # reference runs always has (required, or filled in from coremltools' spec by the
    # interpreter) restates MIL's default: a copy a change in the spec would leave behind.
    import inspect

    restated = []
    for reference, versions in _references().items():
        if not versions:
            continue  # not a coremltools op: no spec to restate
        for parameter in inspect.signature(reference).parameters.values():
            if parameter.default is inspect.Parameter.empty:
                continue
            always = all(
                inputs.get(parameter.name) in ("required", "default")
                for inputs in versions.values()
            )
            if always and (reference.__name__, parameter.name) not in _KEPT_DEFAULTS:
                restated.append(f"{reference.__name__}: {parameter.name}={parameter.default!r}")
    assert restated == [], restated


def test_a_kept_default_says_which_version_or_op_lacks_the_input() -> None:
    # Where a reference keeps a value default (None is MIL's "absent"), some opset
    # version or op type sharing it lacks the input (or leaves it absent), and a comment
    # on its line says which.
    import inspect

    for reference, versions in _references().items():
        lines = inspect.getsource(reference).splitlines()
        for parameter in inspect.signature(reference).parameters.values():
            if parameter.default in (inspect.Parameter.empty, None):
                continue
            lacking = [
                version
                for version, inputs in versions.items()
                if inputs.get(parameter.name, "absent") == "absent"
            ]
            declared = [line for line in lines if f" {parameter.name}: " in line]
            assert lacking and declared, (reference.__name__, parameter.name)
            assert "#" in declared[0], (reference.__name__, parameter.name, lacking)


def test_no_lowering_reads_an_input_with_a_spec_default_directly() -> None:
    # ``op.name`` is None on an op that lacks the input (a program loaded without it)
    # where MIL means the spec's default; ``low.param(op, "name")`` gives that default.
    import inspect
    import re

    found = []
    for name, entry in OPS.items():
        versions = _spec_versions(name)
        for target, lower in entry.lowerings.items():
            source = inspect.getsource(lower)
            for input_name in re.findall(r"\bop\.(\w+)\b", source):
                if any(inputs.get(input_name) == "default" for inputs in versions.values()):
                    found.append(f"{target} lowering of {name} reads op.{input_name}")
    assert found == [], sorted(set(found))


def test_the_spec_versions_stand_in_reads_coremltools_defaults() -> None:
    conv = _spec_versions("conv")
    assert {inputs["pad_type"] for inputs in conv.values()} == {"default"}
    assert {inputs["bias"] for inputs in conv.values()} == {"absent"}
    assert {inputs["weight"] for inputs in conv.values()} == {"required"}
    gather = _spec_versions("gather")
    assert ["validate_indices" in inputs for inputs in gather.values()] == [False, False, True]
