"""The MIL interpreter: one loop over a function's ops, dispatching on op type.

Values live in a dict keyed by Var; each op's inputs are loaded into compute
form, its implementation runs, and its outputs are stored with the run's
numerics, checked against the shape MIL declares, measured for the numerics
report and freed after their last use. Constants (and decompressed weights) are
stored once per op and numerics mode and reused by later runs.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit import _miltext
from anekit._milgraph import mil_defaults, numpy_dtype, static_shape
from anekit.errors import ProgramError, UnsupportedOpError
from anekit.ops.groups import CONSTANT, VALUE_PRESERVING
from anekit.ops.numerics import Numerics
from anekit.ops.registry import OpContext, record, supported_ops
from anekit.sim.report import NumericsFinding, NumericsReport, OpStats, constant_of

_CONSTANTS: weakref.WeakKeyDictionary[Any, dict[str, tuple[Any, ...]]] = weakref.WeakKeyDictionary()


@dataclass
class SimResult:
    """Outputs of one simulated run, its numerics report, and optionally every value."""

    outputs: dict[str, np.ndarray]
    report: NumericsReport
    seconds: float
    intermediates: dict[str, np.ndarray] | None = None


def _stats(name: str, op_type: str, value: Any, location: str | None) -> OpStats:
    """What the float array ``value`` looks like: its largest |finite value| and its count
    of inf/NaN."""
    array = np.asarray(value)
    max_abs, nonfinite, constant = 0.0, 0, None
    if array.size:
        high, low = float(np.max(array)), float(np.min(array))
        max_abs = max(abs(high), abs(low))
        constant = constant_of(array.shape, high, low)
        if not (np.isfinite(high) and np.isfinite(low)):  # NaN or inf anywhere shows here
            finite = np.isfinite(array)
            nonfinite = int(array.size - np.count_nonzero(finite))
            max_abs = float(np.max(np.abs(array[finite]))) if nonfinite < array.size else 0.0
    return OpStats(name, op_type, tuple(array.shape), max_abs, nonfinite, location, constant)


def _is_float(value: Any) -> bool:
    return isinstance(value, np.ndarray | np.generic) and np.asarray(value).dtype.kind == "f"


@dataclass(frozen=True, eq=False)
class _Origin:
    """Where a value's inf/NaN started: an op that produced them, or a constant."""

    stats: OpStats
    reason: str


def _reads(op: Any) -> list[Any]:
    """The values ``op`` reads, those its nested blocks read from outside included."""
    found = list(op.get_flattened_inputs())
    for block in op.blocks:
        found += block.outputs
        for inner in block.operations:
            found += _reads(inner)
    return found


def check_feeds(func: Any, feeds: Mapping[str, Any]) -> None:
    """Refuse missing, unknown or misshapen inputs, naming them."""
    unknown = sorted(set(feeds) - set(func.inputs))
    if unknown:
        raise ProgramError(
            f"unknown input(s) {', '.join(map(repr, unknown))}; "
            f"the function takes {', '.join(func.inputs)}"
        )
    for input_name, var in func.inputs.items():
        if input_name not in feeds:
            raise ProgramError(f"missing input {input_name!r}")
        shape = static_shape(var)
        if shape is not None and np.shape(feeds[input_name]) != shape:
            raise ProgramError(
                f"input {input_name!r} must have shape {shape}, got {np.shape(feeds[input_name])}"
            )


class _Run:
    """The state of one interpretation of one function."""

    def __init__(self, func: Any, name: str, numerics: Numerics, intermediate: bool) -> None:
        self.func = func
        self.numerics = numerics
        self.env: dict[int, Any] = {}
        self.origins: dict[int, _Origin] = {}
        self.reported: set[int] = set()
        self.report = NumericsReport(
            mode=numerics.mode, accumulation=numerics.accumulation, function=name
        )
        self.kept: dict[str, np.ndarray] | None = {} if intermediate else None
        self.last_use: dict[int, int] = {}
        for index, op in enumerate(func.operations):
            for var in _reads(op):
                self.last_use[id(var)] = index
        for var in func.outputs:
            self.last_use[id(var)] = len(func.operations)

    # -- inputs -----------------------------------------------------------------------

    def feed(self, feeds: Mapping[str, Any]) -> None:
        check_feeds(self.func, feeds)
        for input_name, var in self.func.inputs.items():
            value = np.asarray(feeds[input_name])
            stored = self.numerics.store(self.numerics.load(value), numpy_dtype(var))
            self.env[id(var)] = stored
            if _is_float(stored) and not bool(np.isfinite(stored).all()):
                stats = _stats(input_name, "input", stored, None)
                reason = "does not fit fp16" if np.isfinite(value).all() else "holds inf/NaN"
                self.origins[id(var)] = _Origin(stats, f"values of the input: it {reason}")

    def arguments(self, op: Any) -> dict[str, Any]:
        """The op's inputs by MIL name, in compute form, with MIL's defaults filled in."""
        values: dict[str, Any] = {}
        for name, var in op.inputs.items():
            if isinstance(var, list | tuple):
                values[name] = [self.numerics.load(self.env[id(item)]) for item in var]
            else:
                values[name] = self.numerics.load(self.env[id(var)])
        for name, value in mil_defaults(op).items():
            values.setdefault(name, value)
        return values

    # -- execution --------------------------------------------------------------------

    def execute(self, index: int | None, op: Any) -> None:
        """Run ``op``; at top level (``index`` given) free the values it used last."""
        if op.op_type in CONSTANT:
            self._constant(op)
        else:
            self._compute(op)
        if index is not None:
            for var in _reads(op):
                if self.last_use.get(id(var)) == index:
                    self.env.pop(id(var), None)

    def run_block(self, block: Any, values: list[Any]) -> list[Any]:
        """A nested block (a ``cond`` branch, a ``while_loop`` body) on its input values;
        it also reads values of the blocks around it."""
        for var, value in zip(block.inputs, values, strict=True):
            self.env[id(var)] = value
        for op in block.operations:
            self.execute(None, op)
        return [self.numerics.load(self.env[id(var)]) for var in block.outputs]

    def _call(self, op: Any, arguments: dict[str, Any]) -> tuple[tuple[Any, ...], bool]:
        impl = record(op.op_type).reference
        if impl is None:
            where = _miltext.op_location(op)
            raise UnsupportedOpError(
                f"the simulator has no implementation of MIL op `{op.op_type}` (op {op.name!r}"
                + (f", traced from {where}" if where else "")
                + f"); it runs: {', '.join(supported_ops())}"
            )
        ctx = OpContext(numerics=self.numerics, op=op, run_block=self.run_block)
        try:
            result = impl(ctx, **arguments)
        except (UnsupportedOpError, ProgramError):
            raise
        except Exception as error:
            shapes = ", ".join(
                f"{key}={np.shape(value)}"
                for key, value in arguments.items()
                if not isinstance(value, list | str)
            )
            raise ProgramError(
                f"simulating op {op.name!r} ({op.op_type}) failed: {error}; input shapes {shapes}"
            ) from error
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(op.outputs):
            raise ProgramError(
                f"op {op.name!r} ({op.op_type}) returned {len(results)} values "
                f"for {len(op.outputs)} outputs"
            )
        location = _miltext.op_location(op)
        for note in ctx.notes:
            self.report.warnings.append(
                NumericsFinding(note.rule, op.name, op.op_type, note.message, location)
            )
        return results, ctx.stored

    def _store(self, op: Any, var: Any, value: Any, already_stored: bool = False) -> Any:
        dtype = numpy_dtype(var)
        preserved = already_stored or op.op_type in VALUE_PRESERVING
        if preserved and _is_float(value) and value.dtype == np.float32:
            stored = value  # rounded by the op, or stored values moved or selected
        else:
            stored = self.numerics.store(value, dtype)
        shape = static_shape(var) if dtype is not None else None
        if shape is not None and np.shape(stored) != shape:
            raise ProgramError(
                f"simulator bug: op {op.name!r} ({op.op_type}) produced shape "
                f"{np.shape(stored)}, MIL declares {shape}"
            )
        return stored

    def _constant(self, op: Any) -> None:
        """Store a constant once per numerics mode, noting inf/NaN it holds once stored.

        A constant holds inf/NaN either because its value does not fit fp16
        (``finfo(float32).min`` as a mask fill) or because the package already stores
        inf (an fp16 conversion did). That is only reported when the values reach a
        computed result: an infinite clip bound is harmless.
        """
        cache = _CONSTANTS.setdefault(op, {})
        key = f"{self.numerics.mode}"
        if key not in cache:
            results, _ = self._call(op, {})
            stored = tuple(
                self._store(op, var, value) for var, value in zip(op.outputs, results, strict=True)
            )
            finite_source = tuple(
                not _is_float(value) or bool(np.isfinite(value).all()) for value in results
            )
            cache[key] = (stored, finite_source)
        stored, finite_source = cache[key]
        for var, value, was_finite in zip(op.outputs, stored, finite_source, strict=True):
            self.env[id(var)] = value
            if _is_float(value) and not bool(np.isfinite(value).all()):
                reason = "does not fit fp16 (|x| > 65504)" if was_finite else "holds inf/NaN"
                stats = _stats(var.name, op.op_type, value, _miltext.op_location(op))
                self.origins[id(var)] = _Origin(stats, f"values of the constant: it {reason}")
            dtype = numpy_dtype(var)
            if self.kept is not None and dtype is not None:
                self.kept[var.name] = self.numerics.export(value, dtype)

    def _compute(self, op: Any) -> None:
        arguments = self.arguments(op)
        results, already_stored = self._call(op, arguments)
        for var, value in zip(op.outputs, results, strict=True):
            stored = self._store(op, var, value, already_stored)
            self.env[id(var)] = stored
            dtype = numpy_dtype(var)
            if dtype is not None and dtype.kind == "f":
                self._record(op, var, stored, arguments)
            if self.kept is not None and dtype is not None:
                self.kept[var.name] = self.numerics.export(stored, dtype)

    # -- reporting --------------------------------------------------------------------

    def _record(self, op: Any, var: Any, stored: Any, arguments: Mapping[str, Any]) -> None:
        location = _miltext.op_location(op)
        stats = _stats(var.name, op.op_type, stored, location)
        self.report.ops.append(stats)
        if stats.nonfinite:
            sources = (self.origins.get(id(source)) for source in op.get_flattened_inputs())
            inherited = next((origin for origin in sources if origin is not None), None)
            origin = inherited or _Origin(stats, "values are inf/NaN from finite inputs")
            self.origins[id(var)] = origin
            self._report_origin(origin)
        for rule, message in record(op.op_type).check(op, arguments, stats.max_abs):
            self.report.warnings.append(
                NumericsFinding(rule, var.name, op.op_type, message, location)
            )

    def _report_origin(self, origin: _Origin) -> None:
        """Report where inf/NaN started, once per source."""
        if id(origin) in self.reported:
            return
        self.reported.add(id(origin))
        stats = origin.stats
        if self.report.first_nonfinite is None:
            self.report.first_nonfinite = stats
        if stats.op_type in CONSTANT or stats.op_type == "input":
            self.report.ops.append(stats)
        total = int(np.prod(stats.shape, dtype=np.int64))
        message = f"{stats.nonfinite} of {total} {origin.reason}"
        self.report.warnings.append(
            NumericsFinding("sim.nonfinite", stats.name, stats.op_type, message, stats.location)
        )

    def outputs(self) -> dict[str, np.ndarray]:
        result = {}
        for var in self.func.outputs:
            dtype = numpy_dtype(var)
            value = self.env[id(var)]
            result[var.name] = self.numerics.export(value, dtype) if dtype is not None else value
        return result


#: How the simulator runs a program (``executor=``).
EXECUTORS = ("auto", "interpreter", "compiled")
#: :data:`EXECUTORS`' older name.
ENGINES = EXECUTORS


def _executor(executor: str, engine: str | None) -> str:
    """``executor``, or ``engine`` (its deprecated older name) when given."""
    if engine is None:
        return executor
    if executor != "auto":
        raise ProgramError("give executor, not engine too (engine is its older name)")
    import warnings

    warnings.warn("sim.run(engine=...) is now executor=...", DeprecationWarning, stacklevel=3)
    return engine


def run(
    program: Any,
    feeds: Mapping[str, Any],
    *,
    mode: str = "ane",
    accumulation: str = "fp16",
    function: str | None = None,
    intermediate: bool = False,
    executor: str = "auto",
    engine: str | None = None,
) -> SimResult:
    """Simulate ``function`` of a MIL ``program`` on ``feeds``.

    ``mode="ane"`` stores every float value in fp16 (the Neural Engine's
    arithmetic), ``mode="fp32"`` computes reference math. ``accumulation`` picks
    how sums accumulate in ``ane`` mode. With ``intermediate=True`` every value is
    returned too, by Var name, for fp16-vs-fp32 diffing. In ``fp32`` mode sums are
    float32 sums, and the report says ``accumulation="fp32"``.

    ``executor="auto"`` runs the program as one compiled ONNX Runtime graph when
    every op can be lowered (:mod:`anekit.sim.compiled`) and no inf/NaN appears,
    and through the op-by-op interpreter otherwise; both follow the same
    semantics, the interpreter's being the definition. ``engine=`` is its deprecated
    older name.
    """
    executor = _executor(executor, engine)
    if mode == "fp32":
        accumulation = "fp32"  # fp32 mode sums in float32 whatever was asked: say so
    numerics = Numerics(mode, accumulation)  # type: ignore[arg-type]
    if executor not in EXECUTORS:
        raise ProgramError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    name = function or "main"
    if name not in program.functions:
        raise ProgramError(
            f"the program has no function {name!r}; it has {', '.join(program.functions)}"
        )
    func = program.functions[name]
    start = time.perf_counter()
    if executor != "interpreter" and not intermediate:
        from anekit.sim import compiled

        lowered = compiled.cached(func, numerics)
        if lowered is None and executor == "compiled":
            raise ProgramError(f"function {name!r} has ops the compiled engine cannot run")
        if lowered is not None:
            result = _run_compiled(lowered, func, name, feeds, numerics, start)
            if result is not None or executor == "compiled":
                if result is None:
                    raise ProgramError(
                        "the compiled run produced inf/NaN or failed on these values; "
                        "use the interpreter"
                    )
                return result
    state = _Run(func, name, numerics, intermediate)
    state.feed(feeds)
    for index, op in enumerate(state.func.operations):
        state.execute(index, op)
    outputs = state.outputs()
    return SimResult(outputs, state.report, time.perf_counter() - start, state.kept)


def _run_compiled(
    lowered: Any, func: Any, name: str, feeds: Mapping[str, Any], numerics: Numerics, start: float
) -> SimResult | None:
    """One compiled run; None when inf/NaN appeared or ONNX Runtime refused the values
    (the interpreter then reports them)."""
    from anekit.sim.compiled import cliff_arguments

    check_feeds(func, feeds)
    ort_feeds = {}
    for input_name in lowered.input_names:
        value = np.asarray(feeds[input_name])
        dtype = numpy_dtype(func.inputs[input_name])
        target = np.float32 if dtype is not None and dtype.kind == "f" else dtype
        ort_feeds[f"in_{input_name}"] = np.ascontiguousarray(value.astype(target, copy=False))
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

    try:
        results = lowered.session.run(None, ort_feeds)
    except (Fail, InvalidArgument, RuntimeException):
        return None  # ONNX Runtime refused the values (an index out of bounds): the
        # interpreter runs the program and names the op and the reason
    count = len(lowered.output_vars)
    values = iter(float(value) for value in results[count:])
    report = NumericsReport(mode=numerics.mode, accumulation=numerics.accumulation, function=name)
    for lowered_op in lowered.records:
        op, var = lowered_op.op, lowered_op.var
        high, total = next(values), next(values)
        probes = {key: next(values) for key in lowered_op.probes}
        if not np.isfinite(total) or not all(np.isfinite(list(probes.values()))):
            return None
        low = probes.pop("low")
        peak = max(abs(high), abs(low))
        location = _miltext.op_location(op)
        shape = static_shape(var) or ()
        constant = constant_of(shape, high, low)
        report.ops.append(OpStats(var.name, op.op_type, shape, peak, 0, location, constant))
        arguments = cliff_arguments(lowered_op, probes)
        for rule, message in record(op.op_type).check(op, arguments, peak):
            report.warnings.append(NumericsFinding(rule, var.name, op.op_type, message, location))
    outputs = {}
    for var, value in zip(lowered.output_vars, results[:count], strict=True):
        dtype = numpy_dtype(var)
        outputs[var.name] = (
            numerics.export(np.asarray(value), dtype) if dtype is not None else value
        )
    return SimResult(outputs, report, time.perf_counter() - start)
