"""ANE-native models: BERT-family and ModernBERT sentence encoders (and the Whisper audio
encoder, :mod:`anekit.models.whisper`) in traceable NumPy, loaded from Hugging Face
folders without torch, packaged in fixed-shape buckets.

``encoders`` runs a model (token ids to vectors) on each runtime, and
:class:`anekit.Embedder` puts a tokenizer in front of one; ``build_package`` writes the
bucketed package; ``registry`` finds models (the default is all-MiniLM-L6-v2). See
docs/models.md.
"""

from __future__ import annotations

from anekit.models.batching import BATCH, BUCKETS
from anekit.models.package import PackageInfo, build_package, read_package
from anekit.models.registry import DEFAULT_MODEL, fetch, list_models, resolve

__all__ = [
    "BATCH",
    "BUCKETS",
    "DEFAULT_MODEL",
    "PackageInfo",
    "build_package",
    "fetch",
    "list_models",
    "read_package",
    "resolve",
]
