"""The MIL text emitter (issue 18, part 1): programs written as textual MIL and read back
by an independent parser (tests/miltext.py) with the same functions, ops, types, names,
arguments and constants (inline, or from the weight file by their BLOBFILE offsets), and
Core ML's own compiled text for the same program, statement for statement."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import anekit
from anekit._coremltools import Program, types
from anekit._milblob import read_blob_file
from anekit.errors import ProgramError
from anekit.package.mil_text import BLOB_MIN_ELEMENTS, WEIGHT_PATH, hex_float, to_mil_text
from miltext import Parsed, Type, parse


def _check_round_trip(program: Program, parsed: Parsed, weights: bytes) -> int:
    """Every function and op of ``program`` is in ``parsed`` as it is in the program;
    the number of constants read from the weight file. (The 1.0 form writes scalars as
    rank-0 tensors.)"""

    def _type(var: Any) -> Type:
        sym = var.sym_type
        if types.is_tensor(sym):
            dtype = types.builtin_to_string(sym.get_primitive())
            return Type(dtype, tuple(int(d) for d in var.shape))
        return Type(types.builtin_to_string(sym), () if parsed.version == "1.0" else None)

    blobs = {blob.offset: blob for blob in read_blob_file(weights)}
    from_file = 0
    assert list(parsed.functions) == list(program.functions)
    for name, function in program.functions.items():
        written = parsed.functions[name]
        assert written.opset == function.opset_version.name.lower()
        assert [(t, n) for t, n in written.inputs] == [
            (_type(var), key) for key, var in function.inputs.items()
        ]
        assert written.outputs == [var.name for var in function.outputs]
        assert len(written.statements) == len(function.operations)
        for statement, op in zip(written.statements, function.operations, strict=True):
            assert (statement.op, statement.name) == (op.op_type, op.name)
            assert statement.outputs == [(_type(out), out.name) for out in op.outputs]
            expected_args = {
                key: tuple(v.name for v in value) if isinstance(value, list | tuple) else value.name
                for key, value in op.inputs.items()
            }
            assert statement.args == expected_args
            if op.op_type == "const":
                want = np.asarray(op.outputs[0].val)
                if isinstance(statement.value, tuple):
                    kind, offset, path = statement.value
                    assert (kind, path) == ("blob", WEIGHT_PATH)
                    blob = blobs[offset]
                    assert blob.dtype == want.dtype
                    got = blob.values.reshape(want.shape)
                    from_file += 1
                else:
                    got = np.asarray(statement.value, dtype=want.dtype).reshape(want.shape)
                np.testing.assert_array_equal(got, want)
    assert from_file == len(blobs)
    return from_file


@pytest.mark.parametrize("form", ["1.3", "1.0"])
def test_the_seed_ffn_round_trips(form: str) -> None:
    from anekit.bench import workloads

    ffn = workloads("full")[0]
    assert ffn.name == "FFN block D=512 H=1536 T=256"
    program = anekit.compile(ffn.build(np.float16), *ffn.inputs).lowered()
    written = to_mil_text(program, form=form)  # type: ignore[arg-type]
    parsed = parse(written.text)
    assert parsed.version == form
    assert _check_round_trip(program, parsed, written.weights) >= 3  # the three weights
    if form == "1.0":  # every scalar as a rank-0 tensor
        assert " string(" not in written.text and "tensor<string, []>(" in written.text


def test_the_minilm_bucket_round_trips() -> None:
    from anekit.models.encoders import load_model
    from anekit.models.package import trace_bucket

    model = load_model(None, max_length=128)
    program = trace_bucket(model.config, model.weights, 128).program
    written = to_mil_text(program)
    parsed = parse(written.text)
    ops = {op.op_type for op in program.functions["main"].operations}
    assert {"conv", "matmul", "softmax", "layer_norm"} <= ops
    assert _check_round_trip(program, parsed, written.weights) > 30  # the layers' weights


def test_a_multifunction_program_writes_one_func_per_function() -> None:
    x = np.ones((1, 16, 1, 32), np.float16)
    weight = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float16)
    first = anekit.compile(lambda a: a * weight[:, :1].reshape(1, 16, 1, 1), x)
    second = anekit.compile(lambda a: a + np.float16(1), x)
    program = first.program
    program.functions["plus_one"] = second.program.functions[second.function_name]
    written = to_mil_text(program)
    parsed = parse(written.text)
    assert list(parsed.functions) == ["main", "plus_one"]
    _check_round_trip(program, parsed, written.weights)
    only = parse(to_mil_text(program, functions=["plus_one"]).text)
    assert list(only.functions) == ["plus_one"]
    with pytest.raises(ProgramError, match="no function nope"):
        to_mil_text(program, functions=["nope"])


#: Core ML's own compiled text of ``x * y`` on two fp16 (1, 10) inputs:
#: apple/coremltools ``coremltools/modelrunner/ModelRunner/add_model.mlmodelc/model.mil``
#: (added in commit 07ffd860, "8.3 release"; compiled by coremlc 3402.4.1).
COREML_ADD_MODEL = """\
program(1.0)
[buildInfo = dict<tensor<string, []>, tensor<string, []>>({{"coremlc-component-MIL", "3402.3.2"}, {"coremlc-version", "3402.4.1"}, {"coremltools-component-torch", "2.5.1"}, {"coremltools-source-dialect", "TorchScript"}, {"coremltools-version", "8.1"}})]
{
    func main<ios16>(tensor<fp16, [1, 10]> x, tensor<fp16, [1, 10]> y) {
            tensor<fp16, [1, 10]> var_3 = mul(x = x, y = y)[name = tensor<string, []>("op_3_cast_fp16")];
        } -> (var_3);
}
"""  # noqa: E501


def _shape_of_text(text: str) -> list[str]:
    """The text with buildInfo's contents, variable names and op names replaced by their
    order of appearance: what must match statement for statement."""
    lines = text.strip().splitlines()
    lines[1] = re.sub(r"\(\{.*\}\)", "(...)", lines[1])
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match[0], f"v{len(names)}")

    body = "\n".join(lines)
    body = re.sub(r'"[^"]*"', lambda m: f'"{rename(m)}"', body)
    return re.sub(r"(?<=> )\w+(?= =)|(?<=-> \()\w+", rename, body).splitlines()


def test_the_ios16_form_matches_core_mls_compiled_text() -> None:
    def multiply(x: Any, y: Any) -> Any:
        return x * y

    ones = np.ones((1, 10), np.float16)
    program = anekit.compile(multiply, ones, ones, deployment_target="iOS16", passes=False)
    written = to_mil_text(program.lowered(), form="1.0").text
    assert _shape_of_text(written) == _shape_of_text(COREML_ADD_MODEL)


#: Core ML's compiled text (coremlc 3600.25.1, ``program(1.3)``) of three small programs:
#: rebeckerspecialties/mlmodelc-export, ``xcrun coremlc compile`` output kept as test
#: fixtures (its tests/fixtures/README.md): tests/pipeline-fixtures/weighted/expected.mlmodelc/
#: model0/model.mil (commit 72b7f317), tests/pipeline-fixtures/masked/expected.mlmodelc/
#: model0/model.mil (8918d832) and tests/fixtures/fp16-subnormal-cast/expected-macos.mlmodelc/
#: model.mil (90b0ca49).
COREMLC_HEADER = """\
program(1.3)
[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3600.16.1"}, {"coremlc-version", "3600.25.1"}})]
{"""  # noqa: E501
COREMLC_SAMPLES = {
    "weighted": """
    func main<ios17>(tensor<fp32, [4]> input) {
            tensor<fp32, [4]> weights = const()[val = tensor<fp32, [4]>(BLOBFILE(path = string("@model_path/weights/weights.bin"), offset = uint64(64)))];
            tensor<fp32, [4]> sum = add(x = input, y = weights);
            tensor<fp16, [4]> rounded = cast(dtype = string("fp16"), x = sum);
        } -> (rounded);
}""",  # noqa: E501
    "masked": """
    func main<ios17>(tensor<fp32, [4]> input) {
            fp32 threshold = const()[val = fp32(0x0p+0)];
            tensor<bool, [4]> mask_graph_bool = greater(x = input, y = threshold);
            tensor<uint8, [4]> mask_graph = cast(dtype = string("uint8"), x = mask_graph_bool);
            tensor<fp16, [4]> rounded = cast(dtype = string("fp16"), x = input);
            tensor<fp32, [4]> mask = cast(dtype = string("fp32"), x = mask_graph);
        } -> (mask, rounded);
}""",
    "fp16-subnormal-cast": """
    func main<ios17>(tensor<fp32, [5]> input) {
            tensor<fp16, [5]> half = const()[val = tensor<fp16, [5]>([0x1p-24, 0x1.5p-17, 0x1.ff8p-15, 0x1p-14, -0x1.5p-17])];
            tensor<fp32, [5]> constant = cast(dtype = string("fp32"), x = half);
            tensor<fp32, [5]> output = add(x = input, y = constant);
        } -> (output);
}""",  # noqa: E501
}


def _coremlc_programs() -> dict[str, Any]:
    """The same three programs, built with coremltools' MIL builder."""
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb

    def spec(n: int) -> list[Any]:
        return [mb.TensorSpec(shape=(n,), dtype=types.fp32)]

    @mb.program(input_specs=spec(4), opset_version=ct.target.iOS17)  # type: ignore[untyped-decorator]
    def weighted(input: Any) -> Any:
        weights = mb.const(val=np.array([0.5, -1, 2, 3], np.float32), name="weights")
        return mb.cast(x=mb.add(x=input, y=weights, name="sum"), dtype="fp16", name="rounded")

    @mb.program(input_specs=spec(4), opset_version=ct.target.iOS17)  # type: ignore[untyped-decorator]
    def masked(input: Any) -> Any:
        threshold = mb.const(val=np.float32(0), name="threshold")
        mask = mb.greater(x=input, y=threshold, name="mask_graph_bool")
        mask = mb.cast(x=mask, dtype="uint8", name="mask_graph")
        rounded = mb.cast(x=input, dtype="fp16", name="rounded")
        return mb.cast(x=mask, dtype="fp32", name="mask"), rounded

    subnormal = np.array([2**-24, 0x15 * 2**-21, 0x1FF8 * 2**-27, 2**-14, -(0x15 * 2**-21)])

    @mb.program(input_specs=spec(5), opset_version=ct.target.iOS17)  # type: ignore[untyped-decorator]
    def fp16_subnormal_cast(input: Any) -> Any:
        half = mb.const(val=subnormal.astype(np.float16), name="half")
        constant = mb.cast(x=half, dtype="fp32", name="constant")
        return mb.add(x=input, y=constant, name="output")

    return {"weighted": weighted, "masked": masked, "fp16-subnormal-cast": fp16_subnormal_cast}


def _statements(text: str) -> list[str]:
    """``text`` with buildInfo's contents left out and variables named by their order of
    appearance, after two differences of form that do not change the program: op names
    (coremlc leaves out a name equal to the output's) and string parameters, which
    anekit writes as const statements (as maderix/ANE's hand-written MIL does) and coremlc
    inline. Tensor constants' values (inline, or in the weight file) are compared apart;
    string values, types, ops and arguments must match."""
    strings: dict[str, str] = {}
    lines = []
    for line in text.strip().splitlines():
        line = re.sub(r'name = string\("[^"]*"\)(, )?', "", line).replace(")[];", ");")
        line = re.sub(r"(tensor<[^>]*>)\((BLOBFILE\(.*\)|\[.*\])\)", r"\1(...)", line)
        const = re.fullmatch(r'\s*string (\w+) = const\(\)\[val = (string\("[^"]*"\))\];', line)
        if const is not None:
            strings[const[1]] = const[2]
            continue
        lines.append(re.sub(r"(?<== )\w+(?=[,)])", lambda m: strings.get(m[0], m[0]), line))
    lines[1] = re.sub(r"\(\{.*\}\)", "(...)", lines[1])
    body = "\n".join(lines)
    # inputs, then outputs (after a tensor type, or a bare scalar type in 1.3's form)
    declared = dict.fromkeys(re.findall(r"(?:> |^ +\w+ )(\w+)(?= =|[,)])", body, re.MULTILINE))
    renamed = {name: f"v{index}" for index, name in enumerate(declared)}
    body = re.sub(r'"[^"]*"|\b\w+\b', lambda m: renamed.get(m[0], m[0]), body)
    return body.splitlines()


@pytest.mark.parametrize("sample", list(COREMLC_SAMPLES))
def test_the_ios18_form_matches_coremlc_3600s_compiled_text(sample: str) -> None:
    program = _coremlc_programs()[sample]
    written = to_mil_text(program, form="1.3").text
    assert _statements(written) == _statements(COREMLC_HEADER + COREMLC_SAMPLES[sample])
    if sample == "fp16-subnormal-cast":  # fp16 constants inline, in the same hex digits
        values = "[0x1p-24, 0x1.5p-17, 0x1.ff8p-15, 0x1p-14, -0x1.5p-17]"
        assert values in written and values in COREMLC_SAMPLES[sample]


def test_constants_inline_or_in_the_weight_file_and_exact() -> None:
    assert [hex_float(v) for v in (0.125, 1.0, -65504.0, 0.0, 1 / 3)] == [
        "0x1p-3", "0x1p+0", "-0x1.ffcp+15", "0x0p+0", "0x1.5555555555555p-2",
    ]  # fmt: skip
    small = np.arange(BLOB_MIN_ELEMENTS - 1, dtype=np.float16) / 7
    large = np.arange(BLOB_MIN_ELEMENTS, dtype=np.float16) / 7
    x = np.ones((BLOB_MIN_ELEMENTS - 1,), np.float16)
    program = anekit.compile(lambda a: a * small, x, passes=False).program
    written = to_mil_text(program)
    assert "BLOBFILE" not in written.text and not written.has_weights
    _check_round_trip(program, parse(written.text), written.weights)
    y = np.ones((BLOB_MIN_ELEMENTS,), np.float16)
    program = anekit.compile(lambda a: a * large, y, passes=False).program
    written = to_mil_text(program)
    assert written.text.count("BLOBFILE") == 1
    assert _check_round_trip(program, parse(written.text), written.weights) == 1


def test_what_the_text_form_cannot_express_is_refused_by_name() -> None:
    from coremltools.converters.mil.mil import get_new_symbol

    from anekit._coremltools import ct, mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(4,))], opset_version=ct.target.iOS18)  # type: ignore[untyped-decorator]
    def branching(x: Any) -> Any:
        positive = mb.greater(x=mb.reduce_sum(x=x), y=0.0)
        return mb.cond(
            pred=positive,
            _true_fn=lambda: mb.add(x=x, y=1.0),
            _false_fn=lambda: mb.sub(x=x, y=1.0),
        )

    with pytest.raises(ProgramError, match=r"cond '\w+': ops with nested blocks"):
        to_mil_text(branching)

    unknown = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(unknown,))], opset_version=ct.target.iOS18)  # type: ignore[untyped-decorator]
    def dynamic(x: Any) -> Any:
        return mb.relu(x=x)

    with pytest.raises(ProgramError, match="dynamic shape"):
        to_mil_text(dynamic)
    with pytest.raises(ProgramError, match=r"form must be one of 1\.3, 1\.0"):
        to_mil_text(branching, form="2.0")  # type: ignore[arg-type]
