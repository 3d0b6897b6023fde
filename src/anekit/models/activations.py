"""The Hugging Face activation names the encoders implement (``hidden_act``,
``hidden_activation``, ``activation_function``), as :mod:`anekit.nn` functions.

The table imports nothing heavy, so that reading a configuration (a lane worker, an
Embedder's parent process) can check a name without loading the tracer;
:func:`activation` imports :mod:`anekit.nn` when an encoder is made.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from anekit.errors import ModelError

#: name -> (the anekit.nn function, its keyword arguments); ``gelu`` is the exact (erf)
#: GELU, ``gelu_new`` and ``gelu_pytorch_tanh`` its tanh approximation.
ACTIVATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "gelu": ("gelu", {}),
    "gelu_new": ("gelu", {"approximate": "tanh"}),
    "gelu_pytorch_tanh": ("gelu", {"approximate": "tanh"}),
    "relu": ("relu", {}),
    "silu": ("silu", {}),
}


def checked(name: str, where: str) -> str:
    """``name`` if anekit implements it, else a ModelError naming ``where`` it came from
    (``"config.json: hidden_act"``)."""
    if name not in ACTIVATIONS:
        raise ModelError(f"{where} {name!r} is not supported ({', '.join(ACTIVATIONS)})")
    return name


def activation(name: str) -> Callable[[Any], Any]:
    """The :mod:`anekit.nn` function for ``name`` (traceable, NumPy on plain arrays)."""
    from anekit import nn

    function, options = ACTIVATIONS[checked(name, "activation")]
    return functools.partial(getattr(nn, function), **options)
