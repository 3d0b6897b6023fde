"""Encoders: token ids to embeddings, one model on one runtime.

Every way anekit embeds is an :class:`Encoder`: the NumPy fp32 reference
(:class:`ReferenceEncoder`), the fp16 package in the simulator (:class:`SimEncoder`) or on
Core ML (:class:`~anekit.models.coreml_encoder.CoreMLEncoder`), ONNX Runtime
(:class:`OnnxRuntimeEncoder`), Core AI (:class:`CoreAIEncoder`) and a pool of lane
workers (:class:`anekit.lanes.Pool`).
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
from anekit.models.onnx_models import OnnxSessions, rows_per_run
from anekit.models.package import PackageInfo, ensure_package, function_name
from anekit.models.registry import resolve
from anekit.models.weights import ModelWeights, load_weights
from anekit.runtimes import RUNTIMES, attribute, runtime

#: The runtimes :func:`open_encoder` knows (:data:`anekit.runtimes.RUNTIMES`).
KINDS = tuple(RUNTIMES)


class Encoder(Protocol):
    """Token ids to embeddings: one row per text, in input order."""

    model_id: str
    dimension: int
    #: Rows per call of the model inside (a lane pool sends whole multiples).
    batch: int
    #: Whether :meth:`embed` returns unit vectors (lanes do), not raw pooled ones.
    normalized: bool

    @property
    def device(self) -> str:
        """What runs it, as read from the runtime where the runtime can say."""
        ...

    def providers(self) -> list[str]:
        """The execution providers its runtime says it uses (ONNX Runtime's
        ``get_providers()``); empty where the runtime does not say."""
        ...

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """(len(token_ids), dimension) float32: token ids in (texts are encoded by
        :meth:`anekit.Embedder.encode`)."""
        ...

    def release_memory(self) -> None:
        """Give back memory a long-lived process can do without between requests."""
        ...

    def close(self) -> None: ...


class _Folder:
    """The default of :class:`LoadedModel`'s ``request``: its folder."""


_FOLDER = _Folder()


class LoadedModel:
    """A model resolved once and passed down: its name, folder and configuration (of any
    family :func:`~anekit.models.config.load_config` reads), and its weights, read on
    first use (a lane pool's parent never needs them: its workers read their own).

    ``request`` is the model as it was asked for (None: the default model; a cached
    name or a folder; default: the folder): what worker processes resolve again for
    themselves.
    """

    def __init__(
        self,
        model_id: str,
        folder: Path,
        config: ModelConfig,
        weights: ModelWeights | None = None,
        *,
        request: str | Path | _Folder | None = _FOLDER,
    ) -> None:
        self.model_id, self.folder, self.config = model_id, folder, config
        self.request: str | Path | None = folder if isinstance(request, _Folder) else request
        if weights is not None:
            self.weights = weights

    @functools.cached_property
    def weights(self) -> ModelWeights:
        """The weights, read from :attr:`folder` when first asked for."""
        return load_weights(self.folder, self.config)

    def __repr__(self) -> str:
        return f"LoadedModel({self.model_id!r}, max_length={self.config.max_length})"


def load_model(
    model: str | Path | LoadedModel | None,
    max_length: int | None = None,
    weights: ModelWeights | None = None,
) -> LoadedModel:
    """``model`` (None: the default model; a cached name or a Hugging Face folder)
    resolved and configured at ``max_length`` (default: the model's); ``weights`` when
    already read (else read on first use). A :class:`LoadedModel` is returned as it is
    when its length is the one asked for."""
    if isinstance(model, LoadedModel):
        if max_length is None or max_length == model.config.max_length:
            return model
        model = model.request
    model_id, folder = resolve(model)
    config = load_config(folder, max_length=max_length)
    return LoadedModel(model_id, folder, config, weights, request=model)


@dataclass(frozen=True)
class EncoderOptions:
    """How to open an encoder; each runtime reads the options it has.

    ``variant``: package weights for sim/coreml/direct (``fp16``, ``int8``) or the ONNX
    model's (``int8``, ``fp32``); None: the runtime's first
    (:attr:`~anekit.runtimes.Runtime.variants`). ``package``: a package ``anekit
    build-model`` wrote (default: built once and cached); ``progress``: its build's
    lines. ``threads``, ``device``: ONNX Runtime's intra-op threads and device
    (``auto``, ``cpu``, ``cuda``). ``compute_units``: Core ML's. ``isolated_build``: a
    missing ONNX model is built in a child process.
    """

    variant: str | None = None
    package: Path | None = None
    progress: Callable[[str], None] | None = None
    threads: int | None = None
    device: str = "auto"
    compute_units: str = "CPU_AND_NE"
    isolated_build: bool = False


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

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
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

    label = RUNTIMES["numpy"].device

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

    label = RUNTIMES["sim"].device

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

    label = RUNTIMES["direct"].device

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


class CoreAIEncoder(SimEncoder):
    """The bucketed package as one Core AI asset (every bucket a function, written once
    beside the package: :func:`~anekit.models.package.ensure_asset`), loaded once on Core
    AI's runtime. Off macOS that is Apple's CPU reference runtime: a second, independent
    executor of the same fp16 program, never an ANE figure."""

    label = RUNTIMES["coreai-cpu"].device

    def specialization(self) -> Any:
        """Core AI's ``SpecializationOptions`` to load with: the CPU only (None where the
        bundled CPU runtime runs it, which takes none)."""
        from anekit.backends.coreai import cpu_only

        return cpu_only()

    @functools.cached_property
    def asset(self) -> Any:
        """The asset, loaded (and compiled) once for all buckets."""
        from anekit.models.package import ensure_asset
        from anekit.package.coreai import LoadedAsset

        return LoadedAsset(ensure_asset(self.package), self.specialization())

    def run(self, batch: Batch) -> np.ndarray:
        hidden = embed(self.weights, self.config, batch.ids)
        program = self._program(batch.bucket)  # the function's I/O contract
        names = [str(spec.name) for spec in program.input_specs]
        feeds = program.package_feeds(dict(zip(names, (hidden, batch.keep), strict=True)))
        return np.asarray(program.results_of(self.asset(function_name(batch.bucket), feeds)))

    def close(self) -> None:
        if "asset" in self.__dict__:
            self.asset.close()


class CoreAINeuralEngineEncoder(CoreAIEncoder):
    """The same asset loaded by macOS's Core AI with the Neural Engine preferred (macOS
    27; unverified on hardware). Opened eagerly: an asset Core AI cannot take (an op
    without a lowering) is refused at open (:class:`~anekit.errors.ProgramError`), so
    that a lane can run Core ML instead, before it serves."""

    label = RUNTIMES["coreai"].device

    def __init__(self, model: LoadedModel, package: Callable[[], PackageInfo]) -> None:
        super().__init__(model, package)
        from anekit.backends import ProgramRefused
        from anekit.errors import ProgramError

        _ = self.package  # found or built: its errors are its own
        try:
            _ = self.asset  # written and loaded now: refused here, not mid-request
        except ProgramError as why:  # an op without a lowering, a load Core AI refuses
            raise ProgramRefused(f"Core AI cannot run {self.model_id}: {why}") from why

    def specialization(self) -> Any:
        """The Neural Engine preferred (``SpecializationOptions``; macOS 27 only)."""
        from anekit.backends.coreai_os import specialization

        return specialization("neural_engine")


class OnnxRuntimeEncoder(ModelEncoder):
    """The row-layout encoder on ONNX Runtime (int8 weights per channel, or fp32): groups
    of rows padded to their longest, as :func:`rows_per_run` says (int8: each row alone at
    its own length; fp32: 8 rows to a multiple of 16 tokens), not filled up (ONNX Runtime
    takes any shape)."""

    def __init__(self, model: LoadedModel, sessions: OnnxSessions) -> None:
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
    model: str | Path | LoadedModel | None = None,
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
    """The encoder of ``model`` (None: the default model) on the runtime ``kind``
    (:data:`anekit.runtimes.RUNTIMES`: ``numpy``, ``sim``, ``coreml`` (macOS), ``onnx``
    or ``direct`` (macOS, experimental)); the other keywords are
    :class:`EncoderOptions`'. ``weights``: already read (else read from the model's
    folder)."""
    chosen = runtime(kind)
    if chosen.encoder is None:
        raise ModelError(f"the {kind} runtime runs no embedding model yet")
    options = EncoderOptions(
        variant, package, progress, threads, device, compute_units, isolated_build
    )
    opener: Callable[[LoadedModel, EncoderOptions], ModelEncoder] = attribute(chosen.encoder)
    return opener(load_model(model, max_length, weights), options)


def open_reference(model: LoadedModel, options: EncoderOptions) -> ModelEncoder:
    """The ``numpy`` runtime's encoder (:class:`ReferenceEncoder`)."""
    return ReferenceEncoder(model)


def open_onnx(model: LoadedModel, options: EncoderOptions) -> OnnxRuntimeEncoder:
    """The ``onnx`` runtime's encoder: sessions built (or read) for the variant."""
    sessions = OnnxSessions(
        model.model_id,
        model.config,
        model.weights,
        variant=options.variant or "int8",
        threads=options.threads,
        device=options.device,
        source=model.folder if options.isolated_build else None,
        model_folder=model.folder,
    )
    return OnnxRuntimeEncoder(model, sessions)


def package_of(model: LoadedModel, options: EncoderOptions) -> PackageInfo:
    """The bucketed package the sim, coreml and direct runtimes run: ``options.package``,
    else the one cached for the model and variant (built now when missing)."""
    return ensure_package(
        model.request,
        model.model_id,
        model.folder,
        model.weights,
        options.variant or "fp16",
        buckets=buckets_for(model.config.max_length),
        path=options.package,
        progress=options.progress,
    )


def open_sim(model: LoadedModel, options: EncoderOptions) -> SimEncoder:
    """The ``sim`` runtime's encoder; its package is found (or built) on first use."""
    return SimEncoder(model, lambda: package_of(model, options))


def open_coreai_cpu(model: LoadedModel, options: EncoderOptions) -> CoreAIEncoder:
    """The ``coreai-cpu`` runtime's encoder; its package (and asset) found or built on
    first use."""
    return CoreAIEncoder(model, lambda: package_of(model, options))


def open_coreai(model: LoadedModel, options: EncoderOptions) -> CoreAINeuralEngineEncoder:
    """The ``coreai`` runtime's encoder (macOS 27): its package and asset found or built,
    and loaded, now."""
    return CoreAINeuralEngineEncoder(model, lambda: package_of(model, options))


def open_direct(model: LoadedModel, options: EncoderOptions) -> DirectEncoder:
    """The ``direct`` runtime's encoder; its package is found (or built) on first use."""
    return DirectEncoder(model, lambda: package_of(model, options))


__all__ = [
    "KINDS",
    "CoreAIEncoder",
    "CoreAINeuralEngineEncoder",
    "DirectEncoder",
    "Encoder",
    "EncoderOptions",
    "LoadedModel",
    "ModelEncoder",
    "OnnxRuntimeEncoder",
    "ReferenceEncoder",
    "SimEncoder",
    "load_model",
    "open_coreai",
    "open_coreai_cpu",
    "open_direct",
    "open_encoder",
    "open_onnx",
    "open_reference",
    "open_sim",
    "package_of",
    "unit_rows",
]
