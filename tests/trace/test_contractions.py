"""matmul, dot, tensordot and einsum, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from tracing import assert_traces_like_numpy, op_types

F32 = np.float32


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 1, 3, 4), (5, 4, 2)),
    ],
)
def test_matmul_shapes(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...], rng: np.random.Generator
) -> None:
    a = rng.standard_normal(a_shape).astype(F32)
    b = rng.standard_normal(b_shape).astype(F32)
    assert_traces_like_numpy(lambda x, y: x @ y, a, b, rtol=1e-5, atol=1e-5)
    assert_traces_like_numpy(lambda x: np.matmul(x, b), a, rtol=1e-5, atol=1e-5)


def test_matmul_with_closed_over_weight_is_one_op(rng: np.random.Generator) -> None:
    w = rng.standard_normal((8, 4)).astype(F32)
    program = assert_traces_like_numpy(
        lambda x: x @ w, rng.standard_normal((3, 8)).astype(F32), rtol=1e-5
    )
    assert op_types(program) == ["matmul"]
    assert [weight.name for weight in program.weights()] == ["w"]


def test_weight_used_twice_is_one_constant(rng: np.random.Generator) -> None:
    w = rng.standard_normal((4, 4)).astype(F32)
    program = assert_traces_like_numpy(
        lambda x: (x @ w) @ w + w, rng.standard_normal((4, 4)).astype(F32), rtol=1e-5
    )
    assert len(program.weights()) == 1


def test_dot_and_tensordot(rng: np.random.Generator) -> None:
    a = rng.standard_normal((2, 3, 4)).astype(F32)
    b = rng.standard_normal((4, 5)).astype(F32)
    c = rng.standard_normal((3, 4, 6)).astype(F32)
    assert_traces_like_numpy(lambda x: np.dot(x, b), a, rtol=1e-5, atol=1e-5)
    assert_traces_like_numpy(lambda x: x.dot(b), a, rtol=1e-5, atol=1e-5)
    assert_traces_like_numpy(lambda x: np.dot(x, c), a, rtol=1e-5, atol=1e-5)
    assert_traces_like_numpy(lambda x: np.dot(x, 2.0), a)
    assert_traces_like_numpy(
        lambda x: np.tensordot(x, c, axes=([1, 2], [0, 1])), a, rtol=1e-5, atol=1e-5
    )
    assert_traces_like_numpy(lambda x: np.tensordot(x, b, axes=1), a, rtol=1e-5, atol=1e-5)
    assert_traces_like_numpy(lambda x: np.tensordot(x, b, axes=0), a[0, 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("ij,jk", [(3, 4), (4, 5)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("bchq,bkhc->bkhq", [(1, 8, 2, 5), (1, 6, 2, 8)]),
        ("bkhq,bchk->bchq", [(1, 6, 2, 5), (1, 8, 2, 6)]),
        ("ij->ji", [(3, 4)]),
        ("ij->i", [(3, 4)]),
        ("ij->", [(3, 4)]),
        ("i,j->ij", [(3,), (4,)]),
        ("...ij,jk->...ik", [(2, 2, 3, 4), (4, 5)]),
        ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]),
        ("bqd,bkd->bqk", [(2, 3, 4), (2, 5, 4)]),
        ("ijk,ik->j", [(3, 4, 5), (3, 5)]),
    ],
)
def test_einsum(equation: str, shapes: list[tuple[int, ...]], rng: np.random.Generator) -> None:
    operands = [rng.standard_normal(shape).astype(F32) for shape in shapes]
    assert_traces_like_numpy(lambda *xs: np.einsum(equation, *xs), *operands, rtol=1e-5, atol=1e-5)


def test_einsum_with_constant_operand(rng: np.random.Generator) -> None:
    w = rng.standard_normal((4, 5)).astype(F32)
    assert_traces_like_numpy(
        lambda x: np.einsum("bi,ij->bj", x, w), rng.standard_normal((2, 4)).astype(F32), rtol=1e-5
    )
