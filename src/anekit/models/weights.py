"""Encoder weights from ``model.safetensors``, as NumPy arrays, without torch: a
BERT-family encoder's (:class:`Weights`) or ModernBERT's (:class:`ModernBertWeights`).
Every tensor's shape is checked against the configuration when the weights are
opened; the word table is mapped from the file and the rest read on first use."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import mmap
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anekit.errors import ModelError
from anekit.models.config import EncoderConfig, ModelConfig, ModernBertConfig
from anekit.models.file_memo import FileMemo

#: Prefixes checkpoints put before ``embeddings.`` / ``encoder.`` / ``layers.``.
_PREFIXES = ("", "bert.", "roberta.", "model.", "electra.")
#: The word table's name, which tells the prefix, per family.
BERT_WORDS = "embeddings.word_embeddings.weight"
MODERNBERT_WORDS = "embeddings.tok_embeddings.weight"


@dataclass(frozen=True)
class Layer:
    """One encoder layer's weights, linear weights as (out, in)."""

    q: np.ndarray
    q_bias: np.ndarray
    k: np.ndarray
    k_bias: np.ndarray
    v: np.ndarray
    v_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: np.ndarray
    norm1_bias: np.ndarray
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: np.ndarray
    norm2_bias: np.ndarray


class _MappedWords:
    """Weights whose word table (``word``) may be mapped from the checkpoint."""

    word: np.ndarray

    def release_pages(self) -> None:
        """Drop the mapped word table's pages from this process's resident memory (they
        stay in the OS page cache and come back on the next lookup). Each lookup maps a
        few pages around the row it reads (fault-around), so a long-lived process that
        embeds queries would otherwise come to hold much of the table (23 MB after 30
        queries)."""
        mapping = _mapping_of(self.word)
        if mapping is not None and hasattr(mmap, "MADV_DONTNEED"):
            mapping.madvise(mmap.MADV_DONTNEED)


@dataclass(frozen=True)
class Weights(_MappedWords):
    """All weights of a BERT-family encoder, float32. The small embedding tables are
    read at once and the word table is mapped from the file (only the rows looked up
    are resident); the layers are read on first use (:attr:`layers`), so that a process
    that only looks up token embeddings (an ONNX Runtime lane worker) never holds them."""

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    norm: np.ndarray
    norm_bias: np.ndarray
    digest: str
    read_layers: Callable[[], tuple[Layer, ...]] = field(repr=False, compare=False)

    @functools.cached_property
    def layers(self) -> tuple[Layer, ...]:
        return self.read_layers()


@dataclass(frozen=True)
class ModernBertWeights(_MappedWords):
    """A ModernBERT checkpoint, float32: the word table (mapped, as for BERT) and every
    other tensor by its name without the checkpoint's prefix (``layers.0.attn.Wqkv.weight``),
    read on first use (:attr:`tensors`)."""

    word: np.ndarray
    digest: str
    read_tensors: Callable[[], dict[str, np.ndarray]] = field(repr=False, compare=False)

    @functools.cached_property
    def tensors(self) -> dict[str, np.ndarray]:
        return self.read_tensors()


#: The weights of any family anekit embeds with.
ModelWeights = Weights | ModernBertWeights


#: Checkpoints' digests, by file (the latest 64 used).
_DIGESTS = FileMemo("digests.json", kept=64)


class _Checkpoint:
    """``model.safetensors``, read one tensor at a time (never all of it at once)."""

    def __init__(self, folder: Path, words: str) -> None:
        self.folder = folder
        self.path = folder / "model.safetensors"
        if not self.path.exists():
            if (folder / "pytorch_model.bin").exists():
                raise ModelError(
                    f"{folder}: has only pytorch_model.bin; anekit reads model.safetensors. "
                    "Convert it once with torch: `from safetensors.torch import save_file; "
                    "save_file(torch.load('pytorch_model.bin'), 'model.safetensors')`"
                )
            raise ModelError(f"{folder}: no model.safetensors")
        with self._open() as reader:
            slices = {name: reader.get_slice(name) for name in reader.keys()}  # noqa: SIM118
            self.shapes = {name: tuple(part.get_shape()) for name, part in slices.items()}
            self.dtypes = {name: str(part.get_dtype()) for name, part in slices.items()}
        self.prefix = next((p for p in _PREFIXES if f"{p}{words}" in self.shapes), None)
        if self.prefix is None:
            raise ModelError(
                f"{folder}/model.safetensors: no {words}; not a checkpoint of the model "
                "config.json describes"
            )

    @contextlib.contextmanager
    def _open(self) -> Iterator[Any]:
        """The file opened by safetensors; any error reading it raises ModelError."""
        try:
            from safetensors import safe_open

            with safe_open(str(self.path), framework="numpy") as reader:
                yield reader
        except Exception as error:
            raise ModelError(f"{self.path}: not a readable safetensors file: {error}") from error

    def check(self, name: str, shape: tuple[int, ...]) -> str:
        """The stored key of ``name``, checked to have ``shape``."""
        key = f"{self.prefix}{name}"
        if key not in self.shapes:
            raise ModelError(f"{self.folder}/model.safetensors: missing {key}")
        if self.shapes[key] != shape:
            raise ModelError(
                f"{self.folder}/model.safetensors: {key} has shape {self.shapes[key]}, "
                f"config.json implies {shape}"
            )
        return key

    def mapped(self, key: str) -> np.ndarray | None:
        """A float32 tensor mapped read-only from the file (its pages are read when
        used: a process that looks up token embeddings holds only the rows it met),
        or None when it is stored as another dtype. The layout is safetensors': a
        little-endian u64 header size, the JSON header, then the data, each tensor at
        its ``data_offsets`` from the data's start."""
        if sys.byteorder != "little":
            return None
        with self.path.open("rb") as stream:
            (size,) = struct.unpack("<Q", stream.read(8))
            entry = json.loads(stream.read(size))[key]
            if entry["dtype"] != "F32":
                return None
            mapping = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        if hasattr(mmap, "MADV_RANDOM"):
            mapping.madvise(mmap.MADV_RANDOM)  # rows are looked up one by one: no read-ahead
        begin, _ = entry["data_offsets"]
        shape = tuple(entry["shape"])
        table = np.frombuffer(mapping, np.float32, int(np.prod(shape)), offset=8 + size + begin)
        return table.reshape(shape)

    def _bfloat16(self, key: str) -> np.ndarray:
        """A bfloat16 tensor (which NumPy, and so safetensors' NumPy reader, cannot
        hold) as float32: each value's 16 bits become the high half of a float32."""
        with self.path.open("rb") as stream:
            (size,) = struct.unpack("<Q", stream.read(8))
            entry = json.loads(stream.read(size))[key]
            begin, end = entry["data_offsets"]
            stream.seek(8 + size + begin)
            half = np.frombuffer(stream.read(end - begin), "<u2")
        return (half.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])

    def read(self, keys: list[str]) -> dict[str, np.ndarray]:
        """Tensors as float32 (stored as F32, F16, BF16 or another dtype NumPy casts)."""
        with self._open() as reader:
            return {
                key: self._bfloat16(key)
                if self.dtypes[key] == "BF16"
                else np.asarray(reader.get_tensor(key), np.float32)
                for key in keys
            }

    def digest(self) -> str:
        """SHA-256 over every tensor's name and stored bytes, in name order (one at a
        time; the bytes as the file holds them, so a bfloat16 tensor counts too).

        Remembered in ``$ANEKIT_HOME/digests.json`` by the file's path, size, mtime and
        inode (hashing 90 MB took 0.18 s of every one-shot ``anekit search``)."""
        return _DIGESTS.value(self.path, self._hash)

    def _hash(self) -> str:
        hasher = hashlib.sha256()
        with self.path.open("rb") as stream:
            (size,) = struct.unpack("<Q", stream.read(8))
            header = json.loads(stream.read(size))
            for name in sorted(self.shapes):
                begin, end = header[name]["data_offsets"]
                stream.seek(8 + size + begin)
                hasher.update(name.encode())
                hasher.update(stream.read(end - begin))
        return hasher.hexdigest()


_LAYER_TENSORS = {
    "q": ("attention.self.query.weight", "cc"),
    "q_bias": ("attention.self.query.bias", "c"),
    "k": ("attention.self.key.weight", "cc"),
    "k_bias": ("attention.self.key.bias", "c"),
    "v": ("attention.self.value.weight", "cc"),
    "v_bias": ("attention.self.value.bias", "c"),
    "out": ("attention.output.dense.weight", "cc"),
    "out_bias": ("attention.output.dense.bias", "c"),
    "norm1": ("attention.output.LayerNorm.weight", "c"),
    "norm1_bias": ("attention.output.LayerNorm.bias", "c"),
    "up": ("intermediate.dense.weight", "fc"),
    "up_bias": ("intermediate.dense.bias", "f"),
    "down": ("output.dense.weight", "cf"),
    "down_bias": ("output.dense.bias", "c"),
    "norm2": ("output.LayerNorm.weight", "c"),
    "norm2_bias": ("output.LayerNorm.bias", "c"),
}


def _mapping_of(array: np.ndarray) -> mmap.mmap | None:
    """The file mapping ``array`` is a view of (:meth:`_Checkpoint.mapped`), if any."""
    base: Any = array
    while base is not None:
        if isinstance(base, mmap.mmap):
            return base
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return None


def load_weights(folder: Path, config: ModelConfig) -> ModelWeights:
    """The encoder's weights from ``folder/model.safetensors``, every tensor's shape
    checked against ``config`` now; the layers' values are read on first use."""
    if isinstance(config, ModernBertConfig):
        return _modernbert_weights(folder, config)
    return _bert_weights(folder, config)


def _bert_weights(folder: Path, config: EncoderConfig) -> Weights:
    checkpoint = _Checkpoint(folder, BERT_WORDS)
    sizes = {"c": config.hidden_size, "f": config.intermediate_size}
    layer_keys = [
        {
            field_name: checkpoint.check(
                f"encoder.layer.{index}.{name}", tuple(sizes[letter] for letter in dims)
            )
            for field_name, (name, dims) in _LAYER_TENSORS.items()
        }
        for index in range(config.num_layers)
    ]
    c = config.hidden_size
    tables = {
        "word": ("embeddings.word_embeddings.weight", (config.vocab_size, c)),
        "position": ("embeddings.position_embeddings.weight", (config.max_position_embeddings, c)),
        "token_type": ("embeddings.token_type_embeddings.weight", (config.type_vocab_size, c)),
        "norm": ("embeddings.LayerNorm.weight", (c,)),
        "norm_bias": ("embeddings.LayerNorm.bias", (c,)),
    }
    keys = {name: checkpoint.check(key, shape) for name, (key, shape) in tables.items()}
    word = checkpoint.mapped(keys["word"])
    values = checkpoint.read([key for name, key in keys.items() if name != "word" or word is None])
    if word is not None:
        values[keys["word"]] = word

    def read_layers() -> tuple[Layer, ...]:
        read = checkpoint.read([key for layer in layer_keys for key in layer.values()])
        return tuple(
            Layer(**{name: read[key] for name, key in layer.items()}) for layer in layer_keys
        )

    return Weights(
        **{name: values[key] for name, key in keys.items()},
        digest=checkpoint.digest(),
        read_layers=read_layers,
    )


def _modernbert_shapes(config: ModernBertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the encoder reads, by name, with its shape (transformers'
    ``ModernBertModel``: the first layer's attention norm is the identity, so it has none;
    biases only where the config asks for them)."""
    c, f = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        MODERNBERT_WORDS: (config.vocab_size, c),
        "embeddings.norm.weight": (c,),
        "final_norm.weight": (c,),
    }
    for index in range(config.num_layers):
        base = f"layers.{index}."
        norms = ["mlp_norm"] + (["attn_norm"] if index else [])
        shapes.update({f"{base}{norm}.weight": (c,) for norm in norms})
        linear = {"attn.Wqkv": (3 * c, c), "attn.Wo": (c, c), "mlp.Wi": (2 * f, c),
                  "mlp.Wo": (c, f)}  # fmt: skip
        shapes.update({f"{base}{name}.weight": shape for name, shape in linear.items()})
        if config.norm_bias:
            shapes.update({f"{base}{norm}.bias": (c,) for norm in norms})
        for name, shape in linear.items():
            biased = config.attention_bias if name.startswith("attn") else config.mlp_bias
            if biased:
                shapes[f"{base}{name}.bias"] = shape[:1]
    if config.norm_bias:
        shapes.update({"embeddings.norm.bias": (c,), "final_norm.bias": (c,)})
    return shapes


def _modernbert_weights(folder: Path, config: ModernBertConfig) -> ModernBertWeights:
    checkpoint = _Checkpoint(folder, MODERNBERT_WORDS)
    keys = {
        name: checkpoint.check(name, shape) for name, shape in _modernbert_shapes(config).items()
    }
    word = checkpoint.mapped(keys[MODERNBERT_WORDS])
    if word is None:
        word = checkpoint.read([keys[MODERNBERT_WORDS]])[keys[MODERNBERT_WORDS]]

    def read_tensors() -> dict[str, np.ndarray]:
        others = {name: key for name, key in keys.items() if name != MODERNBERT_WORDS}
        read = checkpoint.read(list(others.values()))
        return {name: read[key] for name, key in others.items()}

    return ModernBertWeights(word=word, digest=checkpoint.digest(), read_tensors=read_tensors)
