"""``anekit.Embedder``: sentence embeddings from a BERT-family model, on the ANE when there
is one, following sentence-transformers' ``encode`` semantics.

Texts are tokenized and truncated at ``max_length`` (the model's default, 256 for
MiniLM; up to 512), sorted by token count, grouped into bucket batches, embedded
and returned in input order. Backends:

- ``numpy``: the fp32 reference, the encoder evaluated directly with NumPy (any OS);
- ``sim``: the fp16 package's bucket functions in anekit's ANE simulator (any OS;
  slow, a numerics check, not a speed path);
- ``coreml``: the fp16 package on Core ML with the Neural Engine (macOS; unverified
  on hardware in this project's CI);
- ``onnx``: ONNX Runtime on the CPU (or CUDA), int8 weights per channel by default
  (``variant="fp32"`` keeps float32), from the row-layout encoder.

The package is built on first use and cached under ``$ANEKIT_HOME/packages``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit._runtime import core_ml_runtime_available
from anekit.errors import BackendUnavailableError, ModelError
from anekit.models.batching import (
    BATCH,
    BUCKETS,
    Batch,
    batches,
    buckets_for,
    load_tokenizer,
    tokenize,
)
from anekit.models.config import EncoderConfig, load_config
from anekit.models.embeddings import embed, embed_rows
from anekit.models.onnx_models import ONNX_BATCH, OnnxEncoder, lengths_for
from anekit.models.package import (
    PackageInfo,
    build_package,
    default_path,
    function_name,
    read_package,
)
from anekit.models.registry import resolve
from anekit.models.weights import Weights, load_weights

_log = logging.getLogger(__name__)

BACKENDS = ("numpy", "sim", "coreml", "onnx")


def default_backend() -> str:
    return "coreml" if core_ml_runtime_available() else "numpy"


class Embedder:
    """Sentence embeddings: ``Embedder().encode(["def f(): ..."])`` -> (1, 384) float32.

    ``model``: None (all-MiniLM-L6-v2), a cached model name or a Hugging Face folder.
    ``backend``: ``numpy``, ``sim``, ``coreml`` or ``onnx`` (default: coreml on a Mac,
    else numpy). ``variant``: package weights for sim/coreml (``fp16``, ``int8``) or the
    ONNX model's (``int8``, ``fp32``). ``package``: a package ``anekit build-model``
    wrote (default: built and cached). ``threads``: ONNX Runtime's intra-op threads
    (in the lane workers too). ``device``: the onnx backend's ``auto`` (default),
    ``cpu`` or ``cuda`` (:func:`anekit.backends.onnx.session_for`). ``isolated_build``:
    an ONNX model not built yet is built in a child process (for a long-lived process:
    the build's memory leaves with the child; it costs a Python start and imports).

    ``lanes`` (e.g. ``["ane"]``, ``["cpu"]``, ``["ane", "cpu"]``) embeds through worker
    processes instead (:mod:`anekit.lanes`): each lane proves itself on the known
    answers first, and a crash, a hang or a wrong answer costs a lane, not the call.
    ``lanes=[]`` picks the default (the ANE lane on a Mac, else the CPU lane). Close
    the embedder (or use it as a context manager) to stop the workers.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        backend: str | None = None,
        max_length: int | None = None,
        variant: str | None = None,
        package: Path | None = None,
        progress: Callable[[str], None] | None = None,
        threads: int | None = None,
        lanes: Sequence[str] | None = None,
        deadline: float = 30.0,
        device: str | None = None,
        isolated_build: bool = False,
    ) -> None:
        if lanes is not None and backend is not None:
            raise ModelError("give backend or lanes, not both")
        chosen = "numpy" if lanes is not None else (backend or default_backend())
        if device is not None and chosen != "onnx":
            raise ModelError(f"device= applies to backend='onnx', not {chosen!r}")
        if chosen not in BACKENDS:
            raise ModelError(f"backend must be one of {', '.join(BACKENDS)}, got {chosen!r}")
        if chosen == "coreml" and not core_ml_runtime_available():
            raise BackendUnavailableError(
                "the coreml backend needs macOS with Core ML; use backend='numpy' or 'sim' here"
            )
        self._model = model
        self.model_id, self.folder = resolve(model)
        self.config: EncoderConfig = load_config(self.folder, max_length=max_length)
        # Read now, so that a broken folder fails here; lanes read their own.
        self._weights: Weights | None = (
            None if lanes is not None else load_weights(self.folder, self.config)
        )
        self.backend = "lanes" if lanes is not None else chosen
        self.variant = variant or ("int8" if chosen == "onnx" else "fp16")
        self.buckets = buckets_for(self.config.max_length)
        self._tokenizer = load_tokenizer(self.folder, self.config.max_length)
        self._progress = progress
        self._package_path = package
        self._package: PackageInfo | None = None
        self._programs: dict[int, Any] = {}
        self._reference_encoder: Any = None
        self._onnx: OnnxEncoder | None = None
        self._scheduler: Any = None
        if lanes is not None:
            from anekit.lanes import Scheduler

            self._scheduler = Scheduler(
                lanes,
                model=model,
                max_length=self.config.max_length,
                deadline=deadline,
                threads=threads,
            )
        if chosen == "onnx":
            self._onnx = OnnxEncoder(
                self.model_id,
                self.config,
                self.weights,
                variant=self.variant,
                threads=threads,
                device=device or "auto",
                source=self.folder if isolated_build else None,
            )
        #: Texts per program call: 4 for the packages, 8 for ONNX Runtime.
        self.batch = ONNX_BATCH if chosen == "onnx" else BATCH
        #: The lengths rows are padded to: the buckets, or for ONNX Runtime (which
        #: takes any length) the group's longest, rounded up to 16 tokens.
        self._lengths = lengths_for(self.config.max_length) if chosen == "onnx" else self.buckets

    @property
    def onnx_encoder(self) -> OnnxEncoder | None:
        """The ONNX Runtime encoder of the onnx backend (its sessions), else None."""
        return self._onnx

    @property
    def weights(self) -> Weights:
        """The model's weights (with lanes, read on first use: workers read their own)."""
        if self._weights is None:
            self._weights = load_weights(self.folder, self.config)
        return self._weights

    @weights.setter
    def weights(self, weights: Weights) -> None:
        self._weights = weights
        self._reference_encoder = None

    @property
    def _reference(self) -> Any:
        if self._reference_encoder is None:
            from anekit.models.bert import make_encoder  # the tracer's nn: imported on use

            self._reference_encoder = make_encoder(self.config, self.weights, np.float32)
        return self._reference_encoder

    @property
    def scheduler(self) -> Any:
        """The lane scheduler (``lanes=``), else None."""
        return self._scheduler

    def close(self) -> None:
        """Stop the lane workers, if any."""
        if self._scheduler is not None:
            self._scheduler.close()

    def release_memory(self) -> None:
        """Give back the word table's pages that lookups mapped (a long-lived process,
        between requests); they come back on use."""
        if self._weights is not None:
            self._weights.release_pages()

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dimension(self) -> int:
        return self.config.hidden_size

    @property
    def max_length(self) -> int:
        return self.config.max_length

    def package(self) -> PackageInfo:
        """The bucketed package the sim and coreml backends run (built if missing)."""
        if self._package is None:
            path = self._package_path or default_path(self.model_id, self.weights, self.variant)
            if path.exists():
                info = read_package(path)
                if info.weights_sha256 != self.weights.digest:
                    raise ModelError(
                        f"{path}: was built from other weights than {self.folder}; rebuild it"
                    )
            else:
                _log.info("building %s (%s) once: about a minute", self.model_id, self.variant)
                info = build_package(
                    self._model, variant=self.variant, out=path, progress=self._progress
                )
            missing = [size for size in self.buckets if size not in info.buckets]
            if missing:
                raise ModelError(f"{path}: has no bucket for sequence length(s) {missing}")
            self._package = info
        return self._package

    def _program(self, bucket: int) -> Any:
        if bucket not in self._programs:
            import anekit

            self._programs[bucket] = anekit.load(
                self.package().path, function=function_name(bucket)
            )
        return self._programs[bucket]

    def _run(self, batch: Batch) -> np.ndarray:
        if self._onnx is not None:
            hidden_rows = embed_rows(self.weights, self.config, batch.ids)
            return np.asarray(self._onnx.run(hidden_rows, batch.keep), np.float32)
        hidden = embed(self.weights, self.config, batch.ids)
        if self.backend == "numpy":
            return np.asarray(self._reference(hidden, batch.keep), np.float32)
        program = self._program(batch.bucket)
        backend = "sim" if self.backend == "sim" else "coreml"
        # The program casts to its fp16 inputs, and names values beyond fp16's range.
        result = program(hidden, batch.keep, backend=backend)
        return np.asarray(result, np.float32)

    def tokenize(self, texts: Iterable[str]) -> list[list[int]]:
        """Token ids per text, truncated at :attr:`max_length`.

        ``texts``: a list, or any iterable of str (a generator, ``map(...)``), read once.
        A text that is not valid Unicode (a lone surrogate such as ``"\\ud800"``)
        raises a :class:`~anekit.errors.ModelError` naming its index.
        """
        return tokenize(self._tokenizer, _checked_texts(texts))

    def encode(
        self,
        texts: Iterable[str],
        batch_size: int | None = None,
        normalize_embeddings: bool = True,
    ) -> np.ndarray:
        """Embeddings of ``texts`` as (number of texts, dimension) float32, in input order.

        Like sentence-transformers' ``encode``: texts longer than ``max_length``
        tokens are truncated, not refused. ``texts`` is a list or any iterable of
        str, read once. ``batch_size`` bounds how many texts are sorted and bucketed
        together (default: all); each program call embeds 4.
        """
        return self.embed_ids(self.tokenize(texts), batch_size, normalize_embeddings)

    def embed_ids(
        self,
        token_ids: Sequence[Sequence[int]],
        batch_size: int | None = None,
        normalize_embeddings: bool = True,
    ) -> np.ndarray:
        """Embeddings of already tokenized texts (what lane workers receive)."""
        if self._scheduler is not None:
            if not token_ids:
                return np.zeros((0, self.dimension), np.float32)
            vectors = np.asarray(self._scheduler.embed(token_ids), np.float32)
            if normalize_embeddings:
                return vectors  # lanes return unit vectors
            raise ModelError("lanes return normalized embeddings only")
        result = np.zeros((len(token_ids), self.dimension), np.float32)
        window = batch_size if batch_size is not None else max(len(token_ids), 1)
        if window < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        for start in range(0, len(token_ids), window):
            part = token_ids[start : start + window]
            for batch in batches(
                part, self._lengths, self.config.pad_token_id, self.batch, fill=self._onnx is None
            ):
                vectors = self._run(batch)
                for row, index in enumerate(batch.indices):
                    result[start + index] = vectors[row]
        if normalize_embeddings:
            norms = np.linalg.norm(result, axis=1, keepdims=True)
            result = result / np.maximum(norms, np.float32(1e-12))
        return result


def _checked_texts(texts: Iterable[str]) -> list[str]:
    """``texts`` as a list (an iterator is read once, here), each checked to be a str
    the tokenizer can take: valid Unicode, so no lone surrogates."""
    if isinstance(texts, str):
        raise TypeError("encode() takes a list of texts; wrap a single text in a list")
    items = list(texts)
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"text {index} is a {type(text).__name__}, not a str")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ModelError(
                f"text {index} is not valid Unicode: character {error.start} is a lone "
                f"surrogate (U+{ord(text[error.start]):04X}), half of a UTF-16 pair or a "
                "byte decoded with errors='surrogateescape'; repair the text first, e.g. "
                "text.encode('utf-8', 'replace').decode('utf-8')"
            ) from None
    return items


__all__ = ["BACKENDS", "BUCKETS", "Embedder", "default_backend"]
