"""``np.einsum`` lowered to transpose, reshape, matmul and reduce_sum.

MIL's own ``einsum`` op accepts only two rank-3/rank-4 equation shapes, so every
equation is lowered the classic way instead: sum out indices that appear in one
operand only, then contract operands pairwise, left to right, as a batched matmul
over (batch indices, free indices of the left, contracted, free of the right).
Repeated indices within one operand (traces, diagonals) are refused.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence

from anekit.errors import ShapeError, UnsupportedFunctionError
from anekit.trace import primitives as P
from anekit.trace.source import user_location
from anekit.trace.tracer import Tracer

_LETTERS = string.ascii_letters


def parse(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> tuple[list[str], str]:
    """Input and output index strings, with ``...`` expanded to fresh letters."""
    text = subscripts.replace(" ", "")
    inputs_text, arrow, output = text.partition("->")
    explicit = bool(arrow)
    inputs = inputs_text.split(",")
    if len(inputs) != len(shapes):
        raise ShapeError(
            f"einsum: {len(inputs)} operand subscripts for {len(shapes)} operands",
            location=user_location(),
        )
    used = set(text) - set(".,->")
    spare = [letter for letter in _LETTERS if letter not in used]
    ellipsis_rank = 0
    for term, shape in zip(inputs, shapes, strict=True):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, len(shape) - (len(term) - 3))
    ellipsis_letters = "".join(spare[:ellipsis_rank])
    expanded = []
    for term, shape in zip(inputs, shapes, strict=True):
        if "..." in term:
            rank = len(shape) - (len(term) - 3)
            term = term.replace("...", ellipsis_letters[ellipsis_rank - rank :])
        if len(term) != len(shape) or not all(letter in _LETTERS for letter in term):
            raise ShapeError(
                f"einsum: subscripts {term!r} do not match an operand of shape {shape}",
                location=user_location(),
            )
        if len(set(term)) != len(term):
            raise UnsupportedFunctionError(
                f"np.einsum with a repeated index within one operand ({term!r}: a trace "
                "or diagonal) is not supported by anekit's tracer",
                location=user_location(),
            )
        expanded.append(term)
    if explicit:
        output = output.replace("...", ellipsis_letters)
    else:
        counts = {letter: "".join(expanded).count(letter) for letter in set("".join(expanded))}
        named = sorted(
            letter
            for letter, count in counts.items()
            if count == 1 and letter not in ellipsis_letters
        )
        output = ellipsis_letters + "".join(named)
    for letter in output:
        if not any(letter in term for term in expanded):
            raise ShapeError(
                f"einsum: output subscript {letter!r} does not appear in the inputs",
                location=user_location(),
            )
    return expanded, output


def _sum_out(x: Tracer, term: str, keep: set[str]) -> tuple[Tracer, str]:
    axes = [i for i, letter in enumerate(term) if letter not in keep]
    if not axes:
        return x, term
    kept = "".join(letter for letter in term if letter in keep)
    return P.reduce("reduce_sum", x, axes, False), kept


def _contract(a: Tracer, ta: str, b: Tracer, tb: str, keep: set[str]) -> tuple[Tracer, str]:
    batch = [letter for letter in ta if letter in tb and letter in keep]
    contracted = [letter for letter in ta if letter in tb and letter not in keep]
    free_a = [letter for letter in ta if letter not in tb]
    free_b = [letter for letter in tb if letter not in ta]

    sizes: dict[str, int] = {}
    for term, tensor in ((ta, a), (tb, b)):
        for letter, size in zip(term, tensor.shape, strict=True):
            previous = sizes.get(letter, size)
            if previous != size and 1 not in (previous, size):
                raise ShapeError(
                    f"einsum: index {letter!r} has sizes {previous} and {size}",
                    location=user_location(),
                )
            sizes[letter] = max(previous, size)
    for letter in contracted:
        if a.shape[ta.index(letter)] != b.shape[tb.index(letter)]:
            raise ShapeError(
                f"einsum: contracted index {letter!r} has sizes "
                f"{a.shape[ta.index(letter)]} and {b.shape[tb.index(letter)]}",
                location=user_location(),
            )

    def arrange(
        x: Tracer, term: str, order: list[str], middle: list[str], last: list[str]
    ) -> Tracer:
        x = P.transpose(x, [term.index(letter) for letter in order + middle + last])
        dims = [x.shape[i] for i in range(len(order))]
        rows = math.prod(sizes[letter] for letter in middle)
        cols = math.prod(sizes[letter] for letter in last)
        return P.reshape(x, [*dims, rows, cols])

    left = arrange(a, ta, batch, free_a, contracted)
    right = arrange(b, tb, batch, contracted, free_b)
    product = P.matmul(left, right)
    result_term = "".join(batch + free_a + free_b)
    shape = [product.shape[i] for i in range(len(batch))]
    shape += [sizes[letter] for letter in free_a + free_b]
    return P.reshape(product, shape), result_term


def einsum(subscripts: str, operands: Sequence[Tracer]) -> Tracer:
    """Evaluate an einsum on traced operands of one dtype."""
    terms, output = parse(subscripts, [operand.shape for operand in operands])
    result, term = operands[0], terms[0]
    for index in range(1, len(operands)):
        later = set(output) | set("".join(terms[index + 1 :]))
        keep = later | set(terms[index])
        result, term = _sum_out(result, term, keep)
        other, other_term = _sum_out(operands[index], terms[index], keep | set(term))
        result, term = _contract(result, term, other, other_term, later)
    result, term = _sum_out(result, term, set(output))
    return P.transpose(result, [term.index(letter) for letter in output])
