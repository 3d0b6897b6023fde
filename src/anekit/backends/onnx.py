"""ONNX Runtime backend: CPU everywhere, CUDA where ``onnxruntime-gpu`` and a GPU are.

A program is emitted to ONNX (:mod:`anekit.package.onnx_emitter`) and run with
graph optimizations on. ``mode="int8"`` quantizes the matmul weights per channel
first (dynamic quantization). Results are measurements of this machine's CPU or
GPU, never of a Neural Engine.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from anekit.backends import RunReport

if TYPE_CHECKING:
    from anekit.program import CompiledProgram

MODES = ("fp32", "int8")


def providers() -> list[str]:
    """CUDA first when this ONNX Runtime has it, then the CPU."""
    import onnxruntime

    available = onnxruntime.get_available_providers()
    chosen = [name for name in ("CUDAExecutionProvider",) if name in available]
    return [*chosen, "CPUExecutionProvider"]


def session_for(path: Path | bytes, threads: int | None = None, gpu: bool = True) -> Any:
    """An optimized ONNX Runtime session; ``threads`` intra-op threads (default: all)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    chosen = providers() if gpu else ["CPUExecutionProvider"]
    source = str(path) if isinstance(path, Path) else path
    return onnxruntime.InferenceSession(source, options, providers=chosen)


#: ONNX Runtime's input type names -> NumPy dtypes.
_ONNX_TYPES: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
}


class OnnxSession:
    """A program on ONNX Runtime."""

    def __init__(self, session: Any, mode: str) -> None:
        self.session = session
        self.mode = mode
        self.last_run: RunReport | None = None
        self.device = "GPU (CUDA)" if "CUDAExecutionProvider" in session.get_providers() else "CPU"
        #: Input name -> the dtype the model takes (fp16 programs compute in fp32 here).
        self.input_types = {item.name: _ONNX_TYPES.get(item.type) for item in session.get_inputs()}

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        names = [output.name for output in self.session.get_outputs()]
        ready = {
            name: np.asarray(value, self.input_types.get(name) or np.asarray(value).dtype)
            for name, value in feeds.items()
        }
        values = self.session.run(names, ready)
        self.last_run = RunReport(
            backend="onnx",
            device=f"{self.device} via ONNX Runtime ({self.mode})",
            simulated=False,
            seconds=time.perf_counter() - start,
        )
        return dict(zip(names, values, strict=True))


class OnnxBackend:
    """ONNX Runtime (fp32, or int8 weights with ``mode="int8"``)."""

    name = "onnx"

    def available(self) -> bool:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return False
        return True

    def unavailable_reason(self) -> str:
        return "onnxruntime is not installed"

    def load(self, program: CompiledProgram, mode: str | None = None) -> OnnxSession:
        from anekit.errors import ProgramError
        from anekit.package.onnx_emitter import quantize_int8, save_onnx, to_onnx

        chosen = mode or "fp32"
        if chosen not in MODES:
            raise ProgramError(f"onnx backend modes are {', '.join(MODES)}, got {chosen!r}")
        model = to_onnx(program)
        if chosen == "fp32":
            return OnnxSession(session_for(model.SerializeToString()), chosen)
        with tempfile.TemporaryDirectory(prefix="anekit-onnx-") as scratch:
            source = save_onnx(model, Path(scratch) / "fp32.onnx")
            target = quantize_int8(source, Path(scratch) / "int8.onnx")
            session = session_for(target)
        return OnnxSession(session, chosen)


__all__ = ["MODES", "OnnxBackend", "OnnxSession", "providers", "session_for"]
