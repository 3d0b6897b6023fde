"""What a program takes and gives: tensor specs, and the I/O contract a caller sees.

A pass may widen an input's or output's last axis (``pad_io_width``: the ANE wants
at least 32 elements there); the :class:`IOContract` keeps both shapes, pads inputs
with zeros on the way in and slices outputs on the way out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

OutputTree = Literal["single", "tuple", "list", "dict"]


@dataclass(frozen=True)
class TensorSpec:
    """The static shape and dtype of a program input or output (and its name).

    Pass one to :func:`anekit.compile` in place of an example array when only the
    shape and dtype matter.
    """

    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    name: str | None = None

    def __init__(self, shape: Sequence[int], dtype: Any, name: str | None = None) -> None:
        object.__setattr__(self, "shape", tuple(int(dim) for dim in shape))
        object.__setattr__(self, "dtype", np.dtype(dtype))
        object.__setattr__(self, "name", name)

    def describe(self) -> str:
        """``x: float16[256, 512]``."""
        dims = ", ".join(str(dim) for dim in self.shape)
        return f"{self.name}: {self.dtype.name}[{dims}]"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype.name}


@dataclass(frozen=True)
class IOContract:
    """A function's inputs and outputs as stored (``package_*``, after any widening)
    and the widths callers see (``widths``: name -> the last axis before widening)."""

    package_inputs: tuple[TensorSpec, ...]
    package_outputs: tuple[TensorSpec, ...]
    widths: dict[str, int] = field(default_factory=dict)

    def _unpadded(self, spec: TensorSpec) -> TensorSpec:
        width = self.widths.get(str(spec.name))
        if width is None:
            return spec
        return TensorSpec((*spec.shape[:-1], width), spec.dtype, spec.name)

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        """The inputs as callers give them."""
        return tuple(self._unpadded(spec) for spec in self.package_inputs)

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        """The outputs as callers get them."""
        return tuple(self._unpadded(spec) for spec in self.package_outputs)

    def pad(self, name: Any, array: np.ndarray) -> np.ndarray:
        """``array`` zero-padded on its last axis to the stored width of ``name``."""
        if str(name) not in self.widths:
            return array
        stored = next(spec for spec in self.package_inputs if spec.name == name)
        extra = stored.shape[-1] - array.shape[-1]
        return np.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, extra)])

    def unpad(self, name: Any, array: np.ndarray) -> np.ndarray:
        """``array`` sliced back to the width callers see."""
        width = self.widths.get(str(name))
        return array if width is None else array[..., :width]


def widened(before: Sequence[TensorSpec], after: Sequence[TensorSpec]) -> dict[str, int]:
    """Inputs/outputs whose last axis changed between ``before`` and ``after`` (same
    names): name -> the width they had before."""
    now = {str(spec.name): spec.shape for spec in after}
    return {
        str(spec.name): spec.shape[-1]
        for spec in before
        if spec.shape and str(spec.name) in now and now[str(spec.name)][-1] != spec.shape[-1]
    }


__all__ = ["IOContract", "OutputTree", "TensorSpec", "widened"]
