"""Writing programs out: ONNX for ONNX Runtime (``onnx_emitter``)."""
