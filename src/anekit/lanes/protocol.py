"""The lane wire format: length-prefixed frames on a worker's stdin and stdout.

Every frame is a little-endian u32 payload length, then the payload; the payload's
first byte says what it is:

- ``H`` hello (worker -> parent, JSON): admitted or refused, rate, known-answer cosine;
- ``P`` progress (worker -> parent, JSON), while the worker starts, so that a long
  Core ML compile is not taken for a hang;
- ``B`` batch (parent -> worker): u32 batch id, u32 rows, then per row u32 count and
  that many u32 token ids;
- ``R`` result (worker -> parent): u32 batch id, a status byte (0 ok, 1 error), then
  u32 rows, u32 dimension and rows x dimension float32 values, or an error text;
- ``Q`` quit (parent -> worker).

Frames above :data:`MAX_FRAME` bytes are refused on both sides.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from anekit.errors import LaneError

MAX_FRAME = 64 * 2**20
HELLO, PROGRESS, BATCH, RESULT, QUIT = b"H", b"P", b"B", b"R", b"Q"
OK, ERROR = 0, 1
_U32 = struct.Struct("<I")


class ProtocolError(LaneError):
    """A frame that breaks the wire format (too large, truncated, unknown kind)."""


class TruncatedFrame(ProtocolError):
    """The stream ended inside a frame: the writer died (or closed it) mid-frame."""


def encode_frame(payload: bytes) -> bytes:
    """``payload`` with its length prefix; a payload above :data:`MAX_FRAME` is refused."""
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(payload)} bytes is above the {MAX_FRAME}-byte limit")
    return _U32.pack(len(payload)) + payload


def write_frame(stream: IO[bytes], payload: bytes) -> None:
    stream.write(encode_frame(payload))
    stream.flush()


def _read_exactly(stream: IO[bytes], count: int) -> bytes | None:
    chunks, missing = [], count
    while missing:
        chunk = stream.read(missing)
        if not chunk:
            return None
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next frame's payload; None when the stream ended cleanly before a frame."""
    header = _read_exactly(stream, 4)
    if header is None:
        return None
    (length,) = _U32.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes announced; the limit is {MAX_FRAME}")
    if length == 0:
        raise ProtocolError("empty frame")
    payload = _read_exactly(stream, length)
    if payload is None:
        raise TruncatedFrame(f"stream ended inside a frame of {length} bytes")
    return payload


def json_frame(kind: bytes, message: dict[str, Any]) -> bytes:
    return kind + json.dumps(message, allow_nan=False).encode()


def decode_json(payload: bytes) -> dict[str, Any]:
    try:
        message = json.loads(payload[1:])
    except ValueError as error:
        raise ProtocolError(f"{payload[:1]!r} frame is not JSON: {error}") from error
    if not isinstance(message, dict):
        raise ProtocolError(f"{payload[:1]!r} frame is not a JSON object")
    return message


def batch_frame(batch_id: int, rows: Sequence[Sequence[int]]) -> bytes:
    parts = [BATCH, _U32.pack(batch_id), _U32.pack(len(rows))]
    for tokens in rows:
        parts += [_U32.pack(len(tokens)), np.asarray(tokens, "<u4").tobytes()]
    return b"".join(parts)


def decode_batch(payload: bytes) -> tuple[int, list[list[int]]]:
    try:
        batch_id, count = struct.unpack_from("<II", payload, 1)
        offset = 9
        rows = []
        for _ in range(count):
            (length,) = _U32.unpack_from(payload, offset)
            # frombuffer raises ValueError on a row shorter than announced
            tokens = np.frombuffer(payload, "<u4", length, offset + 4)
            rows.append(tokens.astype(np.int64).tolist())
            offset += 4 + 4 * length
    except struct.error as error:
        raise ProtocolError(f"batch frame is truncated: {error}") from error
    except ValueError as error:
        raise ProtocolError(f"batch frame is malformed: {error}") from error
    if offset != len(payload):
        raise ProtocolError(f"batch frame has {len(payload) - offset} trailing bytes")
    return batch_id, rows


def result_frame(batch_id: int, vectors: np.ndarray) -> bytes:
    array = np.ascontiguousarray(vectors, "<f4")
    rows, dimension = array.shape
    return RESULT + struct.pack("<IBII", batch_id, OK, rows, dimension) + array.tobytes()


def error_frame(batch_id: int, text: str) -> bytes:
    return RESULT + struct.pack("<IB", batch_id, ERROR) + text.encode("utf-8", "replace")


@dataclass
class Result:
    """A decoded result frame: vectors, or an error text."""

    batch_id: int
    vectors: np.ndarray | None
    error: str | None


def decode_result(payload: bytes) -> Result:
    try:
        batch_id, status = struct.unpack_from("<IB", payload, 1)
        if status == ERROR:
            return Result(batch_id, None, payload[6:].decode("utf-8", "replace"))
        if status != OK:
            raise ProtocolError(f"result frame has unknown status {status}")
        rows, dimension = struct.unpack_from("<II", payload, 6)
        expected = 14 + 4 * rows * dimension
        if len(payload) != expected:
            raise ProtocolError(
                f"result frame holds {len(payload)} bytes; "
                f"{rows}x{dimension} float32 values need {expected}"
            )
        vectors = np.frombuffer(payload, "<f4", rows * dimension, 14).reshape(rows, dimension)
    except struct.error as error:
        raise ProtocolError(f"result frame is truncated: {error}") from error
    return Result(batch_id, vectors.astype(np.float32), None)
