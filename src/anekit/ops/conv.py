"""Strides, dilations and padding of MIL's convolution and pooling ops."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def conv_padding(
    pad_type: str,
    pad: Any,
    spatial: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: list[int],
    dilations: list[int],
) -> list[tuple[int, int]]:
    """(begin, end) padding per spatial axis of MIL's ``conv``/pooling ``pad_type``:
    ``valid`` (none), ``custom`` (``pad`` as begin/end pairs), ``same`` (output
    ceil(size / stride); an odd total puts the extra element at the end) and
    ``same_lower`` (at the beginning), as coremltools' conv type inference defines them.
    """
    if pad_type == "valid":
        return [(0, 0)] * len(spatial)
    if pad_type == "custom":
        flat = [int(value) for value in np.asarray(pad).reshape(-1)]
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(spatial))]
    if pad_type in ("same", "same_lower"):
        result = []
        for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            out = math.ceil(size / s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            result.append((large, small) if pad_type == "same_lower" else (small, large))
        return result
    raise ValueError(f"conv: unknown pad_type {pad_type!r}")


def conv_geometry(
    spatial: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: Any = None,
    dilations: Any = None,
    pad_type: Any = None,
    pad: Any = None,
) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """The strides, dilations and (begin, end) padding per spatial axis of a conv-like op
    (``conv``, a pooling) on input sizes ``spatial``, from its MIL arguments (None: MIL's
    default, ``valid`` padding)."""
    rank = len(spatial)
    stride = [1] * rank if strides is None else [int(s) for s in np.ravel(strides)]
    dilation = [1] * rank if dilations is None else [int(d) for d in np.ravel(dilations)]
    kind = "valid" if pad_type is None else str(pad_type)
    return stride, dilation, conv_padding(kind, pad, spatial, kernel, stride, dilation)


__all__ = ["conv_geometry", "conv_padding"]
