"""Encoders: token ids to embeddings, one model on one runtime.

Every way anekit embeds is an :class:`Encoder`: the NumPy fp32 reference
(:class:`ReferenceEncoder`), the fp16 package in the simulator (:class:`SimEncoder`) or on
Core ML (:class:`~anekit.models.coreml_encoder.CoreMLEncoder`), ONNX Runtime
(:class:`OnnxRuntimeEncoder`) and a pool of lane workers (:class:`anekit.lanes.LanePool`).
:class:`anekit.Embedder` is a tokenizer, batching and one encoder; a lane worker runs one
encoder (:func:`open_encoder`). The encoders here run the model in this process: the word
lookup on the host (gather does not run on the ANE), then one program call per batch of
length-sorted rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from anekit.errors import ModelError
from anekit.models.batching import BATCH, Batch, batches, buckets_for, length_steps
from anekit.models.config import ModelConfig, load_config
from anekit.models.embeddings import embed, row_inputs
from anekit.models.onnx_models import OnnxEncoder, rows_per_run
from anekit.models.package import PackageInfo, ensure_package, function_name
from anekit.models.registry import resolve
from anekit.models.weights import ModelWeights, load_weights

#: The runtimes :func:`open_encoder` knows (``direct``: the private ANE framework,
#: experimental, macOS; :mod:`anekit.backends.direct`).
KINDS = ("numpy", "sim", "coreml", "onnx", "direct")


class Encoder(Protocol):
    """Token ids to embeddings: one row per text, in input order."""

    model_id: str
    dimension: int
    #: Rows per call of the model inside (a lane pool sends whole multiples).
    batch: int
    #: Whether :meth:`encode` returns unit vectors (lanes do), not raw pooled ones.
    normalized: bool

    @property
    def device(self) -> str:
        """What runs it, as read from the runtime where the runtime can say."""
        ...

    def providers(self) -> list[str]:
        """The execution providers its runtime says it uses (ONNX Runtime's
        ``get_providers()``); empty where the runtime does not say."""
        ...

    def encode(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """(len(token_ids), dimension) float32."""
        ...

    def release_memory(self) -> None:
        """Give back memory a long-lived process can do without between requests."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LoadedModel:
    """A model read from its folder: its name, folder, configuration and weights (of
    any family :func:`~anekit.models.config.load_config` reads)."""

    model_id: str
    folder: Path
    config: ModelConfig
    weights: ModelWeights


def load_model(
    model: str | Path | None, max_length: int | None = None, weights: ModelWeights | None = None
) -> LoadedModel:
    """``model`` (None: the default model; a cached name or a Hugging Face folder)
    read at ``max_length`` (default: the model's); ``weights`` when already read."""
    model_id, folder = resolve(model)
    config = load_config(folder, max_length=max_length)
    return LoadedModel(model_id, folder, config, weights or load_weights(folder, config))


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` scaled to unit length per row, float32 (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.asarray(vectors / np.maximum(norms, np.float32(1e-12)), np.float32)


class ModelEncoder:
    """An encoder running one model in this process, one program call per batch.

    Subclasses say how a batch runs (:meth:`run`); rows are sorted by length, grouped
    by :attr:`batch` and padded to the smallest of :attr:`lengths` that holds them
    (filled up to :attr:`batch` rows for fixed-shape programs).
    """

    normalized = False
    #: What runs it (:attr:`device`).
    label = "CPU"

    def __init__(
        self,
        model: LoadedModel,
        *,
        lengths: Sequence[int] | None = None,
        batch: int = BATCH,
        fill: bool = True,
    ) -> None:
        self.model_id, self.folder = model.model_id, model.folder
        self.config, self.weights = model.config, model.weights
        self.dimension = model.config.hidden_size
        self.lengths = tuple(buckets_for(model.config.max_length) if lengths is None else lengths)
        self.batch, self.fill = batch, fill

    @property
    def device(self) -> str:
        return self.label

    def run(self, batch: Batch) -> np.ndarray:
        """Pooled embeddings of one padded batch, (rows, dimension)."""
        raise NotImplementedError

    def encode(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        result = np.zeros((len(token_ids), self.dimension), np.float32)
        pad = self.config.pad_token_id
        groups = list(batches(token_ids, self.lengths, pad, self.batch, fill=self.fill))
        for batch, vectors in zip(groups, self.run_all(groups), strict=True):
            result[batch.indices] = np.asarray(vectors, np.float32)[: len(batch.indices)]
        return result

    def run_all(self, groups: Sequence[Batch]) -> list[np.ndarray]:
        """:meth:`run` of each batch, in order (one after the other here)."""
        return [self.run(batch) for batch in groups]

    def providers(self) -> list[str]:
        return []

    def release_memory(self) -> None:
        self.weights.release_pages()

    def close(self) -> None:
        pass


class ReferenceEncoder(ModelEncoder):
    """The fp32 reference: the traceable encoder evaluated directly with NumPy."""

    label = "CPU (NumPy fp32)"

    def __init__(self, model: LoadedModel) -> None:
        super().__init__(model)
        from anekit.models.architectures import make_encoder  # imports the tracer

        self.function = make_encoder(model.config, model.weights, np.float32)

    def run(self, batch: Batch) -> np.ndarray:
        hidden = embed(self.weights, self.config, batch.ids)
        return np.asarray(self.function(hidden, batch.keep), np.float32)


class SimEncoder(ModelEncoder):
    """The fp16 package's bucket functions in anekit's ANE simulator (a numerics
    check, not a speed path; never an ANE figure)."""

    label = "ANE simulator (fp16 numerics; not an ANE)"

    def __init__(self, model: LoadedModel, package: Callable[[], PackageInfo]) -> None:
        super().__init__(model)
        self._find_package = package
        self._programs: dict[int, Any] = {}

    @functools.cached_property
    def package(self) -> PackageInfo:
        """The package it runs, found (or built) on first use."""
        return self._find_package()

    def _program(self, bucket: int) -> Any:
        if bucket not in self._programs:
            from anekit.frontends.mlpackage import load_package

            self._programs[bucket] = load_package(self.package.path, function=function_name(bucket))
        return self._programs[bucket]

    def run(self, batch: Batch) -> np.ndarray:
        hidden = embed(self.weights, self.config, batch.ids)
        # The program casts to its fp16 inputs, and names values beyond fp16's range.
        return np.asarray(self._program(batch.bucket)(hidden, batch.keep, backend="sim"))


class DirectEncoder(SimEncoder):
    """The fp16 package's bucket functions on the ANE through the private framework
    (:mod:`anekit.backends.direct`; experimental, macOS): every bucket a procedure of one
    model, compiled when first used (one compile of the process's budget, not one per
    bucket). A model the framework refuses raises instead of running on Core ML, so
    that the encoder never serves under a label it does not run on."""

    label = "ANE (direct, private API; experimental)"

    @functools.cached_property
    def direct_model(self) -> Any:
        """The buckets this encoder serves, compiled and loaded as one model."""
        from coremltools.converters.mil.mil import Program

        from anekit.backends import direct

        merged = Program()
        for bucket in self.lengths:
            name = function_name(bucket)
            merged.add_function(name, self._program(bucket).lowered().functions[name])
        try:
            return direct.DirectModel(merged, direct.PrivateANE())
        except direct.REFUSALS as refusal:
            raise ModelError(f"the direct ANE path could not load the model: {refusal}") from None

    def run(self, batch: Batch) -> np.ndarray:
        from anekit.backends.direct import DirectError

        hidden = embed(self.weights, self.config, batch.ids)
        program = self._program(batch.bucket)
        names = [str(spec.name) for spec in program.input_specs]
        feeds = program.package_feeds(dict(zip(names, (hidden, batch.keep), strict=True)))
        try:
            outputs, _ = self.direct_model.predict(feeds, function_name(batch.bucket))
        except DirectError as refusal:
            raise ModelError(f"the direct ANE path could not run this batch: {refusal}") from None
        return np.asarray(program.results_of(outputs))


class OnnxRuntimeEncoder(ModelEncoder):
    """The row-layout encoder on ONNX Runtime (int8 weights per channel, or fp32): groups
    of rows padded to their longest, as :func:`rows_per_run` says (int8: each row alone at
    its own length; fp32: 8 rows to a multiple of 16 tokens), not filled up (ONNX Runtime
    takes any shape)."""

    def __init__(self, model: LoadedModel, sessions: OnnxEncoder) -> None:
        rows, step = rows_per_run(sessions.variant)
        lengths = length_steps(model.config.max_length, step)
        super().__init__(model, lengths=lengths, batch=rows, fill=False)
        self.sessions = sessions

    @property
    def device(self) -> str:
        return self.sessions.device

    def providers(self) -> list[str]:
        return self.sessions.providers()

    def run(self, batch: Batch) -> np.ndarray:
        inputs = row_inputs(self.weights, self.config, batch.ids, batch.keep)
        return np.asarray(self.sessions.run(inputs), np.float32)

    def run_all(self, groups: Sequence[Batch]) -> list[np.ndarray]:
        """Several batches at once where the sessions run rows side by side (int8)."""
        return self.sessions.map(self.run, groups)

    def close(self) -> None:
        self.sessions.close()


def open_encoder(
    kind: str,
    model: str | Path | None = None,
    *,
    max_length: int | None = None,
    variant: str | None = None,
    package: Path | None = None,
    progress: Callable[[str], None] | None = None,
    threads: int | None = None,
    device: str = "auto",
    compute_units: str = "CPU_AND_NE",
    isolated_build: bool = False,
    weights: ModelWeights | None = None,
) -> ModelEncoder:
    """The encoder of ``model`` (None: the default model) on ``kind``: ``numpy``,
    ``sim``, ``coreml`` (macOS), ``onnx`` or ``direct`` (macOS, experimental).

    ``variant``: package weights for sim/coreml (``fp16``, ``int8``) or the ONNX
    model's (``int8``, ``fp32``). ``package``: a package ``anekit build-model`` wrote
    (default: built once and cached). ``threads``, ``device``: ONNX Runtime's.
    ``compute_units``: Core ML's. ``isolated_build``: a missing ONNX model is built in
    a child process. ``weights``: already read (else read from the model's folder).
    """
    if kind not in KINDS:
        raise ModelError(f"backend must be one of {', '.join(KINDS)}, got {kind!r}")
    loaded = load_model(model, max_length, weights)
    if kind == "numpy":
        return ReferenceEncoder(loaded)
    if kind == "onnx":
        sessions = OnnxEncoder(
            loaded.model_id,
            loaded.config,
            loaded.weights,
            variant=variant or "int8",
            threads=threads,
            device=device,
            source=loaded.folder if isolated_build else None,
            model_folder=loaded.folder,
        )
        return OnnxRuntimeEncoder(loaded, sessions)

    def ensure() -> PackageInfo:
        return ensure_package(
            model,
            loaded.model_id,
            loaded.folder,
            loaded.weights,
            variant or "fp16",
            buckets=buckets_for(loaded.config.max_length),
            path=package,
            progress=progress,
        )

    if kind == "sim":
        return SimEncoder(loaded, ensure)
    if kind == "direct":
        return DirectEncoder(loaded, ensure)
    from anekit.models.coreml_encoder import CoreMLEncoder

    return CoreMLEncoder(loaded, ensure(), compute_units)


__all__ = [
    "KINDS",
    "DirectEncoder",
    "Encoder",
    "LoadedModel",
    "ModelEncoder",
    "OnnxRuntimeEncoder",
    "ReferenceEncoder",
    "SimEncoder",
    "load_model",
    "open_encoder",
    "unit_rows",
]
