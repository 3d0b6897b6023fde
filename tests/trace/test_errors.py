"""Every tracer error path: the right exception, naming the construct and the user's line.

The offending line of each case carries a ``# line:NAME`` marker; the tests check
that the message names this file and that line.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit import errors

F32 = np.float32
X = np.ones((4, 3), F32)
_SOURCE = Path(__file__).read_text().splitlines()
_ESCAPED: list[Any] = []


def line(marker: str) -> int:
    """The line number of the line tagged ``# line:<marker>``."""
    tag = f"# line:{marker}"
    matches = [number for number, text in enumerate(_SOURCE, 1) if text.rstrip().endswith(tag)]
    assert len(matches) == 1, f"marker {marker!r} found {len(matches)} times"
    return matches[0]


def expect_error(
    kind: type[errors.AnekitError],
    fn: Callable[..., Any],
    *args: Any,
    marker: str | None,
    contains: tuple[str, ...] = (),
) -> errors.AnekitError:
    with pytest.raises(kind) as caught:
        anekit.compile(fn, *(args or (X,)), passes=False)
    message = str(caught.value)
    if marker is not None:
        assert f"test_errors.py:{line(marker)}" in message, message
    for text in contains:
        assert re.search(text, message), f"{text!r} not in {message!r}"
    return caught.value


# -- unsupported functions -------------------------------------------------------------


def test_unsupported_numpy_function_names_function_and_line() -> None:
    def fn(x: Any) -> Any:
        return np.fft.fft(x)  # line:fft

    error = expect_error(
        errors.UnsupportedFunctionError, fn, marker="fft", contains=(r"np\.fft\.fft",)
    )
    assert isinstance(error, errors.TraceError)
    assert error.hint
    assert "docs/tracing.md" in error.hint


def test_unsupported_ufunc_and_method() -> None:
    def atan2(x: Any) -> Any:
        return np.arctan2(x, x)  # line:arctan2

    def accumulate(x: Any) -> Any:
        return np.add.accumulate(x)  # line:accumulate

    def sort(x: Any) -> Any:
        return np.sort(x)  # line:sort

    expect_error(
        errors.UnsupportedFunctionError, atan2, marker="arctan2", contains=(r"np\.arctan2",)
    )
    expect_error(
        errors.UnsupportedFunctionError,
        accumulate,
        marker="accumulate",
        contains=(r"np\.add\.accumulate",),
    )
    expect_error(errors.UnsupportedFunctionError, sort, marker="sort", contains=(r"np\.sort",))


# -- Python control flow on traced values -------------------------------------------------


def test_python_if_on_traced_value() -> None:
    def fn(x: Any) -> Any:
        if x.sum() > 0:  # line:if
            return x
        return -x

    error = expect_error(
        errors.ConcretizationError,
        fn,
        marker="if",
        contains=(r"Python control flow", r"'x'", r"np\.where"),
    )
    assert isinstance(error, TypeError)  # still catchable as NumPy-style TypeError


def test_python_while_and_boolean_operators() -> None:
    def loop(x: Any) -> Any:
        while x.max() > 1:  # line:while
            x = x / 2
        return x

    def conjunction(x: Any) -> Any:
        return (x > 0) and (x < 1)  # line:and

    expect_error(errors.ConcretizationError, loop, marker="while")
    expect_error(errors.ConcretizationError, conjunction, marker="and")


@pytest.mark.parametrize(
    ("marker", "fn"),
    [
        ("float", lambda x: float(x.sum())),  # line:float
        ("int", lambda x: int(x[0, 0])),  # line:int
        ("range", lambda x: range(x.sum().astype(np.int32))),  # line:range
        ("asarray", lambda x: np.asarray(x)),  # line:asarray
        ("item", lambda x: x.max().item()),  # line:item
        ("table", lambda x: X[x.astype(np.int32)]),  # line:table
    ],
)
def test_concrete_values_are_refused(marker: str, fn: Callable[[Any], Any]) -> None:
    expect_error(errors.ConcretizationError, fn, marker=marker, contains=("concrete value",))


# -- data-dependent shapes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "fn"),
    [
        ("mask", lambda x: x[x > 0]),  # line:mask
        ("nonzero", lambda x: np.nonzero(x)),  # line:nonzero
        ("where1", lambda x: np.where(x > 0)),  # line:where1
        ("unique", lambda x: np.unique(x)),  # line:unique
    ],
)
def test_dynamic_shapes_are_refused(marker: str, fn: Callable[[Any], Any]) -> None:
    expect_error(errors.DynamicShapeError, fn, marker=marker, contains=("depends on", r"np\.where"))


# -- dtypes -----------------------------------------------------------------------------


def test_float64_input_is_refused_with_a_fix() -> None:
    error = expect_error(
        errors.UnsupportedDtypeError,
        lambda x: x,
        np.ones((2, 2)),
        marker=None,
        contains=("float64", "float16, float32 or int32"),
    )
    assert isinstance(error, errors.TraceError)
    assert error.hint is not None
    assert "astype(np.float32)" in error.hint


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.complex64, np.bool_])
def test_other_input_dtypes_are_refused(dtype: type) -> None:
    expect_error(
        errors.UnsupportedDtypeError,
        lambda x: x,
        np.ones((2, 2), dtype),
        marker=None,
        contains=(np.dtype(dtype).name,),
    )


def test_unsupported_dtypes_inside_the_function() -> None:
    def complex_cast(x: Any) -> Any:
        return x.astype(np.complex64)  # line:complex

    def bool_negative(x: Any) -> Any:
        return -(x > 0)  # line:boolneg

    expect_error(
        errors.UnsupportedDtypeError, complex_cast, marker="complex", contains=("complex64",)
    )
    expect_error(
        errors.UnsupportedDtypeError, bool_negative, marker="boolneg", contains=("negative",)
    )


def test_non_array_example_inputs() -> None:
    with pytest.raises(errors.TraceError, match=r"functools\.partial"):
        anekit.compile(lambda x, n: x * n, X, 3, passes=False)
    with pytest.raises(errors.TraceError, match="0-dimensional"):
        anekit.compile(lambda x: x, np.float32(1.0), passes=False)
    with pytest.raises(errors.TraceError, match="takes 1 positional"):
        anekit.compile(lambda x: x, X, X, passes=False)


# -- in-place writes --------------------------------------------------------------------------


def test_item_assignment_is_refused() -> None:
    def fn(x: Any) -> Any:
        x[0] = 1.0  # line:setitem
        return x

    expect_error(errors.InPlaceWriteError, fn, marker="setitem", contains=(r"np\.where",))


def test_in_place_update_of_an_array_with_a_view_is_refused() -> None:
    def fn(x: Any) -> Any:
        head = x[:2]
        x += 1  # line:iadd
        return head

    expect_error(errors.InPlaceWriteError, fn, marker="iadd", contains=("view",))


def test_out_into_a_numpy_array_is_refused() -> None:
    target = np.empty((4, 3), F32)

    def fn(x: Any) -> Any:
        np.add(x, 1, out=target)  # line:outnp
        return x

    expect_error(errors.InPlaceWriteError, fn, marker="outnp")


# -- shapes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marker", "fn", "text"),
    [
        ("reshape", lambda x: x.reshape(5, 2), "cannot reshape"),  # line:reshape
        ("axis", lambda x: x.sum(axis=2), "out of bounds"),  # line:axis
        ("broadcast", lambda x: x + np.ones((5,), F32), "broadcast"),  # line:broadcast
        ("matmul", lambda x: x @ x, "core dimension"),  # line:matmul
        ("squeeze", lambda x: np.squeeze(x, 0), "squeeze"),  # line:squeeze
        ("index", lambda x: x[7], "out of bounds"),  # line:index
        ("empty", lambda x: x[2:1], "empty"),  # line:empty
        ("concat", lambda x: np.concatenate([x, x[:, :2].T]), "must match"),  # line:concat
    ],
)
def test_shape_errors(marker: str, fn: Callable[[Any], Any], text: str) -> None:
    error = expect_error(errors.ShapeError, fn, marker=marker, contains=(text,))
    assert isinstance(error, ValueError)


# -- outputs and escaped tracers -----------------------------------------------------------------


def test_constant_outputs_are_refused() -> None:
    with pytest.raises(errors.TraceError, match="does not depend on any input"):
        anekit.compile(lambda x: (x + 1, np.ones(3)), X, passes=False)
    with pytest.raises(errors.TraceError, match="NoneType"):
        anekit.compile(lambda x: None, X, passes=False)


def test_escaped_tracer_is_refused() -> None:
    def leak(x: Any) -> Any:
        _ESCAPED.append(x)
        return x + 1

    anekit.compile(leak, X, passes=False)

    def use(x: Any) -> Any:
        return x + _ESCAPED[0]  # line:escaped

    expect_error(errors.TraceError, use, marker="escaped", contains=("another trace",))


def test_a_failed_trace_cannot_continue() -> None:
    def fn(x: Any) -> Any:
        with contextlib.suppress(errors.UnsupportedFunctionError):
            np.arctan2(x, x)
        return x + 1

    # An unsupported function fails before any op is emitted: tracing may go on.
    program = anekit.compile(fn, X, passes=False)
    assert [op.op_type for op in program.ops() if op.op_type != "const"] == ["add"]
