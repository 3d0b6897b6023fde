"""The Core ML lanes (macOS): the bucketed fp16 package on the ANE or the GPU.

Unverified on hardware in this project's CI (no Mac); written against coremltools'
API (``ct.models.utils.compile_model``; predictions through
:mod:`anekit.backends.coreml_nogil`, GIL-free with PyObjC, else coremltools'
``CompiledMLModel`` with ``compute_units`` and ``function_name``). Core ML care,
from prior-art.md §1.11 and seed 000:

- the package is compiled once to a stable path next to it
  (``$ANEKIT_PACKAGES/compiled/<package>.mlmodelc``), so macOS's compile cache, keyed by
  path, survives anekit upgrades and restarts;
- a lock file makes two processes never compile the same model at once;
- compiles go to a ``.partial`` directory renamed into place, and partial directories
  a killed worker left behind are removed first;
- the longest bucket is loaded first (the slowest compile, while nothing waits).
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit._coremltools import ct
from anekit.backends import coreml_nogil
from anekit.models.batching import BATCH, batches
from anekit.models.bert import embed
from anekit.models.package import function_name, packages_dir


def compiled_path(package: Path) -> Path:
    """The stable compiled location of ``package``, compiled under a lock if missing."""
    folder = packages_dir() / "compiled"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{package.stem}.mlmodelc"
    with (folder / f"{package.stem}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for stale in folder.glob(f"{package.stem}.mlmodelc.partial*"):
                shutil.rmtree(stale, ignore_errors=True)
            if not target.exists():
                partial = folder / f"{package.stem}.mlmodelc.partial"
                compiled = Path(ct.models.utils.compile_model(str(package), str(partial)))
                compiled.replace(target)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


class CoreMLEngine:
    """The package's bucket functions loaded by Core ML with the given compute units."""

    def __init__(self, embedder: Any, compute_units: str) -> None:
        self.embedder = embedder
        self.dimension = int(embedder.dimension)
        self.model_id = str(embedder.model_id)
        self.device = f"Core ML ({compute_units})"
        info = embedder.package()
        path = compiled_path(info.path)
        self.models: dict[int, Any] = {}
        for size in sorted(embedder.buckets, reverse=True):  # the longest compile first
            self.models[size] = coreml_nogil.load(path, compute_units, function_name(size))

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return list(self.embedder.tokenize(texts))

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        weights, config = self.embedder.weights, self.embedder.config
        result = np.zeros((len(token_ids), self.dimension), np.float32)
        for batch in batches(token_ids, self.embedder.buckets, config.pad_token_id, BATCH):
            hidden = embed(weights, config, batch.ids).astype(np.float16)
            outputs = self.models[batch.bucket].predict(
                {"hidden": hidden, "keep": batch.keep.astype(np.float16)}
            )
            vectors = np.asarray(outputs["embedding"], np.float32)
            for row, index in enumerate(batch.indices):
                result[index] = vectors[row]
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        normalized: np.ndarray = result / np.maximum(norms, np.float32(1e-12))
        return normalized
