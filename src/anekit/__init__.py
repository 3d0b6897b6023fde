"""anekit: put NumPy functions and PyTorch models on the Apple Neural Engine."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported first: it quiets the warnings coremltools logs at import on Linux.
from anekit import _runtime as _runtime

if TYPE_CHECKING:
    from anekit._version import __version__
    from anekit.embedder import Embedder
    from anekit.frontends.mlpackage import load_package as load
    from anekit.frontends.numpy import compile_function as compile
    from anekit.frontends.pytorch import convert
    from anekit.program import CompiledProgram
    from anekit.specs import TensorSpec

__all__ = [
    "CompiledProgram",
    "Embedder",
    "TensorSpec",
    "__version__",
    "compile",
    "convert",
    "load",
]

# Imported on first use: coremltools (behind programs, specs and the frontends) takes
# seconds and hundreds of megabytes to import, which lane workers and quick commands
# should not pay for; Embedder pulls in tokenizers and safetensors; the version reads the
# installed metadata (30 ms of every command).
_LAZY = {
    "__version__": ("anekit._version", "__version__"),
    "CompiledProgram": ("anekit.program", "CompiledProgram"),
    "TensorSpec": ("anekit.specs", "TensorSpec"),
    "Embedder": ("anekit.embedder", "Embedder"),
    "compile": ("anekit.frontends.numpy", "compile_function"),
    "convert": ("anekit.frontends.pytorch", "convert"),
    "load": ("anekit.frontends.mlpackage", "load_package"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'anekit' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    return getattr(importlib.import_module(module), attribute)
