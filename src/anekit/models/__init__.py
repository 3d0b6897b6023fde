"""ANE-native embedding models: BERT-family encoders in traceable NumPy, loaded from
Hugging Face folders without torch, packaged in fixed-shape buckets.

``Embedder`` is the entry point; ``build_package`` writes the bucketed package;
``registry`` finds models (the default is all-MiniLM-L6-v2). See docs/models.md.
"""

from __future__ import annotations

from anekit.models.batching import BATCH, BUCKETS
from anekit.models.embedder import BACKENDS, Embedder, default_backend
from anekit.models.package import PackageInfo, build_package, read_package
from anekit.models.registry import DEFAULT_MODEL, fetch, list_models, resolve

__all__ = [
    "BACKENDS",
    "BATCH",
    "BUCKETS",
    "DEFAULT_MODEL",
    "Embedder",
    "PackageInfo",
    "build_package",
    "default_backend",
    "fetch",
    "list_models",
    "read_package",
    "resolve",
]
