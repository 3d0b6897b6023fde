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

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from anekit.errors import LaneError
from anekit.runtimes import RUNTIMES, Runtime, attribute

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from anekit.models.encoders import LoadedModel


@dataclass(frozen=True)
class LaneKind:
    """A lane's name, what it is, the known-answer floor it must reach, and what it
    runs: ``runs``, the runtimes (:data:`anekit.runtimes.RUNTIMES`) it may run on, best
    first, each with its encoder options (:class:`~anekit.models.encoders.EncoderOptions`'
    fields; ``variant`` is the numerics of its vectors). A lane runs the first of its
    runtimes that can run here."""

    name: str
    description: str
    floor: float
    runs: tuple[tuple[str, Mapping[str, str]], ...]

    def choice(self) -> tuple[Runtime, Mapping[str, str]]:
        """The runtime this lane runs here and its options: the first that can run, else
        the last (whose reason then says why the lane cannot)."""
        for name, options in self.runs:
            if RUNTIMES[name].available(**options):
                return RUNTIMES[name], options
        name, options = self.runs[-1]
        return RUNTIMES[name], options

    @property
    def variant(self) -> str:
        """The numerics of this lane's vectors here: ``fp16``, ``int8`` or ``fp32``."""
        return self.choice()[1]["variant"]


def _lane(name: str, description: str, floor: float, *runs: tuple[str, dict[str, str]]) -> LaneKind:
    return LaneKind(name, description, floor, tuple(runs))


LANES: dict[str, LaneKind] = {
    kind.name: kind
    for kind in (
        _lane(
            "ane",
            "the Neural Engine: Core AI (macOS 27) or Core ML (fp16 package)",
            0.999,
            ("coreai", {"variant": "fp16"}),
            ("coreml", {"compute_units": "CPU_AND_NE", "variant": "fp16"}),
        ),
        _lane(
            "gpu",
            "the GPU: Core ML (macOS) or ONNX Runtime CUDA",
            0.999,
            ("coreml", {"compute_units": "CPU_AND_GPU", "variant": "fp16"}),
            ("onnx", {"device": "cuda", "variant": "fp32"}),
        ),
        _lane(
            "cpu",
            "ONNX Runtime on the CPU, int8 weights",
            0.98,
            ("onnx", {"device": "cpu", "variant": "int8"}),
        ),
        _lane(
            "sim",
            "the fp16 package in anekit's ANE simulator (a test lane)",
            0.999,
            ("sim", {"variant": "fp16"}),
        ),
        _lane("numpy", "the NumPy fp32 reference", 0.999, ("numpy", {"variant": "fp32"})),
        _lane(
            "direct",
            "the fp16 package on the ANE through the private framework (experimental)",
            0.999,
            ("direct", {"variant": "fp16"}),
        ),
    )
}


def lane_variant(lane: str) -> str:
    """The numerics of ``lane``'s vectors: ``fp16``, ``int8`` or ``fp32`` (the gpu
    lane runs the fp16 package on a Mac, ONNX Runtime fp32 on CUDA elsewhere)."""
    if lane not in LANES:
        raise LaneError(f"unknown lane {lane!r}; lanes are {', '.join(LANES)}")
    return LANES[lane].variant


def unavailable_reason(lane: str) -> str | None:
    """Why ``lane`` cannot run on this machine (each of its runtimes' reasons), or None
    when it can."""
    if lane not in LANES:
        return f"unknown lane {lane!r}; lanes are {', '.join(LANES)}"
    runs = LANES[lane].runs
    reasons = []
    for name, options in runs:
        if (reason := RUNTIMES[name].unavailable_reason(**options)) is None:
            return None
        reasons.append(reason if len(runs) == 1 else f"{name}: {reason}")
    return "; ".join(reasons)


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

        return unit_rows(self.encoder.embed(token_ids))


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
        model: str | Path | LoadedModel | None,
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
    lane: str,
    model: str | Path | LoadedModel | None,
    max_length: int | None,
    threads: int | None,
) -> Engine:
    """The engine a worker for ``lane`` runs (:class:`LaneRefused` when it would not
    run on its lane's device): the lane's runtime's encoder, in the engine class the
    runtime's record names (:attr:`~anekit.runtimes.Runtime.lane_engine`)."""
    if (reason := unavailable_reason(lane)) is not None:
        raise LaneError(f"lane {lane}: {reason}")
    runtime, options = LANES[lane].choice()
    if runtime.lane_engine is not None:
        engine: Engine = attribute(runtime.lane_engine)(lane, model, max_length, threads, **options)
        return engine
    from anekit.backends import ProgramRefused
    from anekit.models.encoders import open_encoder

    settings: dict[str, Any] = dict(options)
    try:
        return EncoderEngine(open_encoder(runtime.name, model, max_length=max_length, **settings))
    except ProgramRefused as refused:
        # A runtime that refuses the model at open (Core AI: an op it has no lowering
        # for, an asset it will not load) hands the lane to its fallback (Core ML) when
        # the lane runs that too.
        fallback = dict(LANES[lane].runs).get(runtime.fallback or "")
        if fallback is None or runtime.fallback is None:
            raise
        name = runtime.fallback
        _log.warning(
            "lane %s: %s refused the model (%s); trying %s", lane, runtime.name, refused, name
        )
        if (why := RUNTIMES[name].unavailable_reason(**fallback)) is not None:
            message = f"lane {lane}: {runtime.name} refused the model ({refused}); {name}: {why}"
            raise LaneError(message) from refused
        fallback_settings: dict[str, Any] = dict(fallback)
        return EncoderEngine(open_encoder(name, model, max_length=max_length, **fallback_settings))
