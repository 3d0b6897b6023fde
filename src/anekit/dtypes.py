"""NumPy dtypes as MIL sees them.

Traced programs compute in float16, float32, int32 and bool. NumPy's own type
resolution (``ufunc.resolve_dtypes``, NEP 50 weak Python scalars) decides every
result dtype; the result is then *canonicalized*: float64 becomes float32 and
int64 becomes int32, because Core ML has neither (the same choice JAX makes with
64-bit types disabled). Program inputs must already be float16, float32 or int32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit._coremltools import types

FLOAT16 = np.dtype(np.float16)
FLOAT32 = np.dtype(np.float32)
INT32 = np.dtype(np.int32)
BOOL = np.dtype(np.bool_)

#: dtypes a traced value may have.
COMPUTE_DTYPES: frozenset[np.dtype[Any]] = frozenset({FLOAT16, FLOAT32, INT32, BOOL})
#: dtypes a program input may have.
INPUT_DTYPES: frozenset[np.dtype[Any]] = frozenset({FLOAT16, FLOAT32, INT32})

_CANONICAL: dict[np.dtype[Any], np.dtype[Any]] = {
    np.dtype(np.float64): FLOAT32,
    np.dtype(np.int64): INT32,
}

_TO_MIL: dict[np.dtype[Any], Any] = {
    FLOAT16: types.fp16,
    FLOAT32: types.fp32,
    INT32: types.int32,
    BOOL: types.bool,
}

#: MIL ``cast`` dtype strings.
_CAST_NAMES: dict[np.dtype[Any], str] = {
    FLOAT16: "fp16",
    FLOAT32: "fp32",
    INT32: "int32",
    BOOL: "bool",
}


def canonicalize(dtype: np.dtype[Any]) -> np.dtype[Any] | None:
    """The dtype a traced program uses for ``dtype``, or ``None`` if it has none."""
    dtype = np.dtype(dtype)
    dtype = _CANONICAL.get(dtype, dtype)
    return dtype if dtype in COMPUTE_DTYPES else None


def to_mil(dtype: np.dtype[Any]) -> Any:
    """The MIL builtin type for a canonical NumPy dtype."""
    return _TO_MIL[np.dtype(dtype)]


def from_mil(mil_type: Any) -> np.dtype[Any]:
    """The NumPy dtype of a MIL builtin type."""
    result: np.dtype[Any] = np.dtype(types.nptype_from_builtin(mil_type))
    return result


def cast_name(dtype: np.dtype[Any]) -> str:
    """The ``dtype`` string of MIL's ``cast`` op for a canonical dtype."""
    return _CAST_NAMES[np.dtype(dtype)]


def is_float(dtype: np.dtype[Any]) -> bool:
    """True for float16 and float32."""
    return np.dtype(dtype).kind == "f"


def describe_supported() -> str:
    """A short human list of the supported dtypes, for error messages."""
    return "float16, float32, int32 and bool (float64 computes as float32, int64 as int32)"
