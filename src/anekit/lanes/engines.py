"""What each lane runs inside its worker, and whether it can run on this machine.

:data:`LANES` holds each lane's floor: the minimum cosine to the fp32 reference, per
known-answer chunk, that admission demands.

Device truth: a lane's ``device`` is read from what runs it, never written by hand.
The ONNX Runtime lanes build their sessions on one pinned device (``cpu``: the CPU
provider only, even where onnxruntime-gpu is installed; ``gpu``: CUDA first) and
report the providers ONNX Runtime says each session uses. ONNX Runtime falls back to
the CPU without an error when CUDA cannot load, so the ``gpu`` lane checks: a session
that does not run on CUDA refuses the lane (:class:`LaneRefused`, "the gpu lane would
run on the CPU: ...") instead of serving CPU speed under a GPU label.
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
    """A lane's name, what it is, the known-answer floor it must reach, and the
    numerics of its vectors."""

    name: str
    description: str
    floor: float
    variant: str


LANES: dict[str, LaneKind] = {
    kind.name: kind
    for kind in (
        LaneKind("ane", "Core ML on the Neural Engine (fp16 package)", 0.999, "fp16"),
        LaneKind("gpu", "the GPU: Core ML (macOS) or ONNX Runtime CUDA", 0.999, "fp16"),
        LaneKind("cpu", "ONNX Runtime on the CPU, int8 weights", 0.98, "int8"),
        LaneKind("sim", "the fp16 package in anekit's ANE simulator (a test lane)", 0.999, "fp16"),
        LaneKind("numpy", "the NumPy fp32 reference", 0.999, "fp32"),
        LaneKind(
            "direct",
            "the fp16 package on the ANE through the private framework (experimental)",
            0.999,
            "fp16",
        ),
    )
}


def lane_variant(lane: str) -> str:
    """The numerics of ``lane``'s vectors: ``fp16``, ``int8`` or ``fp32`` (the gpu
    lane runs the fp16 package on a Mac, ONNX Runtime fp32 on CUDA elsewhere)."""
    if lane not in LANES:
        raise LaneError(f"unknown lane {lane!r}; lanes are {', '.join(LANES)}")
    if lane == "gpu" and platform.system() != "Darwin":
        return "fp32"
    return LANES[lane].variant


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
    if lane == "direct":
        from anekit.backends import direct

        return direct.unavailable_reason()
    return None


class LaneRefused(LaneError):
    """The lane cannot be what it says it is (a ``gpu`` lane whose sessions would run
    on the CPU); its worker says so in a refusing hello instead of serving."""

    def __init__(
        self, message: str, device: str | None = None, providers: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        #: What the lane would actually have run on, and the providers, when known.
        self.device = device
        self.providers = list(providers)


class Engine(Protocol):
    """What a worker runs: unit vectors for token ids, and the model's tokenizer (for
    the known answers' texts)."""

    @property
    def device(self) -> str:
        """What runs it, as read from the runtime where the runtime can say."""

    dimension: int
    model_id: str
    #: Rows per call of the model inside (the scheduler sends whole multiples).
    batch: int

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray: ...

    def providers(self) -> list[str]:
        """The execution providers its runtime says it uses; empty where it does not say."""

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]: ...


class EncoderEngine:
    """A lane over one in-process encoder (:mod:`anekit.models.encoders`)."""

    def __init__(self, encoder: Any) -> None:
        from anekit.models.batching import load_tokenizer

        self.encoder = encoder
        self.dimension = int(encoder.dimension)
        self.model_id = str(encoder.model_id)
        self.batch = int(encoder.batch)
        self._tokenizer = load_tokenizer(encoder.folder, encoder.config.max_length)

    @property
    def device(self) -> str:
        return str(self.encoder.device)

    def providers(self) -> list[str]:
        return list(self.encoder.providers())

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        from anekit.models.batching import tokenize

        return tokenize(self._tokenizer, texts)

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        from anekit.models.encoders import unit_rows

        return unit_rows(self.encoder.encode(token_ids))


def onnx_device(used: Sequence[str], variant: str) -> str:
    """A lane's device label from the providers its sessions use: ``CPU (ONNX
    Runtime int8)``, ``GPU (ONNX Runtime CUDA fp32)``, else the provider's name."""
    from anekit.backends.onnx import CPU, CUDA

    first = used[0] if used else "no execution provider"
    if first == CUDA:
        return f"GPU (ONNX Runtime CUDA {variant})"
    return f"{'CPU' if first == CPU else first} (ONNX Runtime {variant})"


class OnnxEngine(EncoderEngine):
    """A lane over ONNX Runtime sessions pinned to one device (``cpu`` or ``cuda``); a
    ``cuda`` engine checks the device with a one-op session (:func:`anekit.backends.onnx.probe`)
    before its model is built, and then on the model's session."""

    def __init__(
        self,
        lane: str,
        model: str | Path | None,
        max_length: int | None,
        threads: int | None,
        *,
        variant: str,
        device: str,
    ) -> None:
        from anekit.backends.onnx import probe
        from anekit.models.encoders import open_encoder

        self.lane, self.variant = lane, variant
        encoder = open_encoder(
            "onnx", model, variant=variant, max_length=max_length, threads=threads, device=device
        )
        super().__init__(encoder)
        # The CPU provider is always there: only a CUDA lane needs the one-op probe
        # (which imports the onnx package: about 40 MB a CPU worker does not need).
        self._probed: list[str] = (
            ["CPUExecutionProvider"] if device == "cpu" else self._checked(probe, device, threads)
        )

    def _checked(self, call: Any, *args: Any) -> Any:
        """``call(*args)``; a session not on this lane's device refuses the lane."""
        from anekit.backends.onnx import ProviderMismatch, device_label

        try:
            return call(*args)
        except ProviderMismatch as mismatch:
            label = device_label(mismatch.providers)
            where = "the CPU" if label == "CPU" else label
            raise LaneRefused(
                f"the {self.lane} lane would run on {where}: {mismatch}",
                onnx_device(mismatch.providers, self.variant),
                mismatch.providers,
            ) from None

    def providers(self) -> list[str]:
        """The providers its sessions use (the probe's before the first one)."""
        return self.encoder.providers() or list(self._probed)

    @property
    def device(self) -> str:
        return onnx_device(self.providers(), self.variant)

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors; a session on another device than the lane's refuses the lane."""
        return np.asarray(self._checked(super().embed, token_ids), np.float32)


def make_engine(
    lane: str, model: str | Path | None, max_length: int | None, threads: int | None
) -> Engine:
    """The engine a worker for ``lane`` runs (:class:`LaneRefused` when it would not
    run on its lane's device)."""
    from anekit.models.encoders import open_encoder

    if (reason := unavailable_reason(lane)) is not None:
        raise LaneError(f"lane {lane}: {reason}")
    if lane == "cpu":
        return OnnxEngine(lane, model, max_length, threads, variant="int8", device="cpu")
    if lane in ("numpy", "sim", "direct"):
        return EncoderEngine(open_encoder(lane, model, max_length=max_length))
    if lane == "gpu" and not core_ml_runtime_available():
        return OnnxEngine(lane, model, max_length, threads, variant="fp32", device="cuda")
    units = "CPU_AND_NE" if lane == "ane" else "CPU_AND_GPU"
    return EncoderEngine(open_encoder("coreml", model, max_length=max_length, compute_units=units))
