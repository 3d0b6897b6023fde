"""GIL-free Core ML predictions: the strided copies (with a stand-in MLMultiArray), the
fallback to coremltools off macOS, and (``macos``) agreement with coremltools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anekit import errors
from anekit._coremltools import ct
from anekit.backends import coreml_nogil


class _Pointer:
    def __init__(self, memory: bytearray) -> None:
        self.memory = memory

    def as_buffer(self, count: int) -> memoryview:
        assert count <= len(self.memory), "read past the array's memory"
        return memoryview(self.memory)[:count]


class _MultiArray:
    """What strided_view reads of an MLMultiArray: shape, strides (in elements) and
    a pointer PyObjC exposes as a buffer."""

    def __init__(self, shape: list[int], strides: list[int], itemsize: int) -> None:
        self._shape, self._strides = shape, strides
        span = 1 + sum((size - 1) * step for size, step in zip(shape, strides, strict=True))
        self.memory = bytearray(span * itemsize)

    def shape(self) -> list[int]:
        return self._shape

    def strides(self) -> list[int]:
        return self._strides

    def dataPointer(self) -> _Pointer:
        return _Pointer(self.memory)


def test_strided_view_honours_padded_strides() -> None:
    # (2, 3, 5) fp16 with rows padded to 8 elements, as Core ML may lay out fp16 arrays
    array = _MultiArray([2, 3, 5], [24, 8, 1], 2)
    values = np.arange(30, dtype=np.float16).reshape(2, 3, 5)
    coreml_nogil.strided_view(array, np.float16)[...] = values
    flat = np.frombuffer(bytes(array.memory), np.float16)
    assert flat[8 + 4] == values[0, 1, 4] and flat[24] == values[1, 0, 0]
    assert flat[5:8].tolist() == [0, 0, 0]  # the padding is left alone
    np.testing.assert_array_equal(coreml_nogil.strided_view(array, np.float16), values)


def test_empty_arrays_need_no_memory() -> None:
    assert coreml_nogil.strided_view(_MultiArray([0, 4], [4, 1], 4), np.float32).shape == (0, 4)


@pytest.mark.skipif(coreml_nogil.available(), reason="PyObjC's CoreML is installed here")
def test_without_pyobjc_predictions_fall_back_to_coremltools(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[dict[str, Any]] = []

    def compiled_model(path: str, **options: Any) -> str:
        calls.append({"path": path, **options})
        return "coremltools model"

    monkeypatch.setattr(ct.models, "CompiledMLModel", compiled_model)
    loaded = coreml_nogil.load(tmp_path / "m.mlmodelc", "CPU_AND_GPU", "seq128")
    assert loaded == "coremltools model"
    assert calls == [
        {
            "path": str(tmp_path / "m.mlmodelc"),
            "compute_units": ct.ComputeUnit.CPU_AND_GPU,
            "function_name": "seq128",
        }
    ]
    with pytest.raises(errors.BackendUnavailableError, match="pyobjc-framework-CoreML"):
        coreml_nogil.NoGilModel(tmp_path / "m.mlmodelc")


@pytest.mark.macos
def test_gil_free_predictions_agree_with_coremltools() -> None:
    import anekit
    from anekit import demo

    if not coreml_nogil.available():
        pytest.skip("pyobjc-framework-CoreML is not installed")
    ffn, x = demo.make_ffn(), demo.example_input()
    program = anekit.compile(ffn, x)
    program(x, backend="coreml")
    session = next(iter(program._sessions.values()))
    assert session.no_gil is not None
    feeds = program.package_feeds({"x": x})
    ours = session.no_gil.predict(feeds)
    theirs = session.model.predict(feeds)
    for name, value in theirs.items():
        np.testing.assert_allclose(
            np.asarray(ours[name], np.float32), np.asarray(value, np.float32), rtol=1e-3
        )
