"""Writing programs out: several functions as one multifunction ``.mlpackage`` with
shared and optionally compressed weights (:func:`save_functions`), ONNX for ONNX
Runtime (:mod:`~anekit.package.onnx_emitter`), and textual MIL with its weight file for
the direct ANE path (:mod:`~anekit.package.mil_text`)."""

from anekit.package.multifunction import WEIGHTS, save_functions

__all__ = ["WEIGHTS", "save_functions"]
