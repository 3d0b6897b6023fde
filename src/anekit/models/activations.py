"""The Hugging Face activation names the encoders implement (``hidden_act``,
``hidden_activation``, ``activation_function``), as :mod:`anekit.nn` functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anekit import nn


def _gelu_tanh(x: Any) -> Any:
    return nn.gelu(x, approximate="tanh")


#: name -> function; ``gelu`` is the exact (erf) GELU, the others its tanh approximation.
ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    "gelu": nn.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": nn.relu,
    "silu": nn.silu,
}
