"""``anekit.Embedder``: sentence embeddings from a BERT-family or ModernBERT model, on the
ANE when there is one, following sentence-transformers' ``encode`` semantics.

An Embedder is a model (:class:`~anekit.models.encoders.LoadedModel`, resolved once),
its tokenizer and one runtime's encoder (:mod:`anekit.models.encoders`): texts are
tokenized and truncated at ``max_length`` (the model's default, 256 for MiniLM; up to
512), handed to the encoder in windows of ``batch_size``, and returned in input order,
L2-normalized unless asked not to be. Runtimes (:data:`anekit.runtimes.RUNTIMES`):

- ``numpy``: the fp32 reference, the encoder evaluated directly with NumPy (any OS);
- ``sim``: the fp16 package's bucket functions in anekit's ANE simulator (any OS;
  slow, a numerics check, not a speed path);
- ``coreml``: the fp16 package on Core ML with the Neural Engine (macOS; unverified
  on hardware in this project's CI);
- ``onnx``: ONNX Runtime on the CPU (or CUDA), int8 weights per channel by default
  (``variant="fp32"`` keeps float32), from the row-layout encoder;
- ``direct``: the fp16 package on the ANE through the private framework, without Core
  ML (macOS; experimental, unverified on hardware; docs/direct.md).

``lanes=[...]`` embeds through a pool of lane worker processes instead
(:class:`anekit.lanes.Pool`, kept apart from the model as sentence-transformers keeps
its multi-process pool); with ``ray=ADDRESS``, one lane's engines as actors on a Ray
cluster (docs/scale-out.md).

The package is built on first use and cached under ``$ANEKIT_HOME/packages``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from anekit import runtimes
from anekit.errors import ModelError
from anekit.models.batching import buckets_for, checked_texts, load_tokenizer, tokenize
from anekit.models.config import ModelConfig
from anekit.models.encoders import (
    Encoder,
    LoadedModel,
    ModelEncoder,
    OnnxRuntimeEncoder,
    load_model,
    open_encoder,
    unit_rows,
)
from anekit.models.onnx_models import OnnxSessions
from anekit.models.package import PackageInfo
from anekit.models.weights import ModelWeights
from anekit.runtimes import RUNTIMES, default_runtime

if TYPE_CHECKING:
    from anekit.lanes.pool import Pool

#: The runtimes an Embedder runs on (``backend`` was their older name).
BACKENDS = tuple(RUNTIMES)


def default_backend() -> str:
    """:func:`anekit.runtimes.default_runtime` (its older name)."""
    return default_runtime()


class Embedder:
    """Sentence embeddings: ``Embedder().encode(["def f(): ..."])`` -> (1, 384) float32.

    ``model``: None (all-MiniLM-L6-v2), a cached model name or a Hugging Face folder.
    ``runtime``: ``numpy``, ``sim``, ``coreml``, ``onnx`` or ``direct`` (default:
    coreml on a Mac, else numpy; ``backend=`` is its deprecated older name).
    ``variant``: package weights for sim/coreml (``fp16``, ``int8``) or the ONNX
    model's (``int8``, ``fp32``). ``package``: a package ``anekit build-model`` wrote
    (default: built and cached). ``threads``: ONNX Runtime's intra-op threads (in the
    lane workers too). ``device``: the onnx runtime's ``auto`` (default), ``cpu`` or
    ``cuda`` (:func:`anekit.backends.onnx.session_for`). ``isolated_build``: an ONNX
    model not built yet is built in a child process (for a long-lived process: the
    build's memory leaves with the child; it costs a Python start and imports).

    ``lanes`` (e.g. ``["ane"]``, ``["cpu"]``, ``["ane", "cpu"]``) embeds through worker
    processes instead (:mod:`anekit.lanes`): each lane proves itself on the known
    answers first, and a crash, a hang or a wrong answer costs a lane, not the call.
    ``lanes=[]`` picks the default (the ANE lane on a Mac, else the CPU lane). Close
    the embedder (or use it as a context manager) to stop the workers. ``ray``: run the
    one lane given (or ``auto``: each node's best) as an actor pool on the Ray cluster at
    that address (``"local"``: an instance of this machine's own), with the extra
    ``anekit[ray]``.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        runtime: str | None = None,
        max_length: int | None = None,
        variant: str | None = None,
        package: Path | None = None,
        progress: Callable[[str], None] | None = None,
        threads: int | None = None,
        lanes: Sequence[str] | None = None,
        deadline: float = 30.0,
        device: str | None = None,
        isolated_build: bool = False,
        ray: str | None = None,
        backend: str | None = None,
    ) -> None:
        if backend is not None:
            if runtime is not None:
                raise ModelError("give runtime, not backend too (backend is its older name)")
            warnings.warn(
                "Embedder(backend=...) is now Embedder(runtime=...)",
                DeprecationWarning,
                stacklevel=2,
            )
            runtime = backend
        if lanes is not None and runtime is not None:
            raise ModelError("give runtime or lanes, not both")
        if ray is not None and lanes is None:
            raise ModelError("ray= runs a lane on a Ray cluster: give lanes= too ([]: the default)")
        chosen = "numpy" if lanes is not None else (runtime or default_runtime())
        if device is not None and chosen != "onnx":
            raise ModelError(f"device= applies to runtime='onnx', not {chosen!r}")
        if lanes is None:
            runtimes.runtime(chosen).require()
        self.model: LoadedModel = load_model(model, max_length)
        self.model_id, self.folder = self.model.model_id, self.model.folder
        self.config: ModelConfig = self.model.config
        #: The runtime that embeds, or ``lanes``.
        self.runtime = "lanes" if lanes is not None else chosen
        self.variant = variant or RUNTIMES[chosen].variants[0]
        self.buckets = buckets_for(self.config.max_length)
        self._tokenizer = load_tokenizer(self.folder, self.config.max_length)
        self._pool: Pool | None = None
        self.encoder: Encoder
        if lanes is not None:
            from anekit.lanes.pool import open_pool

            if ray is not None and len(names := list(lanes)) > 1:
                raise ModelError(f"a Ray cluster runs one lane (or auto), got {', '.join(names)}")
            self._pool = open_pool(
                lanes,
                model=self.model,
                max_length=self.config.max_length,
                deadline=deadline,
                threads=threads,
                ray=ray,
            )
            self.encoder = self._pool  # a pool is an encoder of unit vectors too
            if variant is None:  # the numerics of the lead lane's vectors
                from anekit.lanes.engines import lane_variant
                from anekit.lanes.pool import lead_lane

                self.variant = lane_variant(lead_lane(lanes))
        else:
            _ = self.model.weights  # read now, so that a broken folder fails here
            from anekit.backends import ProgramRefused

            def opened(name: str) -> Encoder:
                return open_encoder(
                    name,
                    self.model,
                    variant=self.variant,
                    package=package,
                    progress=progress,
                    threads=threads,
                    device=device or "auto",
                    isolated_build=isolated_build,
                )

            try:
                self.encoder = opened(chosen)
            except ProgramRefused as refused:
                # The default runtime refusing the model (Core AI: an op without a
                # lowering) hands it to its fallback (Core ML); a runtime named refuses.
                fallback = RUNTIMES[chosen].fallback
                if runtime is not None or fallback is None:
                    raise
                warnings.warn(f"{refused}; embedding on {fallback}", RuntimeWarning, stacklevel=2)
                self.runtime = fallback
                self.encoder = opened(fallback)
        #: Rows per program call: 4 for the packages, 8 for ONNX Runtime.
        self.batch = self.encoder.batch

    @property
    def backend(self) -> str:
        """:attr:`runtime` (its older name)."""
        return self.runtime

    @property
    def onnx_sessions(self) -> OnnxSessions | None:
        """The ONNX Runtime sessions of the onnx runtime, else None."""
        return self.encoder.sessions if isinstance(self.encoder, OnnxRuntimeEncoder) else None

    @property
    def onnx_encoder(self) -> OnnxSessions | None:
        """:attr:`onnx_sessions` (its older name)."""
        return self.onnx_sessions

    @property
    def weights(self) -> ModelWeights:
        """The model's weights (with lanes, read on first use: workers read their own)."""
        return self.model.weights

    @property
    def pool(self) -> Pool | None:
        """The pool of lane workers (``lanes=``), else None."""
        return self._pool

    @property
    def scheduler(self) -> Pool | None:
        """:attr:`pool` (its older name)."""
        return self._pool

    def package(self) -> PackageInfo:
        """The bucketed package the sim, coreml and direct runtimes run."""
        info = getattr(self.encoder, "package", None)
        if not isinstance(info, PackageInfo):
            raise ModelError(f"the {self.runtime} runtime runs no package")
        return info

    def close(self) -> None:
        """Stop the lane workers, if any."""
        self.encoder.close()

    def release_memory(self) -> None:
        """Give back the word table's pages that lookups mapped (a long-lived process,
        between requests); they come back on use."""
        if isinstance(self.encoder, ModelEncoder):
            self.encoder.release_memory()

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

    def tokenize(self, texts: Iterable[str]) -> list[list[int]]:
        """Token ids per text, truncated at :attr:`max_length`.

        ``texts``: a list, or any iterable of str (a generator, ``map(...)``), read once.
        A text that is not valid Unicode (a lone surrogate such as ``"\\ud800"``)
        raises a :class:`~anekit.errors.ModelError` naming its index.
        """
        return tokenize(self._tokenizer, checked_texts(texts))

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
        together (default: all); each program call embeds :attr:`batch`.
        """
        return self.embed_ids(self.tokenize(texts), batch_size, normalize_embeddings)

    def embed_ids(
        self,
        token_ids: Sequence[Sequence[int]],
        batch_size: int | None = None,
        normalize_embeddings: bool = True,
    ) -> np.ndarray:
        """Embeddings of already tokenized texts (what lane workers receive)."""
        if self.encoder.normalized and not normalize_embeddings:
            raise ModelError("lanes return normalized embeddings only")
        window = batch_size if batch_size is not None else max(len(token_ids), 1)
        if window < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if self.encoder.normalized:
            window = max(len(token_ids), 1)  # a lane pool schedules the whole input itself
        result = np.zeros((len(token_ids), self.dimension), np.float32)
        for start in range(0, len(token_ids), window):
            part = token_ids[start : start + window]
            result[start : start + len(part)] = self.encoder.embed(part)
        if normalize_embeddings and not self.encoder.normalized:
            return unit_rows(result)
        return result


__all__ = ["BACKENDS", "Embedder", "default_backend"]
