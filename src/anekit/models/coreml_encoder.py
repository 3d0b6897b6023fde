"""The Core ML encoder (macOS): the bucketed fp16 package on the ANE or the GPU.

Unverified on hardware in this project's CI (no Mac); written against coremltools
9.0's API (``ct.models.utils.compile_model``; predictions through
:mod:`anekit.backends.coreml_nogil`, GIL-free with PyObjC, else coremltools'
``CompiledMLModel`` with ``compute_units`` and ``function_name``). Core ML care,
from prior-art.md §1.11 and seed 000:

- the package is compiled once, to a path keyed on its *content* (a SHA-256 of its
  files): ``$ANEKIT_PACKAGES/compiled/<stem>-<digest>.mlmodelc``. The path is stable
  while the package is, so macOS's compile cache (keyed by path) survives restarts,
  and two packages with the same file name never share a compiled model;
- a lock file per key makes two processes never compile the same model at once;
- ``compile_model`` refuses a destination that does not end in ``.mlmodelc``
  (coremltools/models/utils.py), so a compile goes to a temporary
  ``<key>.<pid>-<random>.tmp.mlmodelc`` beside the target and is renamed into place
  (``os.replace``, atomic on one file system); a failed compile's temporary is
  removed, and temporaries a killed worker left behind are removed under the lock;
- the longest bucket is loaded first (the slowest compile, while nothing waits).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from anekit._coremltools import ct
from anekit.backends import coreml_nogil
from anekit.models.batching import Batch
from anekit.models.embeddings import embed
from anekit.models.encoders import EncoderOptions, LoadedModel, ModelEncoder, package_of
from anekit.models.package import PackageInfo, exclusive_lock, function_name, packages_dir

#: Hex digits of the content digest in a compiled model's name.
KEY_DIGITS = 16
_CHUNK = 1 << 20


def package_digest(package: Path) -> str:
    """SHA-256 over a package's files (relative path, size and bytes, in path order):
    its Manifest, its MIL program and its weights; hidden files (Finder's
    ``.DS_Store``) are left out."""
    files = sorted(
        path
        for path in package.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(package).parts)
    )
    if not files:
        raise FileNotFoundError(f"{package}: not a package (no files in it)")
    digest = hashlib.sha256()
    for path in files:
        name = path.relative_to(package).as_posix().encode()
        digest.update(b"%d:%s:%d:" % (len(name), name, path.stat().st_size))
        with path.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def compile_key(package: Path) -> str:
    """``<stem>-<digest>``: the compiled model's name, without ``.mlmodelc``."""
    return f"{package.stem}-{package_digest(package)[:KEY_DIGITS]}"


def compiled_path(package: Path) -> Path:
    """The compiled model of ``package`` (content-keyed), compiled under a lock if missing."""
    folder = packages_dir() / "compiled"
    key = compile_key(package)
    target = folder / f"{key}.mlmodelc"
    with exclusive_lock(folder / f"{key}.lock"):  # creates the folder
        # Under the lock nobody else compiles this key: any temporary is stale.
        for stale in folder.glob(f"{key}.*.tmp.mlmodelc"):
            shutil.rmtree(stale, ignore_errors=True)
        if not target.exists():
            temporary = folder / f"{key}.{os.getpid()}-{secrets.token_hex(4)}.tmp.mlmodelc"
            try:
                compiled = ct.models.utils.compile_model(str(package), str(temporary))
                os.replace(compiled, target)
            finally:
                shutil.rmtree(temporary, ignore_errors=True)  # gone once renamed
    return target


class CoreMLEncoder(ModelEncoder):
    """The package's bucket functions, compiled once (content-keyed) and loaded by
    Core ML with ``compute_units`` (``CPU_AND_NE``: the Neural Engine)."""

    def __init__(
        self, model: LoadedModel, package: PackageInfo, compute_units: str = "CPU_AND_NE"
    ) -> None:
        super().__init__(model)
        self.label = f"Core ML ({compute_units})"
        self.package = package
        path = compiled_path(package.path)
        self.models: dict[int, Any] = {}
        for size in sorted(self.lengths, reverse=True):  # the longest compile first
            self.models[size] = coreml_nogil.load(path, compute_units, function_name(size))

    def run(self, batch: Batch) -> np.ndarray:
        hidden = embed(self.weights, self.config, batch.ids).astype(np.float16)
        outputs = self.models[batch.bucket].predict(
            {"hidden": hidden, "keep": batch.keep.astype(np.float16)}
        )
        return np.asarray(outputs["embedding"], np.float32)


def open_coreml(model: LoadedModel, options: EncoderOptions) -> CoreMLEncoder:
    """The ``coreml`` runtime's encoder: the model's package on ``options.compute_units``."""
    return CoreMLEncoder(model, package_of(model, options), options.compute_units)
