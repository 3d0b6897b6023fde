"""The encoder for ONNX Runtime: the row-layout encoder (:func:`make_row_encoder`, the
(B, S, C) layout CPUs and GPUs prefer) traced once, emitted to ONNX with a symbolic batch
and sequence length and (``int8``) dynamically quantized per channel; cached next to the
packages.

ONNX Runtime takes any shape, so one model serves every batch and length. fp32 rows run in
groups of up to :data:`ONNX_BATCH`, padded to their group's longest rounded up to
:data:`LENGTH_STEP` tokens, not to a bucket (MiniLM on 1000 code chunks: 34 % of the
bucket-padded tokens were padding), and a lone row (a search query) runs alone, not with
seven padding rows (MiniLM int8, a 32-token query, 2 threads: 1.9 ms instead of 11 ms).
int8 rows run one at a time at their own length (:func:`rows_per_run`): dynamic
quantization takes one activation scale per tensor (ONNX Runtime's
``DynamicQuantizeLinear`` computes it over the whole input), so rows run together share
it and each row's vector would depend on its batch mates and their padding (two cold
builds of one repository gave different vectors); alone, a text's vector depends on the
text only, bit for bit, at the speed of groups of 8 on a CPU (docs/benchmarks.md).
Sessions go to the device asked for (see :func:`anekit.backends.onnx.session_for`), and
:attr:`OnnxSessions.device` says what they really run on (ONNX Runtime's providers).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from anekit.errors import ModelError
from anekit.models.config import ModelConfig
from anekit.models.package import exclusive_lock, packages_dir
from anekit.models.weights import ModelWeights

_log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

#: fp32 rows per run (the model takes any batch; larger groups gain little on a CPU).
ONNX_BATCH = 8
VARIANTS = ("fp32", "int8")
#: fp32 rows are padded to a multiple of this many tokens.
LENGTH_STEP = 16


def rows_per_run(variant: str) -> tuple[int, int]:
    """How many rows one run takes and the multiple of tokens they are padded to: int8
    one row at its own length (its activation scales are then its own: module doc),
    fp32 :data:`ONNX_BATCH` rows to a multiple of :data:`LENGTH_STEP`."""
    return (1, 1) if variant == "int8" else (ONNX_BATCH, LENGTH_STEP)


#: Lengths the encoder may be traced at before the length is made symbolic: primes,
#: the first that no other dimension of the model equals, so that every occurrence
#: of it in a reshape target is the sequence length.
TRACE_LENGTHS = (97, 101, 103, 107, 109, 113, 127)
#: Batches the encoder may be traced at before the batch is made symbolic (as above).
TRACE_BATCHES = (5, 7, 11, 13)
MODEL_FILE = "encoder.onnx"
BUILD_LOCK = "build.lock"
#: What the child process that builds a model runs (``python -c``).
_CHILD = "import sys; from anekit.models.onnx_models import _main; sys.exit(_main(sys.argv[1:]))"
#: The cached model's format: 2 takes any batch (1 was traced at a fixed batch of 8); 3
#: has calibrated int8 activation scales (anekit.package.activation_scales).
MODEL_FORMAT = 3
#: The version of the int8 model's numerics per weight form (1: one activation scale
#: per run; 2: calibrated scales, int8 weights; 3: the same with uint8 weights, on
#: machines whose u8 x s8 kernels saturate, anekit.package.int8_kernels): part of a
#: search store's identity, so a store embedded with other numerics embeds again
#: (anekit.search.store.StoreIdentity).
INT8_NUMERICS = {"s8": 2, "u8": 3}


def int8_numerics() -> int:
    """The int8 numerics this machine's models have (:data:`INT8_NUMERICS`)."""
    from anekit.package.int8_kernels import weight_form

    return INT8_NUMERICS[weight_form()]


def folder_for(model_id: str, weights: ModelWeights, variant: str) -> Path:
    """Where the model of ``variant`` is cached; an int8 model with uint8 weights
    (:mod:`anekit.package.int8_kernels`) has a folder of its own."""
    name = f"{model_id}-{weights.digest[:12]}-onnx{MODEL_FORMAT}-{variant}"
    if variant == "int8":
        from anekit.package.int8_kernels import weight_form

        form = weight_form()
        name += "" if form == "s8" else f"-{form}"
    return packages_dir() / name


def symbolic_length(model: Any, length: int) -> None:
    """Make the sequence axis of ``model`` (an ``onnx.ModelProto`` traced at ``length``)
    symbolic, in place: inputs' axis 1 becomes ``sequence``, ``length`` becomes -1 in every
    Reshape target, and the traced intermediate shapes are dropped. Any other constant with
    an axis of ``length`` is refused (it would tie the model to the traced length)."""
    from onnx import numpy_helper

    targets = {node.input[1] for node in model.graph.node if node.op_type == "Reshape"}
    for initializer in model.graph.initializer:
        value = numpy_helper.to_array(initializer)
        if initializer.name in targets:
            hits = value == length
            if hits.sum() > 1:
                raise ModelError(
                    f"reshape target {value.tolist()}: {length} twice; "
                    "cannot tell which axis is the sequence"
                )
            if hits.any():
                symbolic = np.where(hits, -1, value).astype(value.dtype)
                initializer.CopyFrom(numpy_helper.from_array(symbolic, initializer.name))
        elif length in value.shape:
            raise ModelError(
                f"constant {initializer.name} of shape {value.shape} has the traced length "
                f"{length}; the model cannot take other lengths"
            )
    for value_info in model.graph.input:
        value_info.type.tensor_type.shape.dim[1].dim_param = "sequence"
    for value_info in model.graph.output:
        for dim in value_info.type.tensor_type.shape.dim:
            if dim.dim_value == length:
                raise ModelError(f"output {value_info.name} has the traced length as an axis")
    del model.graph.value_info[:]


def symbolic_batch(model: Any, batch: int) -> None:
    """Make the batch axis of ``model`` (an ``onnx.ModelProto`` traced at ``batch``)
    symbolic, in place: axis 0 of the inputs and outputs becomes ``batch``, and a Reshape
    target that starts with ``batch`` starts with 0 (ONNX: copy the input's axis 0) where
    the reshaped value's axis 0 is ``batch`` in the traced shapes (ONNX shape inference).
    Anything else holding ``batch`` (another axis of a reshape target or of a constant, a
    reshape of a value whose axis 0 is not the batch) is refused."""
    from onnx import numpy_helper, shape_inference

    inferred = shape_inference.infer_shapes(model, strict_mode=True).graph
    traced = {
        value.name: [dim.dim_value for dim in value.type.tensor_type.shape.dim]
        for value in [*inferred.input, *inferred.value_info, *inferred.output]
    }
    reshapes = {
        node.input[1]: node.input[0] for node in model.graph.node if node.op_type == "Reshape"
    }
    for initializer in model.graph.initializer:
        value = numpy_helper.to_array(initializer)
        source = reshapes.get(initializer.name)
        if source is None:
            if batch in value.shape:
                raise ModelError(
                    f"constant {initializer.name} of shape {value.shape} has the traced batch "
                    f"{batch}; the model cannot take other batches"
                )
            continue
        hits = np.flatnonzero(value.reshape(-1) == batch)
        if hits.size == 0:
            continue
        shape = traced.get(source)
        if hits.tolist() != [0] or not shape or shape[0] != batch:
            raise ModelError(
                f"reshape of {source} (traced shape {shape}) to {value.tolist()}: cannot tell "
                "that its axis 0 is the batch"
            )
        symbolic = value.copy()
        symbolic.reshape(-1)[0] = 0
        initializer.CopyFrom(numpy_helper.from_array(symbolic, initializer.name))
    for value_info in [*model.graph.input, *model.graph.output]:
        axis = value_info.type.tensor_type.shape.dim[0]
        if axis.dim_value != batch:
            raise ModelError(f"{value_info.name}: axis 0 is not the traced batch {batch}")
        axis.dim_param = "batch"


def build_model(
    config: ModelConfig,
    weights: ModelWeights,
    variant: str,
    folder: Path,
    source: Path | None = None,
    model_folder: Path | None = None,
) -> Path:
    """The ONNX model (any batch, any length), built if missing, one builder at a time
    (a lock file in ``folder``: a search daemon and its lane worker may both need it).
    An int8 build tokenizes its calibration texts with the tokenizer of ``model_folder``
    (the model's folder; default ``source``).

    With ``source`` (the model's folder; ``Embedder(isolated_build=True)``, as the search
    index's query model is) the build runs in a fresh process: tracing, emitting and
    quantizing MiniLM leaves about 700 MB of freed memory a long-lived process (``anekit
    serve``) would keep (815 MB resident after building the query model in process, 105 MB
    when already built), and its output never reaches this process's stdout (an MCP stdio
    channel). Short-lived lane workers build in process, skipping the child's imports."""
    target = folder / MODEL_FILE
    if target.exists():
        return target  # cached: no tracer, no coremltools in this process
    with exclusive_lock(folder / BUILD_LOCK):
        if not target.exists():  # another process may have built it meanwhile
            if source is not None:
                _build_in_child(source, weights.digest, variant, folder)
            else:
                _build(config, weights, variant, folder, model_folder)
    return target


def _build_in_child(source: Path, digest: str, variant: str, folder: Path) -> None:
    command = [sys.executable, "-c", _CHILD, str(source), digest, variant, str(folder)]
    _log.info("building the %s ONNX model of %s in a child process", variant, source)
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 or not (folder / MODEL_FILE).exists():
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise ModelError(
            f"building the {variant} ONNX model of {source} failed (exit {done.returncode})"
            + (f": {tail}" if tail else "")
        )


def calibration_inputs(
    config: ModelConfig, weights: ModelWeights, model_folder: Path
) -> list[dict[str, np.ndarray]]:
    """The row encoder's inputs for each calibration text (anekit.models.calibration),
    one row each, tokenized by ``model_folder``'s tokenizer."""
    from anekit.models import calibration
    from anekit.models.batching import load_tokenizer, tokenize
    from anekit.models.embeddings import row_inputs

    tokenizer = load_tokenizer(model_folder, config.max_length)
    inputs = []
    for ids in tokenize(tokenizer, calibration.load()):
        row = np.asarray([ids], np.int64)
        inputs.append(row_inputs(weights, config, row, np.ones(row.shape, np.float32)))
    return inputs


def row_encoder_onnx(config: ModelConfig, weights: ModelWeights) -> Any:
    """The row encoder traced and emitted as a float32 ``onnx.ModelProto`` taking any
    batch and length, attention op by op (what :func:`_build` quantizes and fuses)."""
    from anekit.frontends.numpy import compile_function
    from anekit.models.architectures import make_row_encoder
    from anekit.package.onnx_emitter import to_onnx
    from anekit.specs import TensorSpec

    taken = {ONNX_BATCH, *config.dimensions}
    length = next((size for size in TRACE_LENGTHS if size not in taken), None)
    batch = next((size for size in TRACE_BATCHES if size not in taken), None)
    if length is None or batch is None:
        raise ModelError(
            f"every trace length {TRACE_LENGTHS} or every trace batch {TRACE_BATCHES} is "
            f"also a dimension of the model ({sorted(taken)}): add a prime to them"
        )
    encode, names = make_row_encoder(config, weights)
    shapes = {"hidden": (batch, length, config.hidden_size)}  # the others are (batch, length)
    program = compile_function(
        encode,
        *(TensorSpec(shapes.get(name, (batch, length)), np.float32, name) for name in names),
        output_names=["embedding"],
        passes=False,  # the ANE passes target (B, C, 1, S); this is the CPU's layout
    )
    model = to_onnx(program)
    symbolic_batch(model, batch)
    symbolic_length(model, length)
    return model


def _build(
    config: ModelConfig,
    weights: ModelWeights,
    variant: str,
    folder: Path,
    model_folder: Path | None = None,
) -> None:
    """Trace, emit and (int8) quantize the encoder into ``folder`` (this process); int8
    sets its activation scales from calibration texts (:func:`calibration_inputs`)."""
    import onnx

    from anekit.package.onnx_attention import fuse_attention
    from anekit.package.onnx_emitter import save_onnx
    from anekit.package.onnx_int8 import quantize_int8

    model = row_encoder_onnx(config, weights)
    partial = folder / "encoder.partial.onnx"
    if variant == "int8":
        if model_folder is None:
            raise ModelError(
                "building the int8 ONNX model needs the model's folder: its activation "
                "scales are calibrated on texts its tokenizer reads"
            )
        fp32 = save_onnx(model, folder / "encoder.fp32.partial.onnx")
        feeds = calibration_inputs(config, weights, model_folder)
        model = onnx.load(str(quantize_int8(fp32, partial, calibration=feeds)))
        fp32.unlink()
    # last: ONNX Runtime's quantizer cannot type what follows a contrib op
    fuse_attention(model)
    save_onnx(model, partial).replace(folder / MODEL_FILE)


def _main(argv: list[str]) -> int:
    """The child's work (arguments ``SOURCE DIGEST VARIANT FOLDER``): build the
    model of the folder ``SOURCE`` (whose weights must have ``DIGEST``) into ``FOLDER``
    (:func:`build_model` runs it, holding the build lock)."""
    from anekit.models.config import load_config
    from anekit.models.weights import load_weights

    source, digest, variant, folder = Path(argv[0]), argv[1], argv[2], Path(argv[3])
    config = load_config(source)
    weights = load_weights(source, config)
    if weights.digest != digest:
        print(f"{source}: its weights changed (digest {weights.digest[:12]})", file=sys.stderr)
        return 2
    _build(config, weights, variant, folder, source)
    return 0


class OnnxSessions:
    """One ONNX Runtime session (for every length) of one model and variant."""

    def __init__(
        self,
        model_id: str,
        config: ModelConfig,
        weights: ModelWeights,
        *,
        variant: str = "int8",
        threads: int | None = None,
        device: str = "auto",
        source: Path | None = None,
        model_folder: Path | None = None,
    ) -> None:
        from anekit.backends.onnx import DEVICES

        if variant not in VARIANTS:
            raise ModelError(f"onnx variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        if device not in DEVICES:
            raise ModelError(f"onnx device must be one of {', '.join(DEVICES)}, got {device!r}")
        self.config, self.weights, self.variant = config, weights, variant
        self.folder = folder_for(model_id, weights, variant)
        #: ``auto``, ``cpu`` or ``cuda`` (anekit.backends.onnx.DEVICES): ``cuda``
        #: sessions that land on another provider raise ProviderMismatch.
        self.threads, self.device_choice = threads, device
        #: Rows run at once, each on a thread of its own: int8 rows run alone (one row a
        #: run, :func:`rows_per_run`), so ``threads`` of them (default: every core) run side
        #: by side, the session computing each on its caller's thread. A row's products are
        #: then too small to share two threads well: MiniLM on 1000 code chunks, 2 cores,
        #: 84 chunks/s one row at a time on two threads, 126 two rows at once on one
        #: thread each, 122 grouped 8 a run (bench/embed_throughput.py).
        self.concurrent = (threads or os.cpu_count() or 1) if rows_per_run(variant)[0] == 1 else 1
        #: The model's folder: a missing model is then built in a child process.
        self.source = source
        #: The model's folder (its tokenizer tokenizes the int8 build's calibration texts).
        self.model_folder = model_folder or source
        self._loaded: Any = None  # the session, once loaded
        self._pool: ThreadPoolExecutor | None = None

    def prepare(self) -> None:
        """Build (or find) and load the model now."""
        self._session()

    def _session(self) -> Any:
        if self._loaded is None:
            from anekit.backends.onnx import session_for

            path = build_model(
                self.config, self.weights, self.variant, self.folder, self.source, self.model_folder
            )
            threads = 1 if self.concurrent > 1 else self.threads
            self._loaded = session_for(path, threads=threads, device=self.device_choice)
        return self._loaded

    def map(self, work: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``work`` of each of ``items``, in order, :attr:`concurrent` at a time."""
        if self.concurrent <= 1 or len(items) <= 1:
            return [work(item) for item in items]
        self._session()  # loaded once, not by the first rows at the same time
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrent, thread_name_prefix="anekit-onnx")
        return list(self._pool.map(work, items))

    def close(self) -> None:
        """Stop the threads that run rows side by side (the session stays loaded)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def providers(self) -> list[str]:
        """The providers the loaded session really uses, in order; empty before it loads."""
        return [] if self._loaded is None else [str(n) for n in self._loaded.get_providers()]

    @property
    def device(self) -> str:
        """What the loaded session runs on, from its providers (``GPU (CUDA)``, ``CPU``)."""
        from anekit.backends.onnx import device_label

        return "no session loaded" if self._loaded is None else device_label(self.providers())

    def run(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Pooled embeddings of rows: ``inputs`` as :func:`anekit.models.embeddings.row_inputs`
        makes them (``hidden`` (N, S, C), ``keep`` (N, S), ...), :func:`rows_per_run` rows
        a run."""
        session = self._session()
        step = rows_per_run(self.variant)[0]
        results = []
        for start in range(0, inputs["keep"].shape[0], step):
            part = {
                name: np.ascontiguousarray(value[start : start + step], np.float32)
                for name, value in inputs.items()
            }
            (vectors,) = session.run(["embedding"], part)
            results.append(vectors)
        return np.concatenate(results) if results else np.zeros((0, self.config.hidden_size))


def __getattr__(name: str) -> Any:
    """``OnnxEncoder``: the old name of :class:`OnnxSessions` (it is sessions, not an
    :class:`~anekit.models.encoders.Encoder`), deprecated."""
    if name == "OnnxEncoder":
        import warnings

        warnings.warn(
            "anekit.models.onnx_models.OnnxEncoder is now OnnxSessions",
            DeprecationWarning,
            stacklevel=2,
        )
        return OnnxSessions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
