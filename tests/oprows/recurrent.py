"""Op-table rows: Recurrent ops: rnn, gru and lstm over a (T, B, D) sequence.

References follow coremltools' MIL docs (``mil/ops/defs/iOS15/recurrent.py``, iOS18 gru's
``reset_after``/``input_bias``) and its op tests where the docs are silent: a ``reverse`` op
returns steps in processing order, a bidirectional lstm's backward half is aligned to input
time, lstm's ``clip`` bounds the cell state, and the recurrent ops' activations take MIL's
default alpha/beta. Weights are constants (MIL requires them const), drawn here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from oprows.table import ACCUM, F32, OpRecord, Ref, normal, op_record

RECORDS: list[OpRecord] = []

_RNG = np.random.default_rng(2718)
T, B, D, H = 5, 2, 3, 4  # sequence, batch, input and hidden sizes


def _w(*shape: int, scale: float = 0.5) -> np.ndarray:
    return (scale * _RNG.standard_normal(shape)).astype(F32)


def _sigmoid(v: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-v))


def _hard_sigmoid(v: Any) -> Any:
    return np.minimum(np.maximum(0.2 * v + 0.5, 0.0), 1.0)


ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "scaled_tanh": lambda v: 1.0 * np.tanh(1.0 * v),  # alpha = beta = 1
    "relu": lambda v: np.maximum(v, 0.0),
    "hard_sigmoid": _hard_sigmoid,
    "sigmoid_hard": _hard_sigmoid,
    "linear": lambda v: 1.0 * v + 0.0,  # alpha = 1, beta = 0
}


def _outputs(hs: Sequence[Any], output_sequence: bool, *states: Any) -> tuple[Any, ...]:
    seq = np.stack(hs) if output_sequence else hs[-1][None]
    return (seq, *states)


def _rnn(
    x: Any,
    initial_h: Any,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    direction: str = "forward",
    output_sequence: bool = False,
    activation: str = "tanh",
) -> Any:
    """h_t = activation(W_ih x_t + W_hh h_{t-1} + b)."""
    f = ACTIVATIONS[activation]
    b = 0.0 if bias is None else bias
    h, hs = initial_h, []
    for x_t in x[::-1] if direction == "reverse" else x:
        h = f(x_t @ weight_ih.T + h @ weight_hh.T + b)
        hs.append(h)
    return _outputs(hs, output_sequence, h)


def _gru(
    x: Any,
    initial_h: Any,
    weight_ih: Any,
    weight_hh: Any,
    bias: Any = None,
    direction: str = "forward",
    output_sequence: bool = False,
    recurrent_activation: str = "sigmoid",
    activation: str = "tanh",
    reset_after: bool = False,
    input_bias: Any = None,
) -> Any:
    """Gates [r | o | z]; o_t uses W_ho (r_t * h_{t-1}), or r_t * (W_ho h_{t-1} + b_ho)
    with reset_after (then ``bias`` is the hidden bias and ``input_bias`` the input one)."""
    f, g = ACTIVATIONS[recurrent_activation], ACTIVATIONS[activation]
    w_ir, w_io, w_iz = np.split(weight_ih, 3)
    w_hr, w_ho, w_hz = np.split(weight_hh, 3)
    zero = np.zeros(3 * initial_h.shape[-1])
    b_hr, b_ho, b_hz = np.split(zero if bias is None else bias, 3)
    b_ir, b_io, b_iz = np.split(zero if input_bias is None else input_bias, 3)
    h, hs = initial_h, []
    for x_t in x[::-1] if direction == "reverse" else x:
        r = f(x_t @ w_ir.T + b_ir + h @ w_hr.T + b_hr)
        z = f(x_t @ w_iz.T + b_iz + h @ w_hz.T + b_hz)
        if reset_after:
            o = g(x_t @ w_io.T + b_io + r * (h @ w_ho.T + b_ho))
        else:
            o = g(x_t @ w_io.T + b_io + (r * h) @ w_ho.T + b_ho)
        h = (1 - z) * o + z * h
        hs.append(h)
    return _outputs(hs, output_sequence, h)


def _lstm_direction(
    x: Any, h: Any, c: Any, w_ih: Any, w_hh: Any, bias: Any, peephole: Any, clip: Any, acts: Any
) -> tuple[list[Any], Any, Any]:
    """One direction over ``x`` in order: gates [i | f | o | z], peephole [i | f | o]."""
    f, g, k = acts
    hidden = h.shape[-1]
    b = np.split(np.zeros(4 * hidden) if bias is None else bias, 4)
    p_i, p_f, p_o = np.split(np.zeros(3 * hidden) if peephole is None else peephole, 3)
    wi, wh = np.split(w_ih, 4), np.split(w_hh, 4)
    hs = []
    for x_t in x:
        gate = [x_t @ wi[n].T + h @ wh[n].T + b[n] for n in range(4)]
        i = f(gate[0] + p_i * c)
        fg = f(gate[1] + p_f * c)
        c = fg * c + i * g(gate[3])
        if clip is not None:
            c = np.minimum(np.maximum(c, -clip), clip)
        o = f(gate[2] + p_o * c)
        h = o * k(c)
        hs.append(h)
    return hs, h, c


def _lstm(
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
    direction: str = "forward",
    output_sequence: bool = False,
    recurrent_activation: str = "sigmoid",
    cell_activation: str = "tanh",
    activation: str = "tanh",
    clip: Any = None,
) -> Any:
    acts = [ACTIVATIONS[a] for a in (recurrent_activation, cell_activation, activation)]
    if direction != "bidirectional":
        steps = x[::-1] if direction == "reverse" else x
        hs, h, c = _lstm_direction(
            steps, initial_h, initial_c, weight_ih, weight_hh, bias, peephole, clip, acts
        )
        return _outputs(hs, output_sequence, h, c)
    n = initial_h.shape[-1] // 2
    hf, h1, c1 = _lstm_direction(
        x, initial_h[:, :n], initial_c[:, :n], weight_ih, weight_hh, bias, peephole, clip, acts
    )
    hb, h2, c2 = _lstm_direction(
        x[::-1],
        initial_h[:, n:],
        initial_c[:, n:],
        weight_ih_back,
        weight_hh_back,
        bias_back,
        peephole_back,
        clip,
        acts,
    )
    h, c = np.concatenate([h1, h2], -1), np.concatenate([c1, c2], -1)
    if not output_sequence:  # the final h of each direction
        return h[None], h, c
    seq = np.concatenate([np.stack(hf), np.stack(hb[::-1])], -1)  # backward at input time
    return seq, h, c


Case = tuple[str, dict[str, Any]]


def _rows(op: str, ref: Ref, gates: int, states: int, cases: list[Case]) -> list[OpRecord]:
    """One row per case, with fresh weights (a second set for a bidirectional lstm).
    Composites (states rounded to fp16 every step in ane numerics): ane is a close check."""
    rows = []
    for tag, attrs in cases:
        bi = attrs.get("direction") == "bidirectional"
        weights: dict[str, Any] = {"weight_ih": _w(gates * H, D), "weight_hh": _w(gates * H, H)}
        if bi:
            weights |= {"weight_ih_back": _w(gates * H, D), "weight_hh_back": _w(gates * H, H)}
        state = normal(B, 2 * H if bi else H, scale=0.5)
        inputs = (normal(T, B, D), *[state] * states)
        rows.append(op_record(op, ref, *inputs, tag=tag, **ACCUM, ane=False, **weights, **attrs))
    return rows


SEQ: dict[str, Any] = {"output_sequence": True}
REVERSE: dict[str, Any] = {"direction": "reverse"}
BI: dict[str, Any] = {"direction": "bidirectional"}

RECORDS += _rows(
    "rnn",
    _rnn,
    1,
    1,
    [
        ("default", {}),
        ("bias-seq", {"bias": _w(H), **SEQ}),
        ("reverse-seq", {"bias": _w(H), **REVERSE, **SEQ}),
        ("reverse-last", REVERSE),
        *(
            (f"{name}-seq", {"activation": name, "bias": _w(H), **SEQ})
            for name in ("relu", "sigmoid", "scaled_tanh", "sigmoid_hard", "linear")
        ),
    ],
)

RECORDS += _rows(
    "gru",
    _gru,
    3,
    1,
    [
        ("default", {}),
        ("bias-seq", {"bias": _w(3 * H), **SEQ}),
        ("reverse-seq", {"bias": _w(3 * H), **REVERSE, **SEQ}),
        ("reverse-last", {"bias": _w(3 * H), **REVERSE}),
        ("acts-swapped", {"recurrent_activation": "tanh", "activation": "sigmoid", **SEQ}),
        (
            "acts-hard_sigmoid-relu",
            {"recurrent_activation": "hard_sigmoid", "activation": "relu", "bias": _w(3 * H)},
        ),
        (
            "acts-scaled_tanh-linear",
            {"recurrent_activation": "scaled_tanh", "activation": "linear", **SEQ},
        ),
        (
            "reset_after-biases-seq",
            {"reset_after": True, "bias": _w(3 * H), "input_bias": _w(3 * H), **SEQ},
        ),
        ("reset_after-hidden-bias", {"reset_after": True, "bias": _w(3 * H)}),
        (
            "reset_after-reverse-seq",
            {"reset_after": True, "bias": _w(3 * H), "input_bias": _w(3 * H), **REVERSE, **SEQ},
        ),
        ("reset_before-input_bias", {"input_bias": _w(3 * H), "bias": _w(3 * H)}),
    ],
)

RECORDS += _rows(
    "lstm",
    _lstm,
    4,
    2,
    [
        ("default", {}),
        ("bias-seq", {"bias": _w(4 * H), **SEQ}),
        ("reverse-seq", {"bias": _w(4 * H), **REVERSE, **SEQ}),
        ("reverse-last", REVERSE),
        ("peephole-seq", {"peephole": _w(3 * H), "bias": _w(4 * H), **SEQ}),
        ("clip-seq", {"clip": np.float32(0.3), "bias": _w(4 * H), **SEQ}),
        ("peephole-clip-reverse", {"peephole": _w(3 * H), "clip": np.float32(0.5), **REVERSE}),
        (
            "acts-hard_sigmoid-scaled_tanh-linear",
            {
                "recurrent_activation": "hard_sigmoid",
                "cell_activation": "scaled_tanh",
                "activation": "linear",
                **SEQ,
            },
        ),
        (
            "acts-tanh-relu-sigmoid",
            {
                "recurrent_activation": "tanh",
                "cell_activation": "relu",
                "activation": "sigmoid",
                "bias": _w(4 * H),
            },
        ),
        ("bidirectional-seq", {"bias": _w(4 * H), "bias_back": _w(4 * H), **BI, **SEQ}),
        ("bidirectional-last", {"bias": _w(4 * H), **BI}),
        (
            "bidirectional-peephole-clip-seq",
            {
                "peephole": _w(3 * H),
                "peephole_back": _w(3 * H),
                "clip": np.float32(0.4),
                **BI,
                **SEQ,
            },
        ),
    ],
)
