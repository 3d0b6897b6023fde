"""The simulator's rnn, gru and lstm against torch.nn.RNN/GRU/LSTM, whose weights are
mapped into MIL's layout as coremltools' PyTorch frontend and op tests map them: this
confirms the gate orders and weight layouts independently of the op-table references.
MIL's unidirectional ``reverse`` corresponds to torch on the time-flipped input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from anekit import sim

torch = pytest.importorskip("torch")

T, B, D, H = 6, 3, 4, 5  # sequence, batch, input and hidden sizes


def _np(tensor: Any) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), np.float32)


def _reorder(array: np.ndarray, order: list[int]) -> np.ndarray:
    """Gate blocks of ``array`` (stacked on axis 0) in the given order."""
    blocks = np.split(array, len(order))
    return np.concatenate([blocks[k] for k in order])


IFZO_TO_IFOZ = [0, 1, 3, 2]  # torch lstm (i, f, g, o) -> MIL (i, f, o, z)
RZN_TO_RON = [0, 2, 1]  # torch gru (r, z, n) -> MIL (r, o, z)


def _inputs(states: int, directions: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    return [x] + [
        rng.standard_normal((B, directions * H)).astype(np.float32) for _ in range(states)
    ]


def _torch_run(module: Any, x: np.ndarray, *states: np.ndarray, reverse: bool) -> Any:
    seq = torch.from_numpy(np.ascontiguousarray(x[::-1] if reverse else x))
    torch_states = [torch.from_numpy(s)[None] for s in states]
    with torch.no_grad():
        return module(seq, torch_states[0] if len(states) == 1 else tuple(torch_states))


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_rnn_matches_torch(direction: str, activation: str) -> None:
    torch.manual_seed(0)
    module = torch.nn.RNN(D, H, nonlinearity=activation)
    x, h0 = _inputs(1)
    out, h_n = _torch_run(module, x, h0, reverse=direction == "reverse")
    got = sim.run_op(
        "rnn",
        x,
        h0,
        numerics="fp32",
        weight_ih=_np(module.weight_ih_l0),
        weight_hh=_np(module.weight_hh_l0),
        bias=_np(module.bias_ih_l0) + _np(module.bias_hh_l0),
        direction=direction,
        output_sequence=True,
        activation=activation,
    )
    np.testing.assert_allclose(got[0], _np(out), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], _np(h_n)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_gru_reset_after_matches_torch(direction: str) -> None:
    torch.manual_seed(1)
    module = torch.nn.GRU(D, H)
    x, h0 = _inputs(1)
    out, h_n = _torch_run(module, x, h0, reverse=direction == "reverse")
    got = sim.run_op(
        "gru",
        x,
        h0,
        numerics="fp32",
        weight_ih=_reorder(_np(module.weight_ih_l0), RZN_TO_RON),
        weight_hh=_reorder(_np(module.weight_hh_l0), RZN_TO_RON),
        input_bias=_reorder(_np(module.bias_ih_l0), RZN_TO_RON),
        bias=_reorder(_np(module.bias_hh_l0), RZN_TO_RON),
        reset_after=True,
        direction=direction,
        output_sequence=True,
    )
    np.testing.assert_allclose(got[0], _np(out), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], _np(h_n)[0], rtol=1e-5, atol=1e-5)


def _lstm_weights(module: Any, suffix: str = "") -> tuple[np.ndarray, ...]:
    def get(name: str) -> np.ndarray:
        return _reorder(_np(getattr(module, name + suffix)), IFZO_TO_IFOZ)

    return get("weight_ih_l0"), get("weight_hh_l0"), get("bias_ih_l0") + get("bias_hh_l0")


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_lstm_matches_torch(direction: str) -> None:
    torch.manual_seed(2)
    module = torch.nn.LSTM(D, H)
    x, h0, c0 = _inputs(2)
    out, (h_n, c_n) = _torch_run(module, x, h0, c0, reverse=direction == "reverse")
    w_ih, w_hh, bias = _lstm_weights(module)
    got = sim.run_op(
        "lstm",
        x,
        h0,
        c0,
        numerics="fp32",
        weight_ih=w_ih,
        weight_hh=w_hh,
        bias=bias,
        direction=direction,
        output_sequence=True,
    )
    for value, want in zip(got, (out, h_n[0], c_n[0]), strict=True):
        np.testing.assert_allclose(value, _np(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("output_sequence", [True, False])
def test_bidirectional_lstm_matches_torch(output_sequence: bool) -> None:
    torch.manual_seed(3)
    module = torch.nn.LSTM(D, H, bidirectional=True)
    x, h0, c0 = _inputs(2, directions=2)
    # torch states are (2, B, H): [forward, backward]; MIL's are (B, 2H): [forward | backward]
    seq = torch.from_numpy(x)
    states = tuple(torch.from_numpy(np.stack(np.split(s, 2, axis=-1))) for s in (h0, c0))
    with torch.no_grad():
        out, (h_n, c_n) = module(seq, states)
    w_ih, w_hh, bias = _lstm_weights(module)
    w_ih_back, w_hh_back, bias_back = _lstm_weights(module, "_reverse")
    got = sim.run_op(
        "lstm",
        x,
        h0,
        c0,
        numerics="fp32",
        weight_ih=w_ih,
        weight_hh=w_hh,
        bias=bias,
        weight_ih_back=w_ih_back,
        weight_hh_back=w_hh_back,
        bias_back=bias_back,
        direction="bidirectional",
        output_sequence=output_sequence,
    )
    h_final, c_final = (np.concatenate(list(_np(s)), axis=-1) for s in (h_n, c_n))
    want_seq = _np(out) if output_sequence else h_final[None]
    for value, want in zip(got, (want_seq, h_final, c_final), strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)
