"""Control flow (``cond``, ``while_loop``) and the list ops in the simulator, against
NumPy written from MIL's definitions (coremltools ``mil/ops/defs/iOS15/control_flow.py``).

These ops take Python functions (their blocks), so they are built as whole programs
here rather than as rows of the one-op table in test_ops.py. ``ane`` references round
every stored value to fp16, as the simulator's ane numerics define.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from anekit import sim
from anekit._coremltools import ct, mb
from anekit.errors import ProgramError
from anekit.ops.defs import control

F16 = np.float16
ENGINES = ["interpreter", "auto"]
X = np.array([1.1, -2.0, 3.0, 0.7], np.float32)


def program(function: Any, *shapes: tuple[int, ...]) -> Any:
    specs = [mb.TensorSpec(shape=shape) for shape in shapes]
    return mb.program(input_specs=specs, opset_version=ct.target.iOS18)(function)


def run(prog: Any, mode: str, engine: str = "interpreter", **feeds: Any) -> list[np.ndarray]:
    return list(sim.run(prog, feeds, mode=mode, executor=engine).outputs.values())


def fp16(value: Any) -> np.ndarray:
    return np.asarray(value, np.float64).astype(F16).astype(np.float64)


def power_loop(x: Any) -> Any:
    """acc = x, then acc * x four times (a counter from 0 while < 4)."""

    def body(i: Any, acc: Any) -> Any:
        return mb.add(x=i, y=1), mb.mul(x=acc, y=x)

    _, acc = mb.while_loop(
        _cond=lambda i, acc: mb.less(x=i, y=4), _body=body, loop_vars=(np.int32(0), x)
    )
    return acc


@pytest.mark.parametrize("engine", ENGINES)
def test_while_loop_runs_its_body_until_the_condition_fails(engine: str) -> None:
    prog = program(power_loop, (4,))
    (fp32,) = run(prog, "fp32", engine, x=X)
    np.testing.assert_allclose(fp32, X.astype(np.float64) ** 5, rtol=1e-6)
    (ane,) = run(prog, "ane", engine, x=X)
    expected = fp16(X)
    for _ in range(4):  # each product stored in fp16
        expected = fp16(expected * fp16(X))
    np.testing.assert_array_equal(ane, expected)


def test_while_loop_that_never_runs_returns_its_inputs() -> None:
    def function(x: Any) -> Any:
        _, acc = mb.while_loop(
            _cond=lambda i, acc: mb.less(x=i, y=0),
            _body=lambda i, acc: (mb.add(x=i, y=1), mb.mul(x=acc, y=2.0)),
            loop_vars=(np.int32(0), x),
        )
        return acc

    (result,) = run(program(function, (4,)), "fp32", x=X)
    np.testing.assert_array_equal(result, X)


def test_a_value_read_only_inside_a_block_is_kept_until_the_block_runs() -> None:
    # ``scaled`` is last read at top level by ``shifted``, before the loop that also
    # reads it inside its body: freeing it there would lose it.
    def function(x: Any) -> Any:
        scaled = mb.mul(x=x, y=3.0)
        shifted = mb.add(x=scaled, y=1.0)
        _, acc = mb.while_loop(
            _cond=lambda i, acc: mb.less(x=i, y=2),
            _body=lambda i, acc: (mb.add(x=i, y=1), mb.add(x=acc, y=scaled)),
            loop_vars=(np.int32(0), shifted),
        )
        return acc

    (result,) = run(program(function, (4,)), "fp32", x=X)
    np.testing.assert_allclose(result, 3 * X + 1 + 2 * (3 * X), rtol=1e-6)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_runs_the_branch_its_predicate_picks(engine: str, sign: float) -> None:
    def function(x: Any) -> Any:
        total = mb.reduce_sum(x=x, axes=[0])
        return mb.cond(
            pred=mb.greater(x=total, y=0.0),
            _true_fn=lambda: mb.mul(x=x, y=2.0),
            _false_fn=lambda: mb.sub(x=x, y=0.5),
        )

    x = np.float32(sign) * X
    (result,) = run(program(function, (4,)), "fp32", engine, x=x)
    expected = 2 * x if x.sum() > 0 else x - 0.5
    np.testing.assert_allclose(result, expected, rtol=1e-6)


def test_cond_inside_a_loop_body() -> None:
    # five steps of: x / 2 if max(x) > 4 else x + 3
    def function(x: Any) -> Any:
        def body(i: Any, acc: Any) -> Any:
            big = mb.greater(x=mb.reduce_max(x=acc, axes=[0]), y=4.0)
            step = mb.cond(
                pred=big,
                _true_fn=lambda: mb.mul(x=acc, y=0.5),
                _false_fn=lambda: mb.add(x=acc, y=3.0),
            )
            return mb.add(x=i, y=1), step

        _, acc = mb.while_loop(
            _cond=lambda i, acc: mb.less(x=i, y=5), _body=body, loop_vars=(np.int32(0), x)
        )
        return acc

    expected = X.astype(np.float64)
    for _ in range(5):
        expected = expected * 0.5 if expected.max() > 4 else expected + 3
    (result,) = run(program(function, (4,)), "fp32", x=X)
    np.testing.assert_allclose(result, expected, rtol=1e-6)


def list_program(x: Any, y: Any) -> Any:
    ls = mb.make_list(init_length=2, elem_shape=[np.int32(4)], dtype="fp32")
    ls = mb.list_write(ls=ls, index=1, value=x)
    ls = mb.list_scatter(
        ls=ls, indices=np.array([0, 3], np.int32), value=mb.stack(values=[y, x], axis=0)
    )
    return (
        mb.list_length(ls=ls),
        mb.list_gather(ls=ls, indices=np.array([3, 2, 0], np.int32)),
        mb.list_read(ls=ls, index=1),
    )


@pytest.mark.parametrize("mode", ["fp32", "ane"])
def test_list_ops_write_scatter_grow_gather_and_read(mode: str) -> None:
    y = np.array([0.1, 5.0, -7.3, 2.0], np.float32)
    length, gathered, read = run(program(list_program, (4,), (4,)), mode, x=X, y=y)
    stored = fp16 if mode == "ane" else np.asarray
    # [y, x] written at 0 and 3 of a two-element list: it grows to four; 2 was never written
    assert length == 4 and length.dtype == np.int32
    np.testing.assert_array_equal(gathered, np.stack([stored(X), np.zeros(4), stored(y)]))
    np.testing.assert_array_equal(read, stored(X))


def test_a_write_past_a_fixed_length_list_is_refused_by_name() -> None:
    def function(x: Any) -> Any:
        ls = mb.make_list(init_length=2, dynamic_length=False, elem_shape=[np.int32(4)])
        ls = mb.list_write(ls=ls, index=2, value=x, name="past_the_end")
        return mb.list_read(ls=ls, index=0)

    with pytest.raises(ProgramError, match="past_the_end"):
        run(program(function, (4,)), "fp32", x=X)


def test_an_endless_loop_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "MAX_ITERATIONS", 50)

    def function(x: Any) -> Any:
        _, acc = mb.while_loop(
            _cond=lambda i, acc: mb.greater_equal(x=i, y=0),
            _body=lambda i, acc: (mb.add(x=i, y=1), mb.add(x=acc, y=1.0)),
            loop_vars=(np.int32(0), x),
            name="forever",
        )
        return acc

    with pytest.raises(ProgramError, match=r"forever.*50 iterations"):
        run(program(function, (4,)), "fp32", x=X)
