"""Where the direct ANE path's inputs and outputs live: each tensor's buffer layout and
each procedure's symbol indices, as the compiled model reports them.

After a load, the private framework's ``_ANEModel.modelAttributes`` describes the
model (no Apple documentation; field names from public projects that read it):

- ``NetworkStatusList``: one entry per procedure, each with a ``LiveInputList`` and a
  ``LiveOutputList`` of tensors: ``Name``, ``Symbol``, ``Type`` (``Float16`` /
  ``Float32``), ``Batches``, ``Channels``, ``Depth``, ``Height``, ``Width`` and the byte
  strides ``BatchStride``, ``PlaneStride`` (a channel), ``DepthStride``, ``RowStride``
  (ANE-Training ``docs/ANE_QOS_EVENTS.md``; tmc/apple ``x/ane/surface.go`` sizes a
  surface as ``Channels * PlaneStride`` with rows of ``RowStride`` bytes; Epistates/pmetal
  ``ane/runtime.rs``: ``max(BatchStride * Batches, PlaneStride * Channels * Depth *
  Batches)``);
- ``ANEFModelDescription`` / ``ANEFModelProcedures``: per procedure, the symbol indices
  a request passes as ``inputIndices`` and ``outputIndices``
  (``ANEFModelInputSymbolIndexArray``, ``ANEFModelOutputSymbolIndexArray``;
  freedomtan/coreml_to_ane_hwx ``ane/run_hwx_with_ane_client.m``).

Where the attributes say nothing, a tensor is packed densely and procedure ``p``'s
symbols are numbered after those of the procedures before it. None of this has been
checked on hardware by this project (no Mac in CI).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from anekit.errors import BackendUnavailableError

#: The element types the attributes name.
_TYPES: dict[str, type[np.floating[Any]]] = {"Float16": np.float16, "Float32": np.float32}


@dataclass(frozen=True)
class Layout:
    """One tensor (the program's ``name`` and ``shape``) in its IOSurface: (batches,
    channels, depth, height, width) elements of ``dtype`` at the given byte strides (the
    last axis dense)."""

    name: str
    shape: tuple[int, ...]
    dims: tuple[int, int, int, int, int]
    strides: tuple[int, int, int, int]  # batch, plane (channel), depth, row; in bytes
    dtype: type[np.floating[Any]] = np.float16
    symbol: int | None = None

    @classmethod
    def dense(cls, name: str, shape: Sequence[int], symbol: int | None = None) -> Layout:
        """``shape`` packed with no gaps: (..., C, H, W) as batches, channels, height and
        width (a shorter shape takes 1 for the axes it lacks)."""
        padded = (1, 1, 1, *shape)[-3:] if len(shape) < 3 else tuple(shape[-3:])
        channels, height, width = (int(size) for size in padded)
        batches = int(np.prod(shape[:-3], dtype=np.int64)) if len(shape) > 3 else 1
        row = width * 2
        plane = row * height
        return cls(
            name,
            tuple(int(size) for size in shape),
            (batches, channels, 1, height, width),
            (plane * channels, plane, plane, row),
            symbol=symbol,
        )

    @classmethod
    def from_attributes(cls, entry: Mapping[str, Any], where: str) -> Layout:
        """A ``LiveInputList`` / ``LiveOutputList`` entry; ``where`` names it in errors."""
        try:
            kind = str(entry.get("Type", "Float16"))
            if kind not in _TYPES:
                raise BackendUnavailableError(
                    f"{where}: element type {kind!r}; the direct path reads {', '.join(_TYPES)}"
                )
            sizes = [
                int(entry.get(key, 1))
                for key in ("Batches", "Channels", "Depth", "Height", "Width")
            ]
            itemsize = np.dtype(_TYPES[kind]).itemsize
            width, height, depth, channels = sizes[4], sizes[3], sizes[2], sizes[1]
            row = int(entry.get("RowStride", width * itemsize))
            depth_stride = int(entry.get("DepthStride", row * height))
            plane = int(entry.get("PlaneStride", depth_stride * depth))
            batch = int(entry.get("BatchStride", plane * channels))
            symbol = entry.get("Symbol")
        except (TypeError, ValueError, AttributeError) as error:
            raise BackendUnavailableError(
                f"{where}: unreadable buffer description: {error}"
            ) from error
        dims = (sizes[0], sizes[1], sizes[2], sizes[3], sizes[4])
        if min(dims) < 1 or row < width * itemsize:
            raise BackendUnavailableError(f"{where}: impossible buffer description {dict(entry)}")
        return cls(
            str(entry.get("Name", "")),
            dims,
            dims,
            (batch, plane, depth_stride, row),
            _TYPES[kind],
            None if symbol is None else int(symbol),
        )

    @property
    def itemsize(self) -> int:
        return int(np.dtype(self.dtype).itemsize)

    @property
    def size(self) -> int:
        """The buffer's bytes: past the last element, and at least what the strides span."""
        batches, channels, width = self.dims[0], self.dims[1], self.dims[4]
        batch, plane = self.strides[:2]
        last = sum((n - 1) * s for n, s in zip(self.dims[:4], self.strides, strict=True))
        last += width * self.itemsize
        return max(last, batch * batches, plane * channels * batches)

    def _view(self, buffer: Any) -> np.ndarray:
        return np.ndarray(self.dims, self.dtype, buffer, strides=(*self.strides, self.itemsize))

    def pack(self, value: np.ndarray) -> bytes:
        """``value`` (of :attr:`shape`) laid out in a buffer of :attr:`size` bytes, the
        gaps zero."""
        value = np.asarray(value)
        if value.shape != self.shape:
            raise ValueError(f"input {self.name}: shape {value.shape}, expected {self.shape}")
        buffer = bytearray(self.size)
        self._view(buffer)[...] = value.astype(self.dtype).reshape(self.dims)
        return bytes(buffer)

    def unpack(self, data: bytes) -> np.ndarray:
        """The values of a buffer of this layout, as an fp16 array of :attr:`shape`."""
        return np.array(self._view(data), np.float16).reshape(self.shape)


@dataclass(frozen=True)
class Procedure:
    """One function of the compiled model: its index and its tensors' layouts and symbol
    indices, in the function's input and output order."""

    name: str
    index: int
    inputs: tuple[Layout, ...]
    outputs: tuple[Layout, ...]
    input_symbols: tuple[int, ...]
    output_symbols: tuple[int, ...]


#: A tensor as the program declares it: (name, shape).
Tensor = tuple[str, tuple[int, ...]]


def procedures(
    functions: Sequence[tuple[str, Sequence[Tensor], Sequence[Tensor]]],
    attributes: Mapping[str, Any] | None,
) -> list[Procedure]:
    """Each of ``functions`` — (name, inputs, outputs), each tensor (name, shape), in the
    order the MIL text declares them — as a procedure of the compiled model whose
    ``modelAttributes`` are ``attributes`` (None or empty: dense layouts, symbols in
    declaration order)."""
    attributes = attributes or {}
    statuses = list(attributes.get("NetworkStatusList") or [])
    description = attributes.get("ANEFModelDescription") or {}
    listed = list(description.get("ANEFModelProcedures") or [])
    found = []
    seen_inputs = seen_outputs = 0
    for index, (name, inputs, outputs) in enumerate(functions):
        status = statuses[index] if index < len(statuses) else {}
        where = f"procedure {index} ({name})"
        input_layouts = _layouts(inputs, status.get("LiveInputList"), f"{where} input")
        output_layouts = _layouts(outputs, status.get("LiveOutputList"), f"{where} output")
        entry = listed[index] if index < len(listed) else {}
        input_symbols = _symbols(
            entry.get("ANEFModelInputSymbolIndexArray"), input_layouts, seen_inputs
        )
        output_symbols = _symbols(
            entry.get("ANEFModelOutputSymbolIndexArray"), output_layouts, seen_outputs
        )
        seen_inputs += len(inputs)
        seen_outputs += len(outputs)
        found.append(
            Procedure(name, index, input_layouts, output_layouts, input_symbols, output_symbols)
        )
    return found


def _layouts(tensors: Sequence[Tensor], described: Any, where: str) -> tuple[Layout, ...]:
    """The tensors' layouts: the model's description, matched by name (by position when
    it names none), checked to hold as many elements; dense where it has none."""
    if not described:
        return tuple(Layout.dense(name, shape) for name, shape in tensors)
    entries = [Layout.from_attributes(entry, f"{where} {i}") for i, entry in enumerate(described)]
    if len(entries) != len(tensors):
        raise BackendUnavailableError(
            f"{where}s: the compiled model reports {len(entries)}, the program has {len(tensors)}"
        )
    by_name = {layout.name: layout for layout in entries if layout.name}
    chosen = []
    for position, (name, shape) in enumerate(tensors):
        layout = by_name.get(name, entries[position])
        if int(np.prod(layout.dims)) != int(np.prod(shape, dtype=np.int64)):
            raise BackendUnavailableError(
                f"{where} {name}: the compiled model lays out {layout.dims}, "
                f"the program's shape is {shape}"
            )
        chosen.append(dataclasses.replace(layout, name=name, shape=tuple(shape)))
    return tuple(chosen)


def _symbols(listed: Any, layouts: Sequence[Layout], first: int) -> tuple[int, ...]:
    """The symbol indices a request passes: the procedure's list, else the layouts'
    symbols, else numbered from ``first``."""
    if listed is not None and len(listed) == len(layouts):
        return tuple(int(symbol) for symbol in listed)
    if layouts and all(layout.symbol is not None for layout in layouts):
        return tuple(int(layout.symbol) for layout in layouts)  # type: ignore[arg-type]
    return tuple(range(first, first + len(layouts)))
