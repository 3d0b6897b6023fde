"""Writing programs out: several functions as one multifunction ``.mlpackage`` with
shared and optionally compressed weights (:func:`save_functions`), and ONNX for ONNX
Runtime (:mod:`~anekit.package.onnx_emitter`)."""

from anekit.package.multifunction import WEIGHTS, save_functions

__all__ = ["WEIGHTS", "save_functions"]
