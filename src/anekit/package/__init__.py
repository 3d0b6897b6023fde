"""Writing programs out: several functions as one multifunction ``.mlpackage`` with
shared and optionally compressed weights (:func:`save_functions`,
:mod:`~anekit.package.compression`), ONNX for ONNX Runtime
(:mod:`~anekit.package.onnx_emitter`), and textual MIL with its weight file for the
direct ANE path (:mod:`~anekit.package.mil_text`)."""

from anekit.package.compression import PRESETS, Compression, CompressionReport, compress_model
from anekit.package.multifunction import save_functions

__all__ = ["PRESETS", "Compression", "CompressionReport", "compress_model", "save_functions"]
