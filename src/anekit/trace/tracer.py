"""The tracer array: a stand-in for an ndarray that records MIL ops.

A :class:`Tracer` holds a MIL Var, the trace it belongs to, and the names of the
inputs its value depends on (for error messages). Operators come from NumPy's
``NDArrayOperatorsMixin``, which routes them through the NEP-13 ufunc protocol;
NumPy functions arrive through NEP-18 ``__array_function__``. Both end in
:mod:`anekit.trace.numpy_api`, which owns the NumPy-to-MIL lowering rules.

Anything that needs the concrete value (``if x > 0:``, ``float(x)``,
``np.asarray(x)``) raises :class:`~anekit.errors.ConcretizationError` that says
which line and which input, and what to write instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np
from coremltools.converters.mil.mil.var import Var
from numpy.lib.mixins import NDArrayOperatorsMixin

from anekit.errors import ConcretizationError, InPlaceWriteError
from anekit.trace.context import TraceContext, var_dtype, var_shape
from anekit.trace.source import user_location


class Tracer(NDArrayOperatorsMixin):
    """A traced array: static shape and dtype, symbolic value."""

    __slots__ = ("_ctx", "_deps", "_shared", "_var")
    __hash__ = None  # type: ignore[assignment]  # unhashable, like ndarray

    def __init__(self, var: Var, ctx: TraceContext, deps: frozenset[str]) -> None:
        self._var = var
        self._ctx = ctx
        self._deps = deps
        # True once this array shares memory with a view in NumPy's semantics;
        # in-place writes are then refused (they would have to update the view too).
        self._shared = False

    # -- static facts ----------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return var_shape(self._var)

    @property
    def dtype(self) -> np.dtype[Any]:
        return var_dtype(self._var)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def T(self) -> Tracer:
        return _layout.transpose(self)

    @property
    def mT(self) -> Tracer:
        return _layout.swapaxes(self, -1, -2)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tracer]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        for index in range(self.shape[0]):
            yield self[index]

    def __repr__(self) -> str:
        return f"Tracer(shape={self.shape}, dtype={self.dtype}, var=%{self._var.name})"

    # -- NumPy protocols --------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _numpy_api.handle_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(
        self, func: Any, types: tuple[type, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return _numpy_api.handle_function(func, types, args, kwargs)

    def __getitem__(self, key: Any) -> Tracer:
        return _indexing.getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> NoReturn:
        raise InPlaceWriteError(
            "item assignment `x[...] = value` on a traced array",
            location=user_location(),
            hint="build the new array instead: np.where(mask, value, x) to replace "
            "elements, np.concatenate to replace a block",
        )

    # -- concretization errors -----------------------------------------------------

    def _concretize(self, construct: str, hint: str) -> NoReturn:
        inputs = ", ".join(repr(name) for name in sorted(self._deps)) or "no input"
        raise ConcretizationError(
            f"{construct} needs the concrete value of a traced array "
            f"(shape {self.shape}, {self.dtype}, computed from {inputs}); "
            "values are unknown while tracing",
            location=user_location(),
            hint=hint,
        )

    def __bool__(self) -> bool:
        self._concretize(
            "Python control flow (`if`, `while`, `and`, `or`, `not`, bool())",
            "compute both branches and select elementwise with np.where(cond, a, b); "
            "shape-dependent control flow (on x.shape) is fine",
        )

    def __int__(self) -> int:
        self._concretize("int()", "use x.astype(np.int32) to convert elementwise")

    def __float__(self) -> float:
        self._concretize("float()", "use x.astype(np.float32) to convert elementwise")

    def __complex__(self) -> complex:
        self._concretize("complex()", "complex values are not supported")

    def __index__(self) -> int:
        self._concretize(
            "using a traced array as a Python index or size",
            "shapes and Python indices must be static; take them from x.shape",
        )

    def __array__(self, dtype: Any = None, copy: Any = None) -> NoReturn:
        self._concretize(
            "converting to a NumPy array (np.asarray, np.array, indexing a NumPy array "
            "with a traced index, or a NumPy function anekit does not trace)",
            "use np.stack/np.concatenate to combine traced arrays, "
            "anekit.nn.embedding(index, table) to index a constant table; keep NumPy-only "
            "code outside the traced function",
        )

    def item(self, *args: Any) -> NoReturn:
        self._concretize(".item()", "keep the value as an array")

    def tolist(self) -> NoReturn:
        self._concretize(".tolist()", "keep the value as an array")

    # -- ndarray methods (NumPy semantics, lowered by numpy_api) -----------------------

    def astype(
        self, dtype: Any, order: str = "K", casting: str = "unsafe", copy: bool = True
    ) -> Tracer:
        return _layout.astype(self, dtype, casting=casting)

    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> Tracer:
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return _layout.reshape(self, shape, order=order)

    def transpose(self, *axes: Any) -> Tracer:
        order: Any = axes
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
            order = axes[0]
        return _layout.transpose(self, order or None)

    def swapaxes(self, axis1: int, axis2: int) -> Tracer:
        return _layout.swapaxes(self, axis1, axis2)

    def squeeze(self, axis: Any = None) -> Tracer:
        return _layout.squeeze(self, axis)

    def flatten(self, order: str = "C") -> Tracer:
        return _layout.copy(_layout.reshape(self, (-1,), order=order))

    def ravel(self, order: str = "C") -> Tracer:
        return _layout.reshape(self, (-1,), order=order)

    def copy(self, order: str = "C") -> Tracer:
        return _layout.copy(self)

    def sum(
        self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> Any:
        return _reductions.sum_(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def mean(
        self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> Any:
        return _reductions.mean(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def max(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        return _reductions.max_(self, axis=axis, out=out, keepdims=keepdims)

    def min(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        return _reductions.min_(self, axis=axis, out=out, keepdims=keepdims)

    def prod(
        self, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False
    ) -> Any:
        return _reductions.prod(self, axis=axis, dtype=dtype, out=out, keepdims=keepdims)

    def var(
        self,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: float = 0,
        keepdims: bool = False,
    ) -> Any:
        return _reductions.var(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def std(
        self,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: float = 0,
        keepdims: bool = False,
    ) -> Any:
        return _reductions.std(self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def argmax(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        return _reductions.argmax(self, axis=axis, out=out, keepdims=keepdims)

    def argmin(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        return _reductions.argmin(self, axis=axis, out=out, keepdims=keepdims)

    def any(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        return _reductions.any_(self, axis=axis, out=out, keepdims=keepdims)

    def all(self, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        return _reductions.all_(self, axis=axis, out=out, keepdims=keepdims)

    def clip(self, min: Any = None, max: Any = None, out: Any = None) -> Any:
        return _selection.clip(self, min, max, out=out)

    def dot(self, other: Any, out: Any = None) -> Any:
        return _contractions.dot(self, other, out=out)

    def round(self, decimals: int = 0, out: Any = None) -> Any:
        return _selection.round_(self, decimals=decimals, out=out)

    def cumsum(self, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        return _reductions.cumsum(self, axis=axis, dtype=dtype, out=out)

    def take(self, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
        return _selection.take(self, indices, axis=axis, out=out, mode=mode)


# Lowering rules import Tracer, so they are imported after it is defined.
from anekit.trace import contractions as _contractions  # noqa: E402
from anekit.trace import indexing as _indexing  # noqa: E402
from anekit.trace import layout as _layout  # noqa: E402
from anekit.trace import numpy_api as _numpy_api  # noqa: E402
from anekit.trace import reductions as _reductions  # noqa: E402
from anekit.trace import selection as _selection  # noqa: E402
