"""The columns of ``anekit bench`` (light: the CLI checks ``--column`` with them before it
imports :mod:`anekit.bench`, which imports coremltools)."""

from __future__ import annotations

from anekit.runtimes import RUNTIMES

__all__ = ["COLUMNS", "DEFAULT_COLUMNS"]

COLUMNS = {
    "ane": "ANE (Core ML, CPU_AND_NE)",
    "gpu": "GPU (Core ML, CPU_AND_GPU)",
    "numpy": "NumPy fp32",
    "onnxruntime": "ONNX Runtime CPU fp32",
    "simulator": "simulator (fp16, simulated)",
    "direct": RUNTIMES["direct"].device,
}
#: The columns run unless others are named: the direct path is opt-in everywhere.
DEFAULT_COLUMNS = tuple(key for key in COLUMNS if key != "direct")
