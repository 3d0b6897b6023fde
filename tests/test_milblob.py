"""The weight blob writer (issue 18, part 2) against coremltools' own blob storage
(``libmilstoragepython``, built on every platform): the same bytes for the same arrays,
and every blob read back by coremltools' reader, value for value, at the offsets anekit
gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anekit._milblob import DTYPE_CODES, blob_file, read_blob_file, write_blob_file
from anekit.errors import ProgramError

#: coremltools' writer and reader method suffix per dtype.
_CT_NAMES: dict[type[np.generic], str] = {
    np.float16: "fp16", np.float32: "float", np.uint8: "uint8", np.int8: "int8",
    np.int16: "int16", np.uint16: "uint16", np.int32: "int32", np.uint32: "uint32",
}  # fmt: skip


def _arrays(rng: np.random.Generator) -> list[np.ndarray]:
    """One blob of each dtype, of sizes that are and are not multiples of 64 bytes, and
    the extremes of each integer type."""
    arrays = []
    for size, dtype in zip((5, 64, 3, 1000, 7, 33, 128, 9), _CT_NAMES, strict=True):
        if np.dtype(dtype).kind == "f":
            values = rng.standard_normal(size).astype(dtype)
        else:
            info = np.iinfo(np.dtype(dtype))
            values = rng.integers(info.min, info.max, size, endpoint=True).astype(dtype)
            values[:2] = info.min, info.max
        arrays.append(values.reshape(-1, 1) if size % 2 else values)
    return arrays


def _bits(array: np.ndarray) -> np.ndarray:
    return array.view(np.uint16) if array.dtype == np.float16 else array


def _coremltools_file(arrays: list[np.ndarray], path: Path) -> list[int]:
    from coremltools.libmilstoragepython import _BlobStorageWriter

    writer = _BlobStorageWriter(str(path), truncate_file=True)
    # fp16 goes in as its bit patterns, as coremltools' backend/mil/helper.py passes it
    offsets = [
        int(getattr(writer, f"write_{_CT_NAMES[a.dtype.type]}_data")(_bits(a.flatten())))
        for a in arrays
    ]
    del writer  # flushes and closes the file
    return offsets


def test_the_bytes_are_coremltools_own(tmp_path: Path, rng: np.random.Generator) -> None:
    arrays = _arrays(rng)
    expected_offsets = _coremltools_file(arrays, tmp_path / "coremltools.bin")
    data, offsets = blob_file(arrays)
    assert offsets == expected_offsets
    assert data == (tmp_path / "coremltools.bin").read_bytes()


def test_coremltools_reads_every_blob_back_value_for_value(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    from coremltools.libmilstoragepython import _BlobStorageReader

    arrays = _arrays(rng)
    path = tmp_path / "weights" / "weight.bin"
    offsets = write_blob_file(arrays, path)
    reader = _BlobStorageReader(str(path))
    for array, offset in zip(arrays, offsets, strict=True):
        read = getattr(reader, f"read_{_CT_NAMES[array.dtype.type]}_data")(offset)
        np.testing.assert_array_equal(np.asarray(read).view(array.dtype), array.reshape(-1))
    for blob, array in zip(read_blob_file(path.read_bytes()), arrays, strict=True):
        assert blob.dtype == array.dtype
        np.testing.assert_array_equal(blob.values, array.reshape(-1))


def test_offsets_point_at_aligned_metadata_records(rng: np.random.Generator) -> None:
    data, offsets = blob_file(_arrays(rng))
    assert offsets[0] == 64 and all(offset % 64 == 0 for offset in offsets)
    assert [blob.offset for blob in read_blob_file(data)] == offsets
    assert int.from_bytes(data[:4], "little") == len(offsets)


@pytest.mark.parametrize("dtype", [np.float64, np.bool_, np.int64, np.complex64])
def test_dtypes_the_format_cannot_hold_are_refused_by_name(dtype: type) -> None:
    with pytest.raises(ProgramError, match=f"weight blob 1: dtype {np.dtype(dtype)} cannot"):
        blob_file([np.zeros(4, np.float16), np.zeros(4, dtype)])
    assert np.dtype(dtype) not in DTYPE_CODES


def test_a_damaged_file_is_named_by_blob_and_offset(rng: np.random.Generator) -> None:
    data, offsets = blob_file(_arrays(rng))
    broken = bytearray(data)
    broken[offsets[2]] ^= 0xFF  # the third record's sentinel
    with pytest.raises(ProgramError, match=f"blob 2 at {offsets[2]}: sentinel"):
        read_blob_file(bytes(broken))
    with pytest.raises(ProgramError, match=r"past the end|out of place"):
        read_blob_file(data[: offsets[-1] + 70])
