"""Recurrent ops: rnn, gru and lstm over a (T, B, I) sequence.

Semantics from coremltools' MIL docs (``mil/ops/defs/iOS15/recurrent.py``; iOS17 only
adds fp16, iOS18 ``gru`` adds ``reset_after`` and ``input_bias``), with two points the
docs leave open settled by coremltools' own op tests (``ops/tests/iOS14/test_recurrent.py``,
run against Core ML): a ``reverse`` op returns its sequence in processing order (step k
read ``x[T-1-k]``), while a ``bidirectional`` lstm aligns its backward half with the
input's time axis; and lstm's ``clip`` clips the cell state ``c_t``. In ``ane`` numerics
the states are rounded to fp16 after every step (the ANE stores them between steps);
the matmuls accumulate in fp32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special

from anekit.ops.defs._util import errstate
from anekit.ops.registry import OpContext, register

Array = np.ndarray
Cell = Callable[..., tuple[Array, ...]]


def _hard_sigmoid(v: Array) -> Array:
    return np.clip(0.2 * v + 0.5, 0.0, 1.0)


# The recurrent ops take no alpha/beta: MIL's defaults apply (scaled_tanh: alpha = beta = 1;
# hard_sigmoid: alpha = 0.2, beta = 0.5; linear: alpha = 1, beta = 0), as coremltools' tests use.
_ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "sigmoid": special.expit,
    "tanh": np.tanh,
    "scaled_tanh": np.tanh,
    "relu": lambda v: np.maximum(v, 0.0),
    "hard_sigmoid": _hard_sigmoid,
    "sigmoid_hard": _hard_sigmoid,  # rnn's spelling
    "linear": lambda v: v,
}


def _act(name: Any) -> Callable[[Array], Array]:
    return _ACTIVATIONS[str(name).lower()]


def _f32(value: Any) -> Array:
    return np.asarray(value, np.float32)


def _project(x: Any, weight: Any, *biases: Any) -> Array:
    """``W x_t + b`` for every step at once: (T, B, G)."""
    result: Array = np.matmul(_f32(x), _f32(weight).T)
    for bias in biases:
        if bias is not None:
            result = result + _f32(bias)
    return result


def _scan(
    ctx: OpContext, cell: Cell, projected: Array, states: tuple[Array, ...], direction: Any
) -> tuple[Array, tuple[Array, ...]]:
    """Run ``cell(projected_t, *states) -> states`` over time (last step first if
    ``direction`` is "reverse"; MIL's type inference checks the direction); returns each
    step's h (``states[0]``) in processing order and the final states."""
    steps = range(projected.shape[0])
    outputs = []
    with errstate():
        for t in reversed(steps) if str(direction) == "reverse" else steps:
            states = tuple(ctx.numerics.round(_f32(s)) for s in cell(projected[t], *states))
            outputs.append(states[0])
    return np.stack(outputs), states


def _results(sequence: Array, states: tuple[Array, ...], output_sequence: Any) -> tuple[Array, ...]:
    """MIL's outputs: all steps' h (or the final h as a length-1 sequence), then the states."""
    return (sequence if output_sequence else states[0][None], *states)


@register("rnn")
def rnn(
    ctx: OpContext,
    x: Any,
    initial_h: Any,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    *,
    direction: Any,
    output_sequence: Any,
    activation: Any,
) -> Any:
    """MIL ``rnn``: h_t = activation(W_ih x_t + W_hh h_{t-1} + b)."""
    act, w_hh = _act(activation), _f32(weight_hh)

    def cell(p: Array, h: Array) -> tuple[Array, ...]:
        return (act(p + h @ w_hh.T),)

    projected = _project(x, weight_ih, bias)
    sequence, states = _scan(ctx, cell, projected, (_f32(initial_h),), direction)
    return _results(sequence, states, output_sequence)


@register("gru")
def gru(
    ctx: OpContext,
    x: Any,
    initial_h: Any,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    reset_after: Any = False,  # iOS15 and iOS17 gru have no reset_after
    input_bias: Any = None,
    *,
    direction: Any,
    output_sequence: Any,
    recurrent_activation: Any,
    activation: Any,
) -> Any:
    """MIL ``gru``, gates in [r | o | z] order (reset, output/new, update):
    r, z = recurrent_activation(W_i x_t + W_h h_{t-1} + b); h_t = (1 - z) o + z h_{t-1};
    o = activation(W_io x_t + W_ho (r * h_{t-1}) + b_o), or with iOS18 ``reset_after``
    o = activation(W_io x_t + b_io + r * (W_ho h_{t-1} + b_ho)) (``input_bias`` = b_i,
    ``bias`` = b_h: PyTorch's GRU, per coremltools' iOS18 gru test)."""
    rec, act = _act(recurrent_activation), _act(activation)
    w_r, w_o, w_z = np.split(_f32(weight_hh), 3)
    hidden, after = w_o.shape[0], bool(reset_after)
    b_h = np.zeros(3 * hidden, np.float32) if bias is None else _f32(bias)
    # with reset_after, b_ho sits inside the reset product; elsewhere the biases just add
    b_in, b_ho = b_h.copy(), b_h[hidden : 2 * hidden]
    b_in[hidden : 2 * hidden] *= not after

    def cell(p: Array, h: Array) -> tuple[Array, ...]:
        p_r, p_o, p_z = np.split(p, 3, axis=-1)
        r, z = rec(p_r + h @ w_r.T), rec(p_z + h @ w_z.T)
        recurrent = r * (h @ w_o.T + b_ho) if after else (r * h) @ w_o.T
        return ((1 - z) * act(p_o + recurrent) + z * h,)

    projected = _project(x, weight_ih, b_in, input_bias)
    sequence, states = _scan(ctx, cell, projected, (_f32(initial_h),), direction)
    return _results(sequence, states, output_sequence)


@register("lstm")
def lstm(
    ctx: OpContext,
    x: Any,
    initial_h: Any,
    initial_c: Any,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    peephole: Any = None,
    weight_ih_back: Any = None,
    weight_hh_back: Any = None,
    bias_back: Any = None,
    peephole_back: Any = None,
    clip: Any = None,
    *,
    direction: Any,
    output_sequence: Any,
    recurrent_activation: Any,
    cell_activation: Any,
    activation: Any,
) -> Any:
    """MIL ``lstm``, gates in [i | f | o | z] order, peephole in [i | f | o]:
    i, f = recurrent_activation(W_i x_t + W_h h_{t-1} + b + p * c_{t-1});
    c_t = clip(f c_{t-1} + i cell_activation(z)); o = recurrent_activation(... + p_o c_t);
    h_t = o activation(c_t). ``bidirectional`` runs the ``_back`` weights over the
    reversed sequence and concatenates [forward | backward] on the hidden axis."""
    rec, cell_act, act = _act(recurrent_activation), _act(cell_activation), _act(activation)

    def run(w_ih: Any, w_hh: Any, b: Any, peep: Any, h0: Array, c0: Array, direction: Any) -> Any:
        w_hh = _f32(w_hh)
        p_i, p_f, p_o = np.split(
            np.zeros(3 * w_hh.shape[1], np.float32) if peep is None else _f32(peep), 3
        )

        def cell(p: Array, h: Array, c: Array) -> tuple[Array, ...]:
            g_i, g_f, g_o, g_z = np.split(p + h @ w_hh.T, 4, axis=-1)
            c = rec(g_f + p_f * c) * c + rec(g_i + p_i * c) * cell_act(g_z)
            if clip is not None:
                c = np.clip(c, -clip, clip)
            return rec(g_o + p_o * c) * act(c), c

        return _scan(ctx, cell, _project(x, w_ih, b), (h0, c0), direction)

    h0, c0 = _f32(initial_h), _f32(initial_c)
    if str(direction) != "bidirectional":
        sequence, states = run(weight_ih, weight_hh, bias, peephole, h0, c0, direction)
        return _results(sequence, states, output_sequence)
    hidden = h0.shape[-1] // 2
    forward = (weight_ih, weight_hh, bias, peephole, h0[:, :hidden], c0[:, :hidden])
    fwd_seq, fwd = run(*forward, "forward")
    back = (weight_ih_back, weight_hh_back, bias_back, peephole_back)
    back_seq, bwd = run(*back, h0[:, hidden:], c0[:, hidden:], "reverse")
    sequence = np.concatenate([fwd_seq, back_seq[::-1]], axis=-1)  # back aligned to input time
    states = tuple(np.concatenate(pair, axis=-1) for pair in zip(fwd, bwd, strict=True))
    return _results(sequence, states, output_sequence)
