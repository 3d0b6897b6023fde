"""The Core AI emitter: a program after the ANE passes, op by op, as an ``.aimodel``.

Core AI is the framework for neural networks after Core ML (macOS/iOS 27). Its public
Python builder, ``coreai.authoring`` (the extra ``anekit[coreai]``: ``coreai-core``),
builds a module of ``@graph`` functions, verifies it and saves an asset folder
(``main.mlirb``, ``main.hash``, ``metadata.json``); on Linux its bundled CPU runtime
runs the asset (docs/coreai.md). Each op's Core AI lowering lives in its op record
(``@lowers(..., target="coreai")`` in :mod:`anekit.ops.defs`), beside its reference and
its ONNX lowering; an op without one is refused by name before anything is written.

An asset anekit writes from a package also holds that package, the same MIL program,
under ``anekit/`` (:data:`SOURCE_FOLDER`), bound to the asset's bytecode by its SHA-256:
Core AI's bytecode is not read back into MIL, so :func:`asset_source` is how
``anekit.load("x.aimodel")`` gets a program the simulator and the analysis take. Every
asset is checked against its ``main.hash`` before Core AI loads it: coreai-core
1.0.0b3 aborts the whole process (``std::bad_cast``) on corrupt bytecode.

Only the versioned public builder is used, never ``coreai._compiler``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from anekit._aimodel import (
    SOURCE_FOLDER,
    SOURCE_PACKAGE,
    SOURCE_RECORD,
    SUFFIX,
    asset_source,
    bytecode_digest,
    check_asset,
)
from anekit._milgraph import mil_defaults
from anekit.errors import ProgramError
from anekit.runtimes import COREAI_EXTRA

#: What to install when the builder is missing.
EXTRA = COREAI_EXTRA


def authoring() -> Any:
    """``coreai.authoring``, or a :class:`ProgramError` naming the extra to install."""
    try:
        import coreai.authoring
    except ImportError as error:
        raise ProgramError(f"Core AI needs the coreai extra ({EXTRA}): {error}") from None
    return coreai.authoring


class CoreAIBuilder:
    """What a Core AI lowering sees: the builder module (:attr:`ai`), the Core AI value
    of each MIL var (:meth:`value`), and an input's compile-time value (:meth:`param`)."""

    def __init__(self, ai: Any) -> None:
        self.ai = ai
        self.values: dict[str, Any] = {}

    def value(self, var: Any) -> Any:
        """The Core AI value of ``var``: an input or an earlier op's output, or a MIL
        constant made a Core AI constant when first used."""
        if var.name in self.values:
            return self.values[var.name]
        if var.op is not None and var.op.op_type == "const":
            made = self.constant(np.asarray(var.val))
            self.values[var.name] = made
            return made
        raise ProgramError(f"{var.name}: no Core AI value for it (an op before it was skipped?)")

    def constant(self, value: Any) -> Any:
        """A Core AI constant holding ``value`` (an array, in its own dtype)."""
        from coreai.authoring.constant import constant

        return constant(np.asarray(value))

    def scalar(self, value: Any, like: Any) -> Any:
        """A Core AI constant of ``value`` in the dtype of the var ``like``."""
        from anekit._milgraph import numpy_dtype

        return self.constant(np.asarray(value, dtype=numpy_dtype(like)))

    def param(self, op: Any, name: str) -> Any:
        """The compile-time value of ``op``'s input ``name``, or MIL's default for it
        from coremltools' op spec (None: absent)."""
        var = op.inputs.get(name)
        if var is None:
            return mil_defaults(op).get(name)
        if var.op is None or var.op.op_type != "const":
            raise ProgramError(f"{op.op_type} {op.name}: input {name} must be a constant")
        return var.val


def unlowerable(functions: Iterable[Any]) -> dict[str, int]:
    """The op types in ``functions`` without a Core AI lowering, and how often each is
    there (constants are values, not ops, here)."""
    from anekit.ops import defs  # noqa: F401  (fills the op records)
    from anekit.ops.registry import OPS

    missing: dict[str, int] = {}
    for function in functions:
        for op in function.operations:
            if op.op_type == "const":
                continue
            record = OPS.get(op.op_type)
            if record is None or "coreai" not in record.lowerings:
                missing[op.op_type] = missing.get(op.op_type, 0) + 1
    return missing


def _tensor_type(ai: Any, var: Any, name: str | None = None) -> Any:
    shape = getattr(var, "shape", None)
    if shape is None or any(not isinstance(size, int) for size in shape):
        raise ProgramError(f"{var.name}: Core AI needs a static shape, got {shape}")
    from anekit._milgraph import numpy_dtype

    dtype = numpy_dtype(var)
    if dtype is None:
        raise ProgramError(f"{var.name}: not a tensor Core AI can take")
    if name is None:
        return ai.TensorType(tuple(shape), dtype.type)
    return ai.TensorType(tuple(shape), dtype.type, name=name)


def _graph(ai: Any, name: str, function: Any) -> None:
    """Add ``function`` to the module being built as the ``@graph`` entry point ``name``."""
    from anekit.ops.lowering import NotLowerable
    from anekit.ops.registry import OPS

    inputs = list(function.inputs.values())
    outputs = list(function.outputs)

    def body(*args: Any) -> Any:
        builder = CoreAIBuilder(ai)
        for var, arg in zip(inputs, args, strict=True):
            builder.values[var.name] = arg
        for op in function.operations:
            if op.op_type == "const":
                continue
            try:
                lowered: Any = OPS[op.op_type].lowerings["coreai"](builder, op)
            except NotLowerable as why:
                raise ProgramError(
                    f"{op.op_type} {op.name}: Core AI cannot take it: {why}"
                ) from None
            results = lowered if isinstance(lowered, tuple) else (lowered,)
            for var, result in zip(op.outputs, results, strict=True):
                builder.values[var.name] = result
        values = tuple(builder.value(var) for var in outputs)
        return values[0] if len(values) == 1 else values

    parameters = [
        inspect.Parameter(var.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for var in inputs
    ]
    annotations: dict[str, Any] = {
        var.name: Annotated[ai.Value, _tensor_type(ai, var)] for var in inputs
    }
    returned = [Annotated[ai.Value, _tensor_type(ai, var, var.name)] for var in outputs]
    annotations["return"] = returned[0] if len(returned) == 1 else tuple[tuple(returned)]  # type: ignore[misc]
    body.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    body.__annotations__ = annotations
    body.__name__ = body.__qualname__ = name
    ai.graph(body)


def to_coreai(program: Any, functions: Iterable[str] | None = None) -> Any:
    """The ``coreai.authoring.AIProgram`` of ``program``'s ``functions`` (default: all),
    each an ``@graph`` entry point of its name; :class:`ProgramError` naming every op
    type without a Core AI lowering, before anything is built."""
    names = list(program.functions) if functions is None else list(functions)
    missing = [name for name in names if name not in program.functions]
    if missing:
        raise ProgramError(f"the program has no function {', '.join(map(repr, missing))}")
    chosen = [program.functions[name] for name in names]
    if refused := unlowerable(chosen):
        listed = ", ".join(f"{op} ({count})" for op, count in sorted(refused.items()))
        raise ProgramError(f"no Core AI lowering for these ops: {listed}")
    ai = authoring()
    module = ai.Module.create()
    try:
        with module:  # Core AI's rewrites and checks run as the block closes
            for name, function in zip(names, chosen, strict=True):
                _graph(ai, name, function)
        module.verify()
    except ProgramError:
        raise
    except Exception as error:  # the builder's checks and verifier (RuntimeError, ValueError,
        # MLIRError): what a lowering built that Core AI refuses, named in one line
        raise ProgramError(f"Core AI refused the program: {_first_line(error)}") from error
    return ai.AIProgram(module)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)


def save_coreai(
    program: Any,
    path: str | Path,
    functions: Iterable[str] | None = None,
    *,
    source: Path | None = None,
) -> Path:
    """Write ``program`` (a MIL program) as the Core AI asset ``path`` (``.aimodel``),
    atomically: built whole first, then saved in a temporary sibling folder and renamed
    into place (:func:`~anekit.package.saving.save_folder`). ``source``, the package
    ``program`` was read from, is kept inside the asset (:data:`SOURCE_FOLDER`)."""
    target = Path(path)
    if target.suffix != SUFFIX:
        raise ProgramError(f"{target}: a Core AI asset is a folder ending in {SUFFIX}")
    from anekit.package.saving import save_folder

    names = list(program.functions) if functions is None else list(functions)
    built = to_coreai(program, names)

    def write(staged: Path) -> None:
        built.save_asset(staged)
        if source is not None:
            folder = staged / SOURCE_FOLDER
            folder.mkdir()
            shutil.copytree(source, folder / SOURCE_PACKAGE)
            record = {"bytecode_sha256": bytecode_digest(staged), "functions": names}
            (folder / SOURCE_RECORD).write_text(json.dumps(record, indent=1) + "\n", "utf-8")

    return save_folder(target, write)


def save_package_asset(
    package: str | Path, path: str | Path, functions: Iterable[str] | None = None
) -> Path:
    """The Core AI asset ``path`` of the ``.mlpackage`` ``package``: every function (or
    ``functions``) of its MIL program, as Core ML gets it (fp16 inside, compressed
    weights as saved), one ``@graph`` each; the package kept inside the asset."""
    from anekit._mlpackage import read_program

    program, _ = read_program(package)
    return save_coreai(program, path, functions, source=Path(package))


class LoadedAsset:
    """A Core AI asset loaded on Core AI's runtime (on Linux its bundled CPU runtime:
    Apple's reference CPU execution, never an ANE figure), kept loaded until
    :meth:`close`: loaded (and, off macOS, compiled) once for all its functions; each
    call runs one function once. ``specialization`` (macOS only) is Core AI's
    ``SpecializationOptions``, as ``AIModelAsset.executable`` takes it."""

    def __init__(self, path: str | Path, specialization: Any = None) -> None:
        ai = authoring()
        self.path = check_asset(path)
        self._loop = asyncio.new_event_loop()
        self._functions: dict[str, Any] = {}
        try:
            self._executable = ai.AIModelAsset.load(self.path).executable(specialization)
            self._model = self._loop.run_until_complete(self._executable.__aenter__())
        except Exception as error:  # a malformed metadata.json, a runtime that refuses it
            self.close()
            raise ProgramError(
                f"{self.path}: Core AI could not load it: {_first_line(error)}"
            ) from error
        except BaseException:
            self.close()
            raise

    @property
    def function_names(self) -> list[str]:
        return list(self._model.function_names)

    def _function(self, name: str) -> Any:
        if name not in self._functions:
            if name not in self._model.function_names:
                names = ", ".join(self._model.function_names)
                raise ProgramError(f"{self.path}: no function {name!r}; it has {names}")
            self._functions[name] = self._model.load_function(name)
        return self._functions[name]

    def __call__(self, function: str, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        from coreai.runtime import NDArray

        run = self._function(function)
        inputs = {name: NDArray(np.ascontiguousarray(value)) for name, value in feeds.items()}
        outputs = self._loop.run_until_complete(run(inputs))
        return {name: np.asarray(value.numpy()) for name, value in outputs.items()}

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._functions.clear()
        try:
            if hasattr(self, "_model"):  # entered
                self._loop.run_until_complete(self._executable.__aexit__(None, None, None))
        except RuntimeError:
            pass  # Core AI's exit failing leaves nothing of ours to free; the loop still closes
        finally:
            self._loop.close()


class LoadedFunction:
    """One function of a Core AI asset, loaded (:class:`LoadedAsset`) and checked at
    once; each call runs it once."""

    def __init__(
        self, path: str | Path, function: str = "main", specialization: Any = None
    ) -> None:
        self.function = function
        self.asset = LoadedAsset(path, specialization)
        self.path = self.asset.path
        try:
            self.asset._function(function)
        except BaseException:
            self.asset.close()
            raise

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.asset(self.function, feeds)

    def close(self) -> None:
        self.asset.close()


def run_coreai(
    path: str | Path, feeds: Mapping[str, np.ndarray], function: str = "main"
) -> dict[str, np.ndarray]:
    """Run ``function`` of the asset at ``path`` once on Core AI's runtime
    (:class:`LoadedFunction`)."""
    loaded = LoadedFunction(path, function)
    try:
        return loaded(feeds)
    finally:
        loaded.close()


__all__ = [
    "SUFFIX",
    "CoreAIBuilder",
    "LoadedAsset",
    "LoadedFunction",
    "asset_source",
    "authoring",
    "check_asset",
    "run_coreai",
    "save_coreai",
    "save_package_asset",
    "to_coreai",
    "unlowerable",
]
