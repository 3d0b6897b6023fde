"""What each lane runs inside its worker, and whether it can run on this machine.

- ``ane``: the fp16 package on Core ML with CPU_AND_NE (macOS); floor 0.999;
- ``gpu``: the fp16 package on Core ML with CPU_AND_GPU (macOS), or ONNX Runtime
  fp32 on CUDA elsewhere; floor 0.999;
- ``cpu``: ONNX Runtime on the CPU, int8 weights per channel; floor 0.98;
- ``sim``: the fp16 package in anekit's ANE simulator, the test stand-in for
  ``ane``; floor 0.999;
- ``numpy``: the NumPy fp32 reference; floor 0.999.

The floor is the minimum cosine to the fp32 reference, per known-answer chunk, that
admission demands.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from anekit._runtime import core_ml_runtime_available
from anekit.errors import LaneError


@dataclass(frozen=True)
class LaneKind:
    """A lane's name, what it is, and the known-answer floor it must reach."""

    name: str
    description: str
    floor: float


LANES: dict[str, LaneKind] = {
    kind.name: kind
    for kind in (
        LaneKind("ane", "Core ML on the Neural Engine (fp16 package)", 0.999),
        LaneKind("gpu", "the GPU: Core ML (macOS) or ONNX Runtime CUDA", 0.999),
        LaneKind("cpu", "ONNX Runtime on the CPU, int8 weights", 0.98),
        LaneKind("sim", "the fp16 package in anekit's ANE simulator (a test lane)", 0.999),
        LaneKind("numpy", "the NumPy fp32 reference", 0.999),
    )
}


def _cuda() -> bool:
    try:
        import onnxruntime
    except ImportError:
        return False
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def unavailable_reason(lane: str) -> str | None:
    """Why ``lane`` cannot run on this machine, or None when it can."""
    if lane not in LANES:
        return f"unknown lane {lane!r}; lanes are {', '.join(LANES)}"
    if lane == "ane" and not core_ml_runtime_available():
        return f"needs Core ML on macOS ({platform.system()} here)"
    if lane == "gpu" and not (core_ml_runtime_available() or _cuda()):
        return "needs Core ML (macOS) or onnxruntime-gpu with a CUDA GPU"
    return None


class Engine(Protocol):
    """Embeds tokenized texts: unit vectors, one row per text."""

    device: str
    dimension: int
    model_id: str

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray: ...

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]: ...


class EmbedderEngine:
    """A lane over an :class:`anekit.models.Embedder`."""

    def __init__(self, embedder: Any, device: str) -> None:
        self.embedder = embedder
        self.device = device
        self.dimension = int(embedder.dimension)
        self.model_id = str(embedder.model_id)

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        return np.asarray(self.embedder.embed_ids(token_ids), np.float32)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return list(self.embedder.tokenize(texts))


def make_engine(
    lane: str, model: str | Path | None, max_length: int | None, threads: int | None
) -> Engine:
    """The engine a worker for ``lane`` runs."""
    from anekit.models import Embedder

    reason = unavailable_reason(lane)
    if reason is not None:
        raise LaneError(f"lane {lane}: {reason}")
    if lane == "cpu":
        embedder = Embedder(
            model, backend="onnx", variant="int8", max_length=max_length, threads=threads
        )
        return EmbedderEngine(embedder, "CPU (ONNX Runtime int8)")
    if lane == "numpy":
        return EmbedderEngine(
            Embedder(model, backend="numpy", max_length=max_length), "CPU (NumPy fp32)"
        )
    if lane == "sim":
        embedder = Embedder(model, backend="sim", max_length=max_length)
        embedder.package()
        return EmbedderEngine(embedder, "ANE simulator (fp16 numerics; not an ANE)")
    if lane == "gpu" and not core_ml_runtime_available():
        embedder = Embedder(model, backend="onnx", variant="fp32", max_length=max_length)
        return EmbedderEngine(embedder, "GPU (ONNX Runtime CUDA)")
    from anekit.lanes.coreml_engine import CoreMLEngine

    units = "CPU_AND_NE" if lane == "ane" else "CPU_AND_GPU"
    return CoreMLEngine(Embedder(model, backend="numpy", max_length=max_length), units)
