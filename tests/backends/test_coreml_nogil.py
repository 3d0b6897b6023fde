"""GIL-free Core ML predictions: the strided copies (with the MLMultiArray stand-in of
tests/standins.py), the fallback to coremltools off macOS (its contract-enforcing
stand-in), and (``macos``) agreement with coremltools. tests/backends/test_standins.py
runs NoGilModel end to end against the PyObjC stand-in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from anekit import errors
from anekit._coremltools import ct
from anekit.backends import coreml_nogil
from standins import CoreMLTools, MLMultiArray, fake_mlpackage

FP16, FP32 = 0x10000 | 16, 0x10000 | 32


def test_strided_view_honours_padded_strides() -> None:
    # (2, 3, 5) fp16 with rows padded to 8 elements, as Core ML may lay out fp16 arrays
    array = MLMultiArray.with_strides([2, 3, 5], FP16, [24, 8, 1])
    values = np.arange(30, dtype=np.float16).reshape(2, 3, 5)
    coreml_nogil.strided_view(array, np.float16)[...] = values
    flat = np.frombuffer(array.memory(), np.float16)
    assert flat[8 + 4] == values[0, 1, 4] and flat[24] == values[1, 0, 0]
    assert flat[5:8].tolist() == [0, 0, 0]  # the padding is left alone
    np.testing.assert_array_equal(coreml_nogil.strided_view(array, np.float16), values)


def test_empty_arrays_need_no_memory() -> None:
    array = MLMultiArray.with_strides([0, 4], FP32, [4, 1])
    assert coreml_nogil.strided_view(array, np.float32).shape == (0, 4)


@pytest.mark.skipif(coreml_nogil.available(), reason="PyObjC's CoreML is installed here")
def test_without_pyobjc_predictions_fall_back_to_coremltools(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    coremltools = CoreMLTools().install(monkeypatch)
    compiled = Path(
        ct.models.utils.compile_model(
            str(fake_mlpackage(tmp_path / "m.mlpackage")), str(tmp_path / "m.mlmodelc")
        )
    )
    loaded = coreml_nogil.load(compiled, "CPU_AND_GPU", "seq128")
    assert coremltools.loads == [loaded]
    assert loaded.path == str(compiled)
    assert loaded.compute_units is ct.ComputeUnit.CPU_AND_GPU
    assert loaded.function_name == "seq128"
    with pytest.raises(errors.BackendUnavailableError, match="pyobjc-framework-CoreML"):
        coreml_nogil.NoGilModel(compiled)


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
