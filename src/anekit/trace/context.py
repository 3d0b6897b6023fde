"""The state of one trace: the MIL function being built and its bookkeeping.

Every op the tracer records goes through :meth:`TraceContext.emit`, the one
funnel (as JAX's ``bind``): it names the op deterministically, records the user's
source line on it (as a MIL scope, so it survives graph passes, and in a side
table with the full location), and turns a MIL validation failure into a
:class:`~anekit.errors.TraceError` that names the user's line.
"""

from __future__ import annotations

import keyword
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from coremltools.converters.mil.mil import Builder
from coremltools.converters.mil.mil.scope import ScopeInfo
from coremltools.converters.mil.mil.var import Var

from anekit import dtypes
from anekit._coremltools import Function, mb
from anekit._miltext import SOURCE_SCOPE
from anekit.errors import TraceError
from anekit.trace.source import SourceLocation, user_frame, user_location

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_ACTIVE: list[TraceContext] = []


def current() -> TraceContext:
    """The innermost active trace; raises if tracing is not in progress."""
    if not _ACTIVE:
        raise TraceError(
            "a traced value was used after its trace ended",
            location=user_location(),
            hint="do not store traced arrays in globals or return them from the traced "
            "function's closures; call anekit.compile() again instead",
        )
    return _ACTIVE[-1]


def is_valid_name(name: str) -> bool:
    """True when ``name`` can name a MIL input or output."""
    return bool(_IDENTIFIER.match(name)) and not keyword.iskeyword(name)


class TraceContext:
    """Builds one MIL function while a user function runs on tracers."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.locations: dict[str, SourceLocation] = {}
        self._op_counts: Counter[str] = Counter()
        self._names: set[str] = set(function.inputs)
        self._constants: dict[tuple[int, str], tuple[np.ndarray, Var]] = {}
        self._failed = False

    # -- naming --------------------------------------------------------------

    def fresh_name(self, base: str) -> str:
        """A name unused in this trace, ``base_N`` (or ``base`` for named constants)."""
        while True:
            count = self._op_counts[base]
            self._op_counts[base] += 1
            name = f"{base}_{count}"
            if name not in self._names:
                self._names.add(name)
                return name

    def reserve(self, name: str) -> str:
        """Claim ``name`` exactly if free, else a numbered variant of it."""
        if name not in self._names:
            self._names.add(name)
            return name
        return self.fresh_name(name)

    # -- emission --------------------------------------------------------------

    def emit(self, op_type: str, **inputs: Any) -> Any:
        """Record one MIL op ``op_type`` and return its output Var(s)."""
        if self._failed:
            raise TraceError(
                "this trace already failed; its program is incomplete",
                location=user_location(),
                hint="let the first TraceError propagate instead of catching it",
            )
        location = user_location()
        name = inputs.pop("name", None) or self.fresh_name(op_type)
        scope = ScopeInfo(source=SOURCE_SCOPE, data=[str(location) if location else "<anekit>"])
        try:
            with mb.scope(scope):
                result = getattr(mb, op_type)(name=name, **inputs)
        except (ValueError, TypeError, IndexError, AssertionError, NotImplementedError) as error:
            self._failed = True
            described = ", ".join(
                f"{key}={_describe_input(value)}" for key, value in sorted(inputs.items())
            )
            raise TraceError(
                f"MIL op `{op_type}` rejected its inputs ({described}): {error}",
                location=location,
            ) from error
        if location is not None:
            self.locations[name] = location
        return result

    def constant(self, value: np.ndarray, dtype: np.dtype[Any]) -> Var:
        """A ``const`` op holding ``value`` as ``dtype``; one op per captured array."""
        key = (id(value), dtype.str)
        cached = self._constants.get(key)
        if cached is not None:
            return cached[1]
        converted = np.asarray(convert_constant(value, dtype), order="C")
        name = self.reserve(_constant_name(value) or "const")
        var = self.emit("const", val=converted, name=name)
        # Keep `value` alive so that its id() is not reused while the trace runs.
        self._constants[key] = (value, var)
        return var

    @contextmanager
    def active(self) -> Iterator[TraceContext]:
        """Make this the current trace and its function the block MIL ops go into."""
        saved_counts = Builder.name_count
        # coremltools names the constants it creates with a process-wide counter;
        # give each trace its own so that the same function traces to the same names.
        Builder.name_count = type(saved_counts)(int)
        _ACTIVE.append(self)
        try:
            with self.function:
                yield self
        finally:
            _ACTIVE.pop()
            Builder.name_count = saved_counts


def convert_constant(value: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """``value`` as an array of ``dtype``, refusing integers that do not fit."""
    array = np.asarray(value)
    if array.dtype.kind in "iub" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise TraceError(
                f"integer constant out of range for {dtype}: values span "
                f"[{array.min()}, {array.max()}]",
                location=user_location(),
                hint="Core ML computes integers in int32",
            )
    return array.astype(dtype, copy=False)


def _constant_name(value: Any) -> str | None:
    """The user's variable name for a captured array, for readable MIL.

    ``W`` for an array bound to ``W`` in the user's frame, ``W_T`` for ``W.T``.
    """
    frame = user_frame()
    if frame is None:
        return None
    base = getattr(value, "base", None)
    for namespace in (frame.f_locals, frame.f_globals):
        for name, candidate in namespace.items():
            if not is_valid_name(name) or name.startswith("__"):
                continue
            if candidate is value:
                return name
            if base is not None and candidate is base:
                transposed = value.shape == base.shape[::-1] and value.strides == base.strides[::-1]
                return f"{name}_T" if transposed else f"{name}_view"
    return None


def _describe_input(value: Any) -> str:
    if isinstance(value, Var):
        return f"%{value.name}: {value.shape_str()}"
    if isinstance(value, list | tuple):
        if value and all(isinstance(item, Var) for item in value):
            return "[" + ", ".join(_describe_input(item) for item in value) + "]"
        return repr(list(value))
    if isinstance(value, np.ndarray):
        return f"array{tuple(value.shape)}:{value.dtype}"
    return repr(value)


def var_dtype(var: Var) -> np.dtype[Any]:
    """The NumPy dtype of a MIL Var."""
    return dtypes.from_mil(var.dtype)


def var_shape(var: Var) -> tuple[int, ...]:
    """The static shape of a MIL Var."""
    return tuple(int(dim) for dim in var.shape)
