"""The simulator's fast path: a whole MIL function as one ONNX Runtime graph.

Each MIL op is lowered to ONNX ops with the interpreter's semantics (the
interpreter in :mod:`anekit.sim.interpreter` is the definition); in ``ane`` mode a
float16 round trip (Cast to float16 and back) follows every float result and every
intermediate the interpreter rounds, and the fp16 pairwise sums are spelled out.
ONNX Runtime then runs the program in one call with its SIMD kernels, instead of
one Python dispatch, one NumPy pass and one rounding pass per op.

For the numerics report the graph also returns, per op, the largest magnitude of
its result and a sum that is finite exactly when the result holds no inf/NaN, plus
the probes the cliff rules need. When any inf/NaN appears, :func:`anekit.sim.run`
runs the interpreter instead, which reports exactly where they started.

Ops without a lowering make :func:`compile_function` raise :class:`NotLowerable`;
the caller then uses the interpreter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit._milgraph import numpy_dtype
from anekit.ops import defs  # noqa: F401  (defines the ops)
from anekit.ops.groups import PERMUTES, VALUE_PRESERVING
from anekit.ops.lowering import LoweredOp, Lowering, NotLowerable, onnx_type, shape_of
from anekit.ops.numerics import Numerics
from anekit.ops.registry import record as op_record

_log = logging.getLogger(__name__)


# -- the function --------------------------------------------------------------------


def _constant_value(op: Any, numerics: Numerics) -> list[Any]:
    values = [op.outputs[0].val if op.op_type == "const" else op.materialized_val_inference()]
    return [
        numerics.store(value, numpy_dtype(var))
        for value, var in zip(values, op.outputs, strict=True)
    ]


@dataclass
class CompiledFunction:
    """An ONNX Runtime session that runs one MIL function with given numerics."""

    session: Any
    input_names: list[str]
    output_vars: list[Any]
    records: list[LoweredOp]
    numerics: Numerics


def compile_function(func: Any, numerics: Numerics) -> CompiledFunction:
    """Lower ``func`` to one ONNX graph; raises :class:`NotLowerable`."""
    low = Lowering(func, numerics)
    for name, var in func.inputs.items():
        dtype = numpy_dtype(var)
        if dtype is None:
            raise NotLowerable(f"input {name}")
        value = low.graph.input(f"in_{name}", len(shape_of(var)), onnx_type(dtype), shape_of(var))
        low.names[id(var)] = low.store(value) if dtype.kind == "f" else value
    for op in func.operations:
        if op.op_type == "const" or op.op_type.startswith("constexpr_"):
            for var, value in zip(op.outputs, _constant_value(op, numerics), strict=True):
                declared = numpy_dtype(var)
                if declared is None:
                    continue  # strings (modes) are read at lowering time
                dtype = np.dtype(np.float32) if declared.kind == "f" else declared
                low.pending[id(var)] = (np.asarray(value), dtype)
            continue
        entry = op_record(op.op_type)
        lower = entry.lowering
        if lower is None:
            raise NotLowerable(f"op type {op.op_type}")
        low.probe = {}
        outputs = lower(low, op)
        for var, name in zip(op.outputs, outputs, strict=True):
            dtype = numpy_dtype(var)
            if dtype is not None and dtype.kind == "f":
                if op.op_type not in VALUE_PRESERVING:
                    name = low.store(name)
                source = op.inputs.get("x")
                if op.op_type in PERMUTES and source is not None and id(source) in low.summaries:
                    # Same values as the input, rearranged: reuse its statistics.
                    peak, total, smallest = low.summaries[id(source)]
                    record = LoweredOp(op, var, peak, total, {"low": smallest})
                else:
                    # ReduceSum propagates NaN and inf (ReduceMax does not reliably): the
                    # sum is finite exactly when the result is.
                    peak = low.node("ReduceMax", name, keepdims=0)
                    total = low.node("ReduceSum", name, keepdims=0)
                    smallest = low.node("ReduceMin", name, keepdims=0)
                    record = LoweredOp(op, var, peak, total, {"low": smallest, **low.probe})
                    record.probes.update(entry.probes(low, op))  # what its cliffs read
                low.records.append(record)
                low.summaries[id(var)] = (peak, total, smallest)
            low.names[id(var)] = name
    unlowered = [var.name for var in func.outputs if id(var) not in low.names]
    if unlowered:  # an output that is a constant (folded by coremltools' passes)
        raise NotLowerable(f"outputs {', '.join(unlowered)} are not computed by an op")
    outputs = [low.names[id(var)] for var in func.outputs]
    types_out = []
    for var in func.outputs:
        dtype = numpy_dtype(var)
        if dtype is None:
            raise NotLowerable(f"output {var.name}")
        types_out.append(onnx_type(dtype))
    stats = [
        name
        for record in low.records
        for name in (record.peak, record.total, *record.probes.values())
    ]
    session = low.graph.session(
        *outputs, *stats, types=types_out + [onnx_type(np.dtype(np.float32))] * len(stats)
    )
    return CompiledFunction(session, list(func.inputs), list(func.outputs), low.records, numerics)


class _Entries(dict[tuple[Any, ...], CompiledFunction | None]):
    """A function's compiled forms. A copy or a pickle of the function (coremltools deep-
    copies programs, the direct path pickles them) gets none: its ops are other objects,
    and an ONNX Runtime session can be neither copied nor pickled."""

    def __copy__(self) -> _Entries:
        return _Entries()

    def __deepcopy__(self, memo: dict[int, Any]) -> _Entries:
        return _Entries()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Entries, ())


#: The attribute of a MIL function that holds its compiled forms. On the function itself,
#: not in a weak-keyed table: a compiled form holds the function's ops and vars (its
#: report names them), which would keep a table's key alive for ever; as an attribute, the
#: function and its compiled forms are freed together.
_ATTRIBUTE = "_anekit_compiled"


def _fingerprint(func: Any) -> int:
    """Changes whenever a pass adds, removes or rewires an op of ``func``."""
    wiring = tuple(
        (id(op), tuple(id(var) for var in op.get_flattened_inputs())) for op in func.operations
    )
    return hash((wiring, tuple(id(var) for var in func.outputs)))


def cached(func: Any, numerics: Numerics) -> CompiledFunction | None:
    """The compiled form of ``func`` for these numerics, or None if it cannot be lowered.

    Cached per function object and its wiring, so a program rewritten in place (by
    a pass) is compiled again."""
    entry: _Entries | None = getattr(func, _ATTRIBUTE, None)
    if entry is None:
        entry = _Entries()
        setattr(func, _ATTRIBUTE, entry)
    fingerprint = _fingerprint(func)
    for stale in [key for key in entry if key[2] != fingerprint]:
        del entry[stale]
    key = (numerics.mode, numerics.accumulation, fingerprint)
    if key not in entry:
        try:
            entry[key] = compile_function(func, numerics)
        except NotLowerable as reason:
            _log.debug("simulating op by op: %s", reason)
            entry[key] = None
        except Exception:  # a lowering ONNX Runtime rejects is a bug here, not the user's
            _log.warning("the compiled simulator could not build this program", exc_info=True)
            entry[key] = None
    return entry[key]


def cliff_arguments(record: LoweredOp, values: dict[str, float]) -> dict[str, Any]:
    """Stand-ins for an op's inputs, enough for :meth:`anekit.ops.registry.OpDef.check`:
    each cliff of the op's record makes its own from its probes' values."""
    return op_record(record.op.op_type).stand_ins(record.op, values)
