"""``CompiledProgram``: a MIL program with its I/O contract, ready to save or run."""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit import _miltext, dtypes
from anekit._coremltools import (
    Program,
    core_ml_runtime_available,
    ct,
    quiet_passes,
    shared_consts,
)
from anekit._version import __version__
from anekit.backends import LoadRequest, RunReport
from anekit.errors import ProgramError
from anekit.package.compression import METADATA_KEY, Compression, CompressionReport, compress_model
from anekit.package.saving import package_target, record_io_widths, save_package
from anekit.specs import IOContract, OutputTree, TensorSpec, widened

#: Deployment targets a traced program may name (ML programs need iOS 16 / macOS 13
#: or later for the ops the tracer emits).
DEPLOYMENT_TARGETS = (
    "macOS13",
    "macOS14",
    "macOS15",
    "macOS26",
    "iOS16",
    "iOS17",
    "iOS18",
    "iOS26",
)


def deployment_target_from_name(name: str) -> Any:
    """``ct.target.macOS15`` for ``"macOS15"``; a clear error for anything else."""
    available = [target for target in DEPLOYMENT_TARGETS if hasattr(ct.target, target)]
    if name not in available:
        raise ProgramError(
            f"unknown deployment target {name!r}; choose one of {', '.join(available)}"
        )
    return getattr(ct.target, name)


def _spec(var: Any, name: str) -> TensorSpec:
    return TensorSpec(tuple(int(dim) for dim in var.shape), dtypes.from_mil(var.dtype), name)


def _cast_input(spec: TensorSpec, array: np.ndarray, problems: list[str]) -> np.ndarray:
    """``array`` as ``spec.dtype``; finite values that the cast turns into inf are
    recorded in ``problems`` (a float32 70000 is inf in fp16)."""
    with np.errstate(over="ignore"):
        cast = array.astype(spec.dtype)
    if array.dtype.kind == "f" and spec.dtype.kind == "f":
        lost = np.isfinite(array) & ~np.isfinite(cast)
        if lost.any():
            largest = float(np.abs(array[lost]).max())
            problems.append(
                f"input {spec.name!r}: {int(lost.sum())} value(s) beyond {spec.dtype}'s range "
                f"(largest |value| {largest:g}, max {float(np.finfo(spec.dtype).max):g}) "
                "became inf in the cast"
            )
    return cast


def _described(
    specs: Sequence[TensorSpec], arrays: Sequence[np.ndarray]
) -> tuple[tuple[str, tuple[int, ...], str, int], ...]:
    """``(name, shape, dtype, bytes)`` of each array, for run reports."""
    return tuple(
        (str(spec.name), tuple(array.shape), str(array.dtype), int(array.nbytes))
        for spec, array in zip(specs, arrays, strict=True)
    )


@dataclass(frozen=True)
class OpInfo:
    """One op of a program, for listings: name, type, output types, user line."""

    name: str
    op_type: str
    outputs: tuple[str, ...]
    location: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.op_type,
            "outputs": list(self.outputs),
            "location": self.location,
        }


@dataclass(frozen=True)
class WeightInfo:
    """A weight tensor of a program (a float ``const``)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    nbytes: int


def io_specs(function: Any) -> tuple[TensorSpec, ...]:
    """A function's inputs and outputs as specs (to compare before and after passes)."""
    inputs = tuple(_spec(var, name) for name, var in function.inputs.items())
    return inputs + tuple(_spec(var, var.name) for var in function.outputs)


def finalize(
    program: Program,
    *,
    function_name: str = "main",
    source: str,
    deployment_target: str,
    output_tree: OutputTree | None = None,
    before: tuple[TensorSpec, ...] | None = None,
    locations: dict[str, Any] | None = None,
    passes: bool = True,
    skip_passes: Sequence[str] = (),
    extra_passes: Sequence[str] = (),
    pass_options: Mapping[str, Mapping[str, Any]] | None = None,
    compress: str | Compression | None = None,
) -> CompiledProgram:
    """What every frontend ends with: run the ANE passes on ``program`` (unless
    ``passes=False``), note the inputs and outputs they widened against ``before``
    (default: the function's I/O as it is now) and wrap it as a :class:`CompiledProgram`.

    ``output_tree`` defaults to one output as an array, several as a dict; ``compress``
    is a weight compression spec (:mod:`anekit.package.compression`).
    """
    compression = None if compress is None else Compression.parse(compress)
    before = before if before is not None else io_specs(program.functions[function_name])
    report = None
    if passes:
        from anekit.passes import run_pipeline

        report = run_pipeline(
            program, disable=skip_passes, enable=extra_passes, options=pass_options
        )
    function = program.functions[function_name]
    if output_tree is None:
        output_tree = "single" if len(function.outputs) == 1 else "dict"
    return CompiledProgram(
        program,
        function_name=function_name,
        output_tree=output_tree,
        source=source,
        deployment_target=deployment_target,
        locations=locations,
        io_widths=widened(before, io_specs(function)),
        pass_report=report,
        compression=compression,
    )


class CompiledProgram:
    """A MIL program, one of its functions, and the contract to call it.

    ``program`` is a coremltools MIL ``Program``: exactly as traced (NumPy dtypes
    and semantics) for :func:`anekit.compile`, or as read back from a package for
    :func:`anekit.load`. :meth:`save` lowers it with coremltools' default pass
    pipeline at fp16 compute precision into an ``.mlpackage``.
    """

    def __init__(
        self,
        program: Program,
        *,
        function_name: str = "main",
        output_tree: OutputTree = "single",
        source: str = "<program>",
        deployment_target: Any = "macOS15",
        locations: dict[str, Any] | None = None,
        converted: bool = False,
        io_widths: dict[str, int] | None = None,
        pass_report: Any = None,
        package_path: Path | None = None,
        compression: Compression | None = None,
    ) -> None:
        if function_name not in program.functions:
            raise ProgramError(
                f"the program has no function {function_name!r}; "
                f"it has {', '.join(program.functions)}"
            )
        self._program = program
        self._function_name = function_name
        self._output_tree = output_tree
        self._source = source
        self._target = (
            deployment_target_from_name(deployment_target)
            if isinstance(deployment_target, str)
            else deployment_target
        )
        self.deployment_target = (
            deployment_target if isinstance(deployment_target, str) else str(deployment_target.name)
        )
        self.locations = dict(locations or {})
        #: True when :attr:`program` is already what a package holds (read back from
        #: one); False for traced programs, which :meth:`lowered` converts.
        self.converted = converted
        self._lowered: Program | None = None
        #: The package this program was read from (``anekit.load``), else None.
        self.package_path = package_path
        #: What anekit's ANE passes changed (``anekit.passes.PassReport``), if they ran.
        self.pass_report = pass_report
        #: How the package stores the weights (None: fp16), and what that did to each
        #: weight once the program was converted (:meth:`to_mlmodel`).
        self.compression = compression
        self.compression_report: CompressionReport | None = None
        function = program.functions[function_name]
        #: The inputs and outputs as stored and as callers see them: a pass that
        #: widened a last axis (``pad_io_width``) is undone here, inputs padded with
        #: zeros and outputs sliced back.
        self.io = IOContract(
            tuple(_spec(var, name) for name, var in function.inputs.items()),
            tuple(_spec(var, var.name) for var in function.outputs),
            dict(io_widths or {}),
        )
        self._input_specs, self._output_specs = self.io.inputs, self.io.outputs
        self._sessions: dict[str, Any] = {}
        #: How the last call ran (backend, simulated or not, numerics report).
        self.last_run: RunReport | None = None

    @property
    def io_widths(self) -> dict[str, int]:
        """Inputs and outputs whose last axis ``pad_io_width`` padded: name -> the
        width callers see."""
        return self.io.widths

    # -- contract -------------------------------------------------------------------

    @property
    def program(self) -> Program:
        """The MIL program (coremltools ``Program``)."""
        return self._program

    @property
    def function_name(self) -> str:
        """The function of :attr:`program` this object runs and saves."""
        return self._function_name

    @property
    def input_specs(self) -> tuple[TensorSpec, ...]:
        return self._input_specs

    @property
    def output_specs(self) -> tuple[TensorSpec, ...]:
        return self._output_specs

    @property
    def source(self) -> str:
        """Where the program came from: ``module.qualname`` or a package path."""
        return self._source

    def ops(self) -> list[OpInfo]:
        """The program's ops in order, constants included."""
        function = self.program.functions[self.function_name]
        return [
            OpInfo(
                name=op.name,
                op_type=op.op_type,
                outputs=tuple(
                    _miltext.type_text(var)
                    if var.name == op.name
                    else f"{var.name}: {_miltext.type_text(var)}"
                    for var in op.outputs
                ),
                location=_miltext.op_location(op),
            )
            for op in function.operations
        ]

    def weights(self) -> list[WeightInfo]:
        """The program's weight tensors: float constants with at least one dimension."""
        function = self.program.functions[self.function_name]
        found = []
        for op in function.operations:
            value = op.outputs[0].val if op.op_type == "const" else None
            if value is None or np.ndim(value) == 0 or np.asarray(value).dtype.kind != "f":
                continue
            array = np.asarray(value)
            found.append(WeightInfo(op.name, tuple(array.shape), array.dtype, int(array.nbytes)))
        return found

    def mil_text(self) -> str:
        """A readable dump of the program, each op with the user line that made it."""
        return _miltext.format_program(self.program)

    def __repr__(self) -> str:
        inputs = ", ".join(spec.describe() for spec in self.input_specs)
        outputs = ", ".join(spec.describe() for spec in self.output_specs)
        count = sum(1 for op in self.ops() if op.op_type != "const")
        return f"<CompiledProgram {self.source}({inputs}) -> ({outputs}), {count} ops>"

    # -- packaging ------------------------------------------------------------------

    def to_mlmodel(self) -> Any:
        """Convert to a coremltools ``MLModel`` (mlprogram, fp16 compute precision), its
        weights compressed as :attr:`compression` says (the outcome per weight in
        :attr:`compression_report`).

        On machines without Core ML the model is spec-only (``skip_model_load``).
        """
        program = self._single_function_copy()
        with quiet_passes(), shared_consts():
            model = ct.convert(
                program,
                convert_to="mlprogram",
                minimum_deployment_target=self._target,
                compute_precision=ct.precision.FLOAT16,
                skip_model_load=not core_ml_runtime_available(),
            )
        if self.compression is not None:
            model, self.compression_report = compress_model(model, self.compression)
            model.user_defined_metadata[METADATA_KEY] = self.compression_report.metadata()
        model.author = "anekit"
        model.version = __version__
        model.short_description = f"{self.source}, traced by anekit {__version__}"
        model.user_defined_metadata["anekit.version"] = __version__
        model.user_defined_metadata["anekit.source"] = self.source
        record_io_widths(model.user_defined_metadata, {"main": self.io_widths})
        for specs, description in (
            (self.input_specs, model.input_description),
            (self.output_specs, model.output_description),
        ):
            for spec in specs:
                padded = (
                    " (last axis zero-padded to the package's width)"
                    if str(spec.name) in self.io_widths
                    else ""
                )
                description[spec.name] = spec.describe() + padded
        return model

    def lowered(self) -> Program:
        """The program as it goes into a package: coremltools' default pass pipeline
        at fp16 compute precision applied (what the ANE would run), the weights
        compressed when :attr:`compression` says so. Cached."""
        if self.converted:
            return self._program
        if self._lowered is None and self.compression is not None:
            self._lowered = self.to_mlmodel()._mil_program
        if self._lowered is None:
            with quiet_passes(), shared_consts():
                self._lowered = ct.convert(
                    self._single_function_copy(),
                    convert_to="milinternal",
                    minimum_deployment_target=self._target,
                    compute_precision=ct.precision.FLOAT16,
                )
        return self._lowered

    def _single_function_copy(self) -> Program:
        """A deep copy of the program holding only this function, named ``main``."""
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20_000))  # deep op graphs recurse in deepcopy
        try:
            program = copy.deepcopy(self._program)
        finally:
            sys.setrecursionlimit(limit)
        function = program.functions[self._function_name]
        program.functions.clear()
        program.functions["main"] = function
        return program

    def save(self, path: str | Path) -> Path:
        """Write the program as an ``.mlpackage`` at ``path`` and return the path: whole
        or not at all (:func:`~anekit.package.saving.save_package`; a package already
        there is replaced once the new one is complete). A path ending in ``.aimodel``
        writes a Core AI asset of the same program instead (the package's MIL program,
        fp16 inside, its function ``main``, the package kept inside the asset:
        :func:`~anekit.package.coreai.save_package_asset`; the extra ``anekit[coreai]``)."""
        if Path(path).suffix == ".aimodel":
            import tempfile

            from anekit.package.coreai import authoring, save_package_asset

            authoring()  # the missing extra named before the conversion
            with tempfile.TemporaryDirectory(prefix="anekit-asset-") as scratch:
                package = save_package(self.to_mlmodel(), Path(scratch) / "source.mlpackage")
                return save_package_asset(package, path)
        target = package_target(path)  # refused before the conversion, not after it
        return save_package(self.to_mlmodel(), target)

    def load_request(self) -> LoadRequest:
        """What a backend gets to load this program: the MIL program, the function, the
        I/O contract, and the lowering and saving as callables (run only if the backend
        needs them)."""
        return LoadRequest(
            program=self._program,
            function=self._function_name,
            contract=self.io,
            lowered=self.lowered,
            save=self.save,
            source=self._source,
            converted=self.converted,
            package=self.package_path,
            compression=None if self.compression is None else self.compression.name,
        )

    # -- running --------------------------------------------------------------------

    def unload(self) -> None:
        """Drop the sessions this program holds on backends; the next call loads again."""
        self._sessions.clear()

    def prepare(self, backend: str | None = None, mode: str | None = None) -> float | None:
        """Load the program on ``backend`` now (Core ML and the direct path compile it),
        so that the first call is not the slow one; the seconds it took (None: it was
        already loaded). The arguments are :meth:`__call__`'s."""
        return self._session(backend, mode)[1]

    def _session(self, backend: str | None, mode: str | None) -> tuple[Any, float | None]:
        """The session on the chosen backend, loaded on first use, and the seconds that
        load took (None: it was already loaded)."""
        from anekit.backends import select_backend

        chosen = select_backend(backend if backend is not None else ("sim" if mode else None))
        key = f"{chosen.name}:{mode or ''}"
        if key in self._sessions:
            return self._sessions[key], None
        started = time.perf_counter()
        session = chosen.load(self.load_request(), mode=mode)
        self._sessions[key] = session
        return session, time.perf_counter() - started

    def _feeds(
        self, arrays: tuple[Any, ...], problems: list[str] | None = None
    ) -> dict[str, np.ndarray]:
        """Inputs by name, checked, cast and padded; ``problems`` collects what the
        casts lost (values beyond the input dtype's range)."""
        problems = [] if problems is None else problems
        if len(arrays) != len(self.input_specs):
            expected = ", ".join(spec.describe() for spec in self.input_specs)
            raise ProgramError(
                f"{self.source} takes {len(self.input_specs)} input(s) ({expected}), "
                f"got {len(arrays)}"
            )
        feeds: dict[str, np.ndarray] = {}
        for spec, value in zip(self.input_specs, arrays, strict=True):
            array = np.asarray(value)
            if array.shape != spec.shape:
                raise ProgramError(
                    f"input {spec.name!r} must have shape {spec.shape}, got {array.shape}; "
                    "compiled programs have static shapes: compile again for this shape"
                )
            if array.dtype != spec.dtype:
                if not np.can_cast(array.dtype, spec.dtype, casting="same_kind"):
                    raise ProgramError(
                        f"input {spec.name!r} must be {spec.dtype}, got {array.dtype}"
                    )
                array = _cast_input(spec, array, problems)
            feeds[str(spec.name)] = self.io.pad(spec.name, array)
        return feeds

    def package_feeds(self, feeds: dict[str, Any]) -> dict[str, np.ndarray]:
        """Inputs by name, as callers shape them, made ready for :attr:`program`: inputs
        that ``pad_io_width`` widened are zero-padded (for ``sim.run`` and backends)."""
        missing = [str(spec.name) for spec in self.input_specs if str(spec.name) not in feeds]
        if missing:
            raise ProgramError(f"{self.source}: no value for input(s) {', '.join(missing)}")
        return self._feeds(tuple(feeds[str(spec.name)] for spec in self.input_specs))

    def _output_problems(self, results: list[np.ndarray]) -> list[str]:
        """Garbage in the outputs: a simulated run's numerics report names where it
        started; otherwise inf/NaN values are counted."""
        from anekit.sim.report import output_problems

        outputs = {
            str(spec.name): value for spec, value in zip(self.output_specs, results, strict=True)
        }
        report = self.last_run.numerics if self.last_run is not None else None
        return report.output_problems(outputs) if report is not None else output_problems(outputs)

    def __call__(
        self,
        *arrays: Any,
        backend: str | None = None,
        mode: str | None = None,
        strict: bool | None = None,
    ) -> Any:
        """Run the program on the best available backend (or the one named).

        On a Mac that is Core ML (``CPU_AND_NE``); elsewhere the ANE simulator, in
        ``ane`` numerics unless ``mode="fp32"``. ``mode`` is the backend's option:
        ``ane``/``fp32`` (sim), ``fp32``/``int8`` (onnx), the compute units (coreml:
        ``CPU_AND_NE``, ``CPU_AND_GPU``, ``CPU_ONLY``, ``ALL``). :attr:`last_run` says
        which ran and holds the simulator's numerics report or Core ML's compute plan.

        Garbage is never silent: an input that becomes inf when cast to fp16, and a
        simulated output with inf/NaN or zeroed by an overflow upstream, warn with a
        :class:`~anekit.errors.NumericsWarning` naming the op and your line, and are
        listed in ``last_run.describe()``. ``strict=True`` (or
        ``ANEKIT_STRICT_NUMERICS=1``) raises :class:`~anekit.errors.NumericsError`.
        """
        from anekit.sim.report import alarm

        problems: list[str] = []
        feeds = self._feeds(arrays, problems)
        session, load_seconds = self._session(backend, mode)
        outputs = session.predict(feeds)
        results = self._unpacked(outputs)
        self.last_run = session.last_run
        problems += self._output_problems(results)
        if self.last_run is not None:
            self.last_run = dataclasses.replace(
                self.last_run,
                problems=tuple(problems),
                function=self.function_name,
                load_seconds=load_seconds,
                inputs=_described(self.input_specs, [feeds[str(s.name)] for s in self.input_specs]),
                outputs=_described(self.output_specs, results),
            )
        alarm(problems, strict=strict)
        return self._tree(results)

    def results_of(self, outputs: Mapping[str, np.ndarray]) -> Any:
        """What a call returns, from a session's outputs (by the package's output names;
        for callers that run :meth:`package_feeds` on a session of their own)."""
        return self._tree(self._unpacked(outputs))

    def _unpacked(self, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The outputs in the caller's shapes and dtypes (``pad_io_width``'s padding off)."""
        results = []
        for package, spec in zip(self.io.package_outputs, self.output_specs, strict=True):
            value = np.asarray(outputs[str(package.name)]).reshape(package.shape)
            value = self.io.unpad(spec.name, value)
            results.append(value.astype(spec.dtype, copy=False))
        return results

    def _tree(self, results: list[np.ndarray]) -> Any:
        tree = self._output_tree
        if tree == "single" and len(results) == 1:
            return results[0]
        if tree in ("dict", "single"):
            return {
                str(spec.name): result
                for spec, result in zip(self.output_specs, results, strict=True)
            }
        return tuple(results) if tree == "tuple" else results
