"""Normalizations written every way users write them, with float64 references: shared by
tests/passes/test_pass_norms.py and bench/norm_magnitudes.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from anekit import nn

EPS = 1e-5


def ln_by_hand(x: Any) -> Any:  # the tracer emits `x - m` three times
    m = x.mean(-1, keepdims=True)
    v = ((x - m) * (x - m)).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + EPS)


def ln_pow(x: Any) -> Any:
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + EPS)


def ln_np_var(x: Any) -> Any:
    return (x - np.mean(x, axis=-1, keepdims=True)) / np.sqrt(
        np.var(x, axis=-1, keepdims=True) + EPS
    )


def ln_method_var(x: Any) -> Any:  # x.var() without keepdims, broadcast back by hand
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1) + EPS)[:, None]


def ln_np_std(x: Any) -> Any:
    return (x - x.mean(-1, keepdims=True)) / (np.std(x, axis=-1, keepdims=True) + EPS)


def ln_op(x: Any) -> Any:
    return nn.layer_norm(x, eps=EPS)


def rms_mean(x: Any) -> Any:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)


def rms_seed_003(x: Any) -> Any:  # shared/seeds/003's FFN block
    return x / np.sqrt(np.sum(x * x, axis=1, keepdims=True) / x.shape[1] + EPS)


def rms_rsqrt(x: Any) -> Any:
    return nn.rms_norm(x, eps=EPS)


def l2_normalize(x: Any) -> Any:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _rms_reference(x: np.ndarray) -> Any:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)


#: Each form, and its float64 reference when NumPy cannot run the form itself.
FORMS: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], Any] | None]] = {
    "layer norm by hand": (ln_by_hand, None),
    "(x - m) ** 2": (ln_pow, None),
    "np.var": (ln_np_var, None),
    "x.var()": (ln_method_var, None),
    "np.std + eps": (ln_np_std, None),
    "nn.layer_norm": (ln_op, ln_by_hand),
    "rms norm": (rms_mean, None),
    "seed 003 rms norm": (rms_seed_003, None),
    "nn.rms_norm (rsqrt)": (rms_rsqrt, _rms_reference),
    "l2 normalize": (l2_normalize, None),
}


def row_cosines(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    cosines: np.ndarray = (
        (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    )
    return cosines
