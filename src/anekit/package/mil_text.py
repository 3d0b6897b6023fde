"""MIL programs as the textual MIL that Core ML's compiler reads (``model.mil`` in a
compiled ``.mlmodelc``) and the ANE's private in-memory descriptor takes (issue 18,
docs/direct.md), with their constants in a weight blob file (:mod:`anekit._milblob`).

Two forms (docs/ane-knowledge.md §5.2):

- ``program(1.3)`` with ``func main<ios18>``: scalars written ``string("x")``,
  ``int32(1)``, ``fp16(0x1p-3)``, the form maderix/ANE and ane-infer-forge emit for
  M3 and later;
- ``program(1.0)`` with ``func main<ios16>``: every scalar written as a rank-0 tensor,
  ``tensor<string, []>("x")``, as Core ML's own compiler writes it (coremltools'
  ``modelrunner/ModelRunner/add_model.mlmodelc/model.mil``) and as M1/M2 need.

Each function is a ``func NAME<OPSET>(inputs) { statements } -> (outputs);``; a statement
is ``TYPE VAR = OP(ARG = VAR, ...)[name = STRING]`` with the arguments in name order, as
Core ML writes them. Constants of at least :data:`BLOB_MIN_ELEMENTS` elements (or holding
inf or NaN) of a blob-storable dtype go to the weight file as ``BLOBFILE(path, offset)``;
the rest are written inline, floats as hexadecimal (exact). Ops the text form cannot
express here (control flow with nested blocks, lists, states, dynamic shapes) are refused
by name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from anekit._coremltools import Program, types
from anekit._milblob import DTYPE_CODES, HEADER_SIZE, BlobFileBuilder
from anekit.errors import ProgramError

Form = Literal["1.3", "1.0"]
#: Where the program reads its weights (the key of the in-memory descriptor's weights).
WEIGHT_PATH = "@model_path/weights/weight.bin"
#: Constants with at least this many elements go to the weight file (coremltools'
#: ``backend/mil/load.py::should_use_weight_file`` uses 10).
BLOB_MIN_ELEMENTS = 10
#: The buildInfo of each form, as the programs that are known to compile write it
#: (maderix/ANE ``ane_mil_gen.h`` for 1.3; SKY and Core ML's ``add_model.mlmodelc`` for
#: 1.0, where the parser requires ``coremlc-version``).
BUILD_INFO: dict[str, str] = {
    "1.3": '[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3510.2.1"}, '
    '{"coremlc-version", "3505.4.1"}, {"coremltools-component-milinternal", ""}, '
    '{"coremltools-version", "9.0"}})]',
    "1.0": '[buildInfo = dict<tensor<string, []>, tensor<string, []>>({{"coremlc-version", '
    '"3505.4.1"}})]',
}


@dataclass(frozen=True)
class MilText:
    """A program as MIL text and the weight file its ``BLOBFILE`` references read."""

    text: str
    weights: bytes
    weight_path: str = WEIGHT_PATH

    @property
    def has_weights(self) -> bool:
        """Whether the weight file holds any blob (beyond its header)."""
        return len(self.weights) > HEADER_SIZE


def hex_float(value: float) -> str:
    """``value`` exactly, in C's ``%a`` style: ``0x1p-3``, ``-0x1.ffcp+15``, ``0x0p+0``."""
    text = float(value).hex()
    mantissa, exponent = text.split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}"


class _Writer:
    """One program's text and blobs, in the syntax of one form."""

    def __init__(self, form: Form) -> None:
        if form not in BUILD_INFO:
            raise ProgramError(
                f"MIL text form must be one of {', '.join(BUILD_INFO)}, got {form!r}"
            )
        self.form = form
        self.blobs = BlobFileBuilder()

    # -- types and literals ----------------------------------------------------------

    def scalar_type(self, name: str) -> str:
        return f"tensor<{name}, []>" if self.form == "1.0" else name

    def type_of(self, var: Any, where: str) -> str:
        sym = var.sym_type
        if types.is_tensor(sym):
            shape = []
            for dim in sym.get_shape():
                if not isinstance(dim, int | np.integer):
                    raise ProgramError(f"{where}: {var.name} has a dynamic shape (static only)")
                shape.append(str(int(dim)))
            return f"tensor<{self.dtype_name(sym.get_primitive(), where)}, [{', '.join(shape)}]>"
        if types.is_scalar(sym) or sym is types.str:
            return self.scalar_type(self.dtype_name(sym, where))
        kind = types.builtin_to_string(sym)
        raise ProgramError(f"{where}: {var.name} is a {kind}, which MIL text here cannot hold")

    @staticmethod
    def dtype_name(sym: Any, where: str) -> str:
        name = types.builtin_to_string(sym)
        if name is None or name.startswith("complex"):
            raise ProgramError(f"{where}: dtype {sym} cannot be written as MIL text")
        return str(name)

    def string(self, text: str) -> str:
        return f"{self.scalar_type('string')}({json.dumps(text)})"

    @staticmethod
    def element(value: Any) -> str:
        if isinstance(value, bool | np.bool_):
            return "true" if value else "false"
        if isinstance(value, str | np.str_):
            return json.dumps(str(value))
        if isinstance(value, float | np.floating):
            return hex_float(float(value))
        return str(int(value))

    def value(self, var: Any, where: str) -> str:
        """A const's ``val``: inline, or a ``BLOBFILE`` reference."""
        kind = self.type_of(var, where)
        array = np.asarray(var.val)
        if array.dtype.kind == "f" and array.dtype not in DTYPE_CODES:
            array = array.astype(np.float32) if array.dtype == np.float64 and array.ndim else array
        if (
            array.ndim
            and array.dtype in DTYPE_CODES
            and (
                array.size >= BLOB_MIN_ELEMENTS
                or (array.dtype.kind == "f" and not np.isfinite(array).all())
            )
        ):
            return f"{kind}({self.blob(array)})"
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise ProgramError(
                f"{where}: {var.name} holds inf or NaN, which MIL text cannot write inline"
            )
        if types.is_tensor(var.sym_type):
            return (
                f"{kind}([{', '.join(self.element(item) for item in array.reshape(-1).tolist())}])"
            )
        return f"{kind}({self.element(array.item())})"

    def blob(self, array: np.ndarray) -> str:
        offset = f"{self.scalar_type('uint64')}({self.blobs.add(array)})"
        return f"BLOBFILE(path = {self.string(WEIGHT_PATH)}, offset = {offset})"

    # -- statements -------------------------------------------------------------------

    def statement(self, op: Any) -> str:
        where = f"{op.op_type} {op.name!r}"
        if op.blocks:
            raise ProgramError(
                f"{where}: ops with nested blocks cannot be written as MIL text here"
            )
        outputs = ", ".join(f"{self.type_of(out, where)} {out.name}" for out in op.outputs)
        name = f"[name = {self.string(op.name)}]"
        if op.op_type == "const":
            (out,) = op.outputs
            return f"{outputs} = const(){name[:-1]}, val = {self.value(out, where)}];"
        arguments = []
        for key in sorted(op.inputs):
            given = op.inputs[key]
            if isinstance(given, list | tuple):
                arguments.append(f"{key} = ({', '.join(var.name for var in given)})")
            else:
                arguments.append(f"{key} = {given.name}")
        return f"{outputs} = {op.op_type}({', '.join(arguments)}){name};"

    def function(self, name: str, function: Any) -> list[str]:
        opset = getattr(function.opset_version, "name", None)
        if opset is None:
            raise ProgramError(f"function {name}: no opset version (deployment target)")
        inputs = ", ".join(
            f"{self.type_of(var, f'function {name}')} {key}" for key, var in function.inputs.items()
        )
        lines = [f"    func {name}<{opset.lower()}>({inputs}) {{"]
        lines += [f"            {self.statement(op)}" for op in function.operations]
        lines.append(f"        }} -> ({', '.join(var.name for var in function.outputs)});")
        return lines


def to_mil_text(
    program: Program, form: Form = "1.3", functions: Sequence[str] | None = None
) -> MilText:
    """``program`` (a coremltools MIL ``Program``, e.g. ``CompiledProgram.lowered()``) as MIL
    text in ``form``, every function (or those named in ``functions``) a ``func`` in
    program order, and its weight file."""
    writer = _Writer(form)
    names = list(program.functions) if functions is None else list(functions)
    missing = [name for name in names if name not in program.functions]
    if missing:
        raise ProgramError(
            f"no function {', '.join(missing)} (functions: {', '.join(program.functions)})"
        )
    lines = [f"program({form})", BUILD_INFO[form], "{"]
    for name in names:
        lines += writer.function(name, program.functions[name])
    lines.append("}")
    return MilText("\n".join(lines) + "\n", writer.blobs.to_bytes())
