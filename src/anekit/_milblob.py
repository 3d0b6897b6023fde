"""The MIL weight blob file (``weights/weight.bin``): what a compiled Core ML model and the
ANE's in-memory model descriptor read constants from, written without coremltools.

The layout is Core ML's ``MILBlob`` storage format (coremltools
``mlmodel/src/MILBlob/Blob/StorageFormat.hpp``, ``BlobDataType.hpp``; docs/ane-knowledge.md
§5.3), and :func:`blob_file` writes the same bytes as coremltools' own writer
(``libmilstoragepython._BlobStorageWriter``), which the tests check:

- a 64-byte file header: ``uint32`` blob count, ``uint32`` version 2, zeros;
- per blob, a 64-byte metadata record at a 64-byte aligned offset: ``uint32`` sentinel
  ``0xDEADBEEF``, ``uint32`` MIL data type, ``uint64`` size in bytes, ``uint64`` absolute
  offset of the data (the record's offset + 64), ``uint64`` padding in bits (sub-byte
  types only; 0 here), zeros; then the data, little-endian;
- the next record starts at the next multiple of 64; the last blob is not padded.

A MIL ``BLOBFILE(path, offset)`` points at a blob's metadata record, not its data.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from anekit.errors import ProgramError

ALIGNMENT = 64
HEADER_SIZE = METADATA_SIZE = 64
VERSION = 2
SENTINEL = 0xDEADBEEF
#: MIL blob data types (BlobDataType.hpp) of the dtypes written here.
DTYPE_CODES: dict[np.dtype[np.generic], int] = {
    np.dtype(np.float16): 1,
    np.dtype(np.float32): 2,
    np.dtype(np.uint8): 3,
    np.dtype(np.int8): 4,
    np.dtype(np.int16): 6,
    np.dtype(np.uint16): 7,
    np.dtype(np.int32): 14,
    np.dtype(np.uint32): 15,
}
_DTYPES_BY_CODE = {code: dtype for dtype, code in DTYPE_CODES.items()}


@dataclass(frozen=True)
class Blob:
    """One blob read back: where its metadata record is (the ``BLOBFILE`` offset), its
    data type and its values (flat)."""

    offset: int
    dtype: np.dtype[np.generic]
    values: np.ndarray


def _aligned(offset: int) -> int:
    return -(-offset // ALIGNMENT) * ALIGNMENT


class BlobFileBuilder:
    """A weight file built one array at a time: :meth:`add` gives each array's
    ``BLOBFILE`` offset (its metadata record's) as it goes."""

    def __init__(self) -> None:
        self._body = bytearray(HEADER_SIZE)
        self.offsets: list[int] = []

    def add(self, array: np.ndarray) -> int:
        """Append ``array`` (its dtype one of :data:`DTYPE_CODES`); its offset."""
        value = np.asarray(array)
        code = DTYPE_CODES.get(value.dtype)
        if code is None:
            names = ", ".join(str(dtype) for dtype in DTYPE_CODES)
            raise ProgramError(
                f"weight blob {len(self.offsets)}: dtype {value.dtype} cannot be stored ({names})"
            )
        data = np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()
        body = self._body
        body.extend(bytes(_aligned(len(body)) - len(body)))
        offset = len(body)
        body.extend(struct.pack("<IIQQQ32x", SENTINEL, code, len(data), offset + METADATA_SIZE, 0))
        body.extend(data)
        self.offsets.append(offset)
        return offset

    def to_bytes(self) -> bytes:
        """The file: the header (count, version) and every blob added."""
        struct.pack_into("<II", self._body, 0, len(self.offsets), VERSION)
        return bytes(self._body)


def blob_file(arrays: Iterable[np.ndarray]) -> tuple[bytes, list[int]]:
    """The file holding ``arrays`` in order, and each one's ``BLOBFILE`` offset (its
    metadata record's). Each array keeps its dtype (one of :data:`DTYPE_CODES`)."""
    builder = BlobFileBuilder()
    for array in arrays:
        builder.add(array)
    return builder.to_bytes(), builder.offsets


def write_blob_file(arrays: Iterable[np.ndarray], path: Path) -> list[int]:
    """Write :func:`blob_file` of ``arrays`` to ``path``; each array's ``BLOBFILE`` offset."""
    data, offsets = blob_file(arrays)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return offsets


def read_blob_file(data: bytes) -> list[Blob]:
    """Every blob of a weight file, checked record by record (count, version, sentinel,
    data type, bounds): what a reader of the format relies on."""
    if len(data) < HEADER_SIZE:
        raise ProgramError(f"weight file of {len(data)} bytes: shorter than its header")
    count, version = struct.unpack_from("<II", data, 0)
    if version != VERSION:
        raise ProgramError(f"weight file version {version}, expected {VERSION}")
    blobs, offset = [], HEADER_SIZE
    for index in range(count):
        offset = _aligned(offset)
        if offset + METADATA_SIZE > len(data):
            raise ProgramError(f"blob {index}: its record at {offset} is past the end")
        sentinel, code, size, start, _ = struct.unpack_from("<IIQQQ", data, offset)
        if sentinel != SENTINEL:
            raise ProgramError(
                f"blob {index} at {offset}: sentinel {sentinel:#x}, not {SENTINEL:#x}"
            )
        if code not in _DTYPES_BY_CODE:
            raise ProgramError(f"blob {index} at {offset}: unknown data type {code}")
        if start != offset + METADATA_SIZE or start + size > len(data):
            raise ProgramError(
                f"blob {index} at {offset}: data at {start} ({size} bytes) out of place"
            )
        dtype = _DTYPES_BY_CODE[code]
        values = np.frombuffer(data, dtype.newbyteorder("<"), size // dtype.itemsize, start)
        blobs.append(Blob(offset, dtype, values))
        offset = start + size
    return blobs
