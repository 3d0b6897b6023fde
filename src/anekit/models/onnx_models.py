"""The encoder for ONNX Runtime: the row-layout encoder traced per bucket, emitted to
ONNX and (``int8``) dynamically quantized per channel; cached next to the packages.

CPUs and GPUs prefer (B, S, C) activations and matmuls (:func:`make_row_encoder`),
so this path traces that variant of the same encoder, with a batch of 8 rows.
Sessions go to the device asked for (``auto``, ``cpu`` or ``cuda``; see
:func:`anekit.backends.onnx.session_for`), and :attr:`OnnxEncoder.device` says what
they really run on, from ONNX Runtime's own list of the providers each one uses.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import ModelError
from anekit.models.config import EncoderConfig
from anekit.models.package import packages_dir
from anekit.models.weights import Weights

_log = logging.getLogger(__name__)

ONNX_BATCH = 8
VARIANTS = ("fp32", "int8")


def folder_for(model_id: str, weights: Weights, variant: str) -> Path:
    return packages_dir() / f"{model_id}-{weights.digest[:12]}-onnx-{variant}"


def build_bucket(
    config: EncoderConfig, weights: Weights, size: int, variant: str, folder: Path
) -> Path:
    """The ONNX model of one bucket (ONNX_BATCH x size), built if missing."""
    target = folder / f"seq{size}.onnx"
    if target.exists():
        return target  # cached: no tracer, no coremltools in this process
    import anekit
    from anekit.models.bert import make_row_encoder
    from anekit.package.onnx_emitter import quantize_int8, save_onnx, to_onnx

    program = anekit.compile(
        make_row_encoder(config, weights),
        anekit.TensorSpec((ONNX_BATCH, size, config.hidden_size), np.float32, "hidden"),
        anekit.TensorSpec((ONNX_BATCH, size), np.float32, "keep"),
        output_names=["embedding"],
        passes=False,  # the ANE passes target (B, C, 1, S); this is the CPU's layout
    )
    partial = folder / f"seq{size}.partial.onnx"
    save_onnx(to_onnx(program), partial)
    if variant == "int8":
        quantized = folder / f"seq{size}.int8.partial.onnx"
        quantize_int8(partial, quantized)
        partial.unlink()
        partial = quantized
    partial.replace(target)
    return target


class OnnxEncoder:
    """Per-bucket ONNX Runtime sessions for one model and variant."""

    def __init__(
        self,
        model_id: str,
        config: EncoderConfig,
        weights: Weights,
        *,
        variant: str = "int8",
        threads: int | None = None,
        gpu: bool = True,
        device: str | None = None,
    ) -> None:
        from anekit.backends.onnx import DEVICES

        if variant not in VARIANTS:
            raise ModelError(f"onnx variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        chosen = device or ("auto" if gpu else "cpu")
        if chosen not in DEVICES:
            raise ModelError(f"onnx device must be one of {', '.join(DEVICES)}, got {chosen!r}")
        self.config, self.weights, self.variant = config, weights, variant
        self.folder = folder_for(model_id, weights, variant)
        #: ``auto``, ``cpu`` or ``cuda`` (anekit.backends.onnx.DEVICES): ``cuda``
        #: sessions that land on another provider raise ProviderMismatch.
        self.threads, self.gpu, self.device_choice = threads, chosen != "cpu", chosen
        self._sessions: dict[int, Any] = {}

    def prepare(self, sizes: Sequence[int]) -> None:
        """Build (or find) and load the given buckets now."""
        for size in sizes:
            self._session(size)

    def _session(self, size: int) -> Any:
        if size not in self._sessions:
            from anekit.backends.onnx import session_for

            self.folder.mkdir(parents=True, exist_ok=True)
            path = build_bucket(self.config, self.weights, size, self.variant, self.folder)
            self._sessions[size] = session_for(
                path, threads=self.threads, device=self.device_choice
            )
        return self._sessions[size]

    def providers(self) -> list[str]:
        """The execution providers the loaded sessions really use (each once, in
        order); empty before the first session."""
        used: list[str] = []
        for session in self._sessions.values():
            used += [str(name) for name in session.get_providers() if name not in used]
        return used

    @property
    def device(self) -> str:
        """What the loaded sessions run on, from their providers (``GPU (CUDA)``,
        ``CPU``); sessions on different devices are all named."""
        from anekit.backends.onnx import device_label

        labels: list[str] = []
        for session in self._sessions.values():
            label = device_label([str(name) for name in session.get_providers()])
            if label not in labels:
                labels.append(label)
        return " + ".join(labels) or "no session loaded"

    def run(self, hidden: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Pooled embeddings of rows (N, S, C) with masks (N, S), in groups of ONNX_BATCH."""
        rows, size = keep.shape
        session = self._session(size)
        results = []
        for start in range(0, rows, ONNX_BATCH):
            part_hidden = hidden[start : start + ONNX_BATCH]
            part_keep = keep[start : start + ONNX_BATCH]
            count = part_keep.shape[0]
            if count < ONNX_BATCH:  # pad the group with rows that keep one key
                pad = ONNX_BATCH - count
                part_hidden = np.concatenate(
                    [part_hidden, np.zeros((pad, *part_hidden.shape[1:]), np.float32)]
                )
                filler = np.zeros((pad, size), np.float32)
                filler[:, 0] = 1.0
                part_keep = np.concatenate([part_keep, filler])
            (vectors,) = session.run(
                ["embedding"],
                {"hidden": np.ascontiguousarray(part_hidden, np.float32), "keep": part_keep},
            )
            results.append(vectors[:count])
        return np.concatenate(results) if results else np.zeros((0, self.config.hidden_size))
