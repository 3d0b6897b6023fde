"""anekit.package.int8_kernels: the probe of ONNX Runtime's u8 x s8 kernel and the weight
forms (the forms' effect on whole models: tests/backends/test_onnx_backend.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from anekit.package import int8_kernels


def test_the_probe_model_is_the_one_onnx_builds() -> None:
    """The probe is encoded by hand (the lean lane workers do not import onnx): it must
    be, field for field, the model onnx.helper makes of the same description."""
    depth = int8_kernels._PROBE_DEPTH
    weight = numpy_helper.from_array(np.full((depth, 8), 127, np.int8), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w"], ["y"])],
        "u8s8_probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, depth])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [4, 8])],
        [weight],
    )
    want = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    want.ir_version = 8
    got = onnx.load_from_string(int8_kernels.probe_model())
    onnx.checker.check_model(got)
    assert got == want


def test_the_default_form_follows_the_probe() -> None:
    saturates = int8_kernels.u8s8_saturates()
    assert int8_kernels.weight_form() == ("u8" if saturates else "s8")
    assert int8_kernels.check_form(None) == int8_kernels.weight_form()


def test_forms_store_the_same_levels() -> None:
    levels = np.array([-127, -1, 0, 1, 127])
    s8, u8 = int8_kernels.stored(levels, "s8"), int8_kernels.stored(levels, "u8")
    assert s8.dtype == np.int8 and s8.tolist() == levels.tolist()
    assert u8.dtype == np.uint8 and u8.tolist() == [1, 127, 128, 129, 255]
    for form, stored in (("s8", s8), ("u8", u8)):
        zero = int8_kernels.zero_point(form)
        assert zero.dtype == stored.dtype and zero.shape == ()
        assert (stored.astype(np.int16) - int(zero)).tolist() == levels.tolist()


def test_an_unknown_form_is_named() -> None:
    with pytest.raises(ValueError, match=r"one of s8, u8, got 's4'"):
        int8_kernels.check_form("s4")
