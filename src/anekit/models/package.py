"""Bucketed packages: one multifunction ``.mlpackage`` per model and weight variant (and
its Core AI ``.aimodel``, every bucket a function, written from it: :func:`build_asset`).

Each bucket (batch 4 x sequence 128 ... 512) is the encoder traced at that shape,
run through the ANE passes and saved as one function (``seq128`` ...); coremltools'
``save_multifunction`` stores the weights they share once. A compressed variant
(``int8``: per output channel; ``int4-b32``, ``palettize4``, ``palettize4-g16``, ...:
:mod:`anekit.package.compression`) compresses each bucket's weights with coremltools'
utilities and its per-weight error check before combining. Metadata records the model
id, the weights' SHA-256, the bucket table, the pooling and anekit's version.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anekit import config as anekit_config
from anekit.errors import ModelError, ProgramError
from anekit.models.batching import BATCH, BUCKETS
from anekit.models.config import ModelConfig, load_config
from anekit.models.registry import resolve
from anekit.models.weights import ModelWeights, load_weights
from anekit.package.compression import METADATA_KEY, PRESETS, Compression

_log = logging.getLogger(__name__)

VARIANTS = PRESETS
INPUTS = ("hidden", "keep")
OUTPUT = "embedding"


def function_name(sequence: int) -> str:
    return f"seq{sequence}"


@dataclass(frozen=True)
class PackageInfo:
    """What a built package holds, from its metadata."""

    path: Path
    model: str
    variant: str
    weights_sha256: str
    buckets: tuple[int, ...]
    batch: int
    hidden_size: int
    pooling: str
    normalize: bool
    anekit_version: str
    #: The compression report in short (spec, bound, weights kept fp16), if compressed.
    compression: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "model": self.model,
            "variant": self.variant,
            "weights_sha256": self.weights_sha256,
            "buckets": [
                {"function": function_name(size), "batch": self.batch, "sequence": size}
                for size in self.buckets
            ],
            "hidden_size": self.hidden_size,
            "pooling": self.pooling,
            "normalize": self.normalize,
            "anekit": self.anekit_version,
            "compression": self.compression,
        }


def packages_dir() -> Path:
    return anekit_config.packages()


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the file ``path`` (created if missing), held for the
    block and released when its holder dies: one builder of a cached model at a time."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: How packages are built: bump it when tracing or the ANE passes change what a
#: package holds, so that cached packages built the old way are rebuilt, not reused
#: (2: fp16_safe_norm's per-row scale; 3: every duplicate const shared,
#: anekit._coremltools.CONST_SHARING_THRESHOLD).
RECIPE = 3


def default_path(model_id: str, weights: ModelWeights, variant: str) -> Path:
    """Where the embedder caches a package: one per model, weights, variant, anekit
    version and :data:`RECIPE`."""
    from anekit._version import __version__  # importlib.metadata: 20 ms, not for a search

    stamp = f"{weights.digest[:12]}-{variant}-{__version__}r{RECIPE}"
    return packages_dir() / f"{model_id}-{stamp}.mlpackage"


def trace_bucket(config: ModelConfig, weights: ModelWeights, sequence: int) -> Any:
    """The fp16 encoder at (BATCH, sequence), traced and through the ANE passes."""
    from anekit.frontends.numpy import compile_function
    from anekit.models.architectures import make_encoder
    from anekit.specs import TensorSpec

    return compile_function(
        make_encoder(config, weights, np.float16),
        TensorSpec((BATCH, config.hidden_size, 1, sequence), np.float16, INPUTS[0]),
        TensorSpec((BATCH, sequence), np.float16, INPUTS[1]),
        output_names=[OUTPUT],
    )


def build_package(
    model: str | Path | None = None,
    *,
    variant: str = "fp16",
    out: Path | None = None,
    buckets: Sequence[int] = BUCKETS,
    progress: Callable[[str], None] | None = None,
) -> PackageInfo:
    """Build the bucketed package of ``model`` (default: all-MiniLM-L6-v2)."""
    try:
        Compression.parse(variant)
    except ProgramError as error:
        raise ModelError(f"variant: {error}") from error
    sizes = tuple(sorted({int(size) for size in buckets}))
    if not sizes or any(size not in BUCKETS for size in sizes):
        raise ModelError(f"buckets must be among {BUCKETS}, got {tuple(buckets)}")
    model_id, folder = resolve(model)
    config = load_config(folder, max_length=max(sizes))
    weights = load_weights(folder, config)
    target = out if out is not None else default_path(model_id, weights, variant)
    if target.suffix != ".mlpackage":
        raise ModelError(f"{target}: a package path must end in .mlpackage")
    from anekit.package import save_functions

    report = progress or _log.info
    started = time.perf_counter()

    def traced() -> Iterator[tuple[str, Any]]:
        for size in sizes:  # one bucket in memory at a time
            report(f"bucket {BATCH}x{size}: tracing")
            yield function_name(size), trace_bucket(config, weights, size)

    from anekit._version import __version__

    default = min(sizes, key=lambda size: abs(size - config.max_length))
    info = PackageInfo(
        path=target,
        model=model_id,
        variant=variant,
        weights_sha256=weights.digest,
        buckets=sizes,
        batch=BATCH,
        hidden_size=config.hidden_size,
        pooling=config.pooling,
        normalize=config.normalize,
        anekit_version=__version__,
    )
    save_functions(
        traced(),
        target,
        default=function_name(default),
        weights=variant,
        metadata={f"anekit.{key}": value for key, value in _metadata(info).items()},
        description=f"{model_id} embeddings ({variant}), built by anekit",
        progress=report,
    )
    report(f"built {target} in {time.perf_counter() - started:.1f} s")
    return read_package(target)


def _metadata(info: PackageInfo) -> dict[str, str]:
    return {
        "model": info.model,
        "variant": info.variant,
        "weights_sha256": info.weights_sha256,
        "buckets": json.dumps(list(info.buckets)),
        "batch": str(info.batch),
        "hidden_size": str(info.hidden_size),
        "pooling": info.pooling,
        "normalize": json.dumps(info.normalize),
        "version": info.anekit_version,
    }


def read_package(path: Path) -> PackageInfo:
    """The metadata of a package ``build_package`` wrote."""
    if not path.exists():
        raise ModelError(f"{path}: no such package")
    from anekit._mlpackage import read_spec

    try:
        spec, _ = read_spec(path)  # read only: load_spec rewrites Manifest.json
    except ProgramError as error:
        raise ModelError(str(error)) from error
    meta = dict(spec.description.metadata.userDefined)
    try:
        return PackageInfo(
            path=path,
            model=meta["anekit.model"],
            variant=meta["anekit.variant"],
            weights_sha256=meta["anekit.weights_sha256"],
            buckets=tuple(int(size) for size in json.loads(meta["anekit.buckets"])),
            batch=int(meta["anekit.batch"]),
            hidden_size=int(meta["anekit.hidden_size"]),
            pooling=meta["anekit.pooling"],
            normalize=bool(json.loads(meta["anekit.normalize"])),
            anekit_version=meta["anekit.version"],
            compression=(json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else None),
        )
    except (KeyError, ValueError) as error:
        raise ModelError(f"{path}: not an anekit model package (metadata {error})") from error


def asset_path(package: Path) -> Path:
    """Where the Core AI asset of ``package`` goes: beside it, ``.aimodel``."""
    return package.with_suffix(".aimodel")


def build_asset(package: Path, target: Path | None = None) -> Path:
    """The Core AI asset of the bucketed ``package`` (:func:`asset_path` by default):
    every bucket one ``@graph`` function of the package's MIL program, as Core ML gets
    it (fp16, compressed weights as saved); the package kept inside the asset."""
    from anekit.package.coreai import save_package_asset

    return save_package_asset(package, target or asset_path(package))


def asset_matches(asset: Path, info: PackageInfo) -> bool:
    """Whether ``asset`` is a sound Core AI asset of the package ``info`` describes: its
    bytecode matches its hash, its metadata reads, and the package inside it is of the
    same weights and variant and has every bucket."""
    from anekit._aimodel import asset_source

    if not asset.exists():
        return False
    try:
        json.loads((asset / "metadata.json").read_text("utf-8"))  # Core AI reads it at load
        inside = read_package(asset_source(asset))
    except (ModelError, ProgramError, OSError, ValueError):  # OSError: a rewrite under way
        return False
    return (
        inside.weights_sha256 == info.weights_sha256
        and inside.variant == info.variant
        and set(info.buckets) <= set(inside.buckets)
    )


def ensure_asset(info: PackageInfo, progress: Callable[[str], None] | None = None) -> Path:
    """The Core AI asset of the package ``info``, written beside it once (under a lock,
    as packages are) and written again when it no longer matches the package."""
    target = asset_path(info.path)
    if not asset_matches(target, info):
        with exclusive_lock(target.with_name(target.name + ".lock")):
            if not asset_matches(target, info):
                (progress or _log.info)(f"writing {target.name} (Core AI) once")
                build_asset(info.path, target)
    return target


def ensure_package(
    model: str | Path | None,
    model_id: str,
    folder: Path,
    weights: ModelWeights,
    variant: str,
    *,
    buckets: Sequence[int],
    path: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> PackageInfo:
    """The package at ``path`` (default: the cache's for these weights and variant),
    built first if missing; refused when it was built from other weights or lacks one
    of ``buckets``."""
    target = path or default_path(model_id, weights, variant)
    if not target.exists():
        # One builder at a time (lane workers and their parent may all need it).
        with exclusive_lock(target.with_name(target.name + ".lock")):
            if not target.exists():
                _log.info("building %s (%s) once: about a minute", model_id, variant)
                build_package(model, variant=variant, out=target, progress=progress)
    info = read_package(target)
    if info.weights_sha256 != weights.digest:
        raise ModelError(f"{target}: was built from other weights than {folder}; rebuild it")
    missing = [size for size in buckets if size not in info.buckets]
    if missing:
        raise ModelError(f"{target}: has no bucket for sequence length(s) {missing}")
    return info
