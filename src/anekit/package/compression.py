"""Compressed weights for Core ML packages, with an error check per weight.

A spec names how a package stores its weights; coremltools' own compression utilities
(``coremltools.optimize.coreml``: its k-means and linear quantizers) do the work:

=================== ======================================================== ==========
spec                weights                                                  opset
=================== ======================================================== ==========
``fp16``            as the program holds them (coremltools' fp16 pipeline)
``int8``            linear symmetric int8, one scale per output channel      iOS16
``int4``            the same in 4 bits                                       iOS18
``int8-b32``        linear symmetric int8, one scale per block of 32 inputs  iOS18
``int4-b32``        the same in 4 bits                                       iOS18
``palettize4``      a k-means palette (LUT) of 2^4 fp16 values per tensor;   iOS16
                    ``palettize1/2/3/6/8`` likewise
``palettize4-g16``  one palette per group of 16 output channels              iOS18
=================== ======================================================== ==========

Any block or group size is accepted (``int4-b64``, ``palettize6-g32``). The palettes
decompress with ``constexpr_lut_to_dense`` and the linear formats with
``constexpr_affine_dequantize`` (iOS16) or ``constexpr_blockwise_shift_scale`` (iOS18);
anekit's simulator decompresses them with coremltools' definition of each op.

**The error check.** After compressing, every weight is decompressed again and compared
with the original: its relative error ``|W - W'| / |W|`` (Frobenius norms) is the relative
RMS change of the layer's output for inputs whose features are independent with equal
variance. A weight whose error exceeds ``max_error`` (default :data:`MAX_ERROR`, 0.2) is
kept in fp16 and the model is compressed again without it. The default guards against a
layer turned to noise, not against the ordinary loss of a format: on all-MiniLM-L6-v2
the largest error is 0.021 at int8 per channel, 0.0065 at int8 in blocks of 32, 0.0094
for an 8-bit palette, 0.11 at int4 in blocks of 32 and 0.155 for a 4-bit palette, while
2-bit palettes (reported to turn a language model to gibberish, ane-knowledge.md §2
rule 26) exceed it. Weights coremltools does not compress (no more values than its
``weight_threshold``, 2048, or a shape the block or group size does not divide) stay
fp16 too. The :class:`CompressionReport` names every weight and what became of it.

>>> Compression.parse("palettize4-g16").describe()
'4-bit k-means palette per group of 16 output channels'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from anekit.errors import ProgramError

#: Named specs offered by ``anekit build-model --variant`` (any spec :meth:`Compression.parse`
#: accepts also works).
PRESETS = ("fp16", "int8", "int8-b32", "int4-b32", "palettize8", "palettize6", "palettize4",
           "palettize4-g16")  # fmt: skip
#: Default bound on a weight's relative error (see the module's docstring).
MAX_ERROR = 0.2
#: coremltools' default ``weight_threshold``: weights of no more values stay fp16.
WEIGHT_THRESHOLD = 2048
#: Palette sizes coremltools' ``OpPalettizerConfig`` takes (``nbits``).
PALETTE_BITS = (1, 2, 3, 4, 6, 8)
#: Core ML specification version of the iOS18 / macOS15 opset (``ct.target.iOS18``).
IOS18_SPEC = 9
#: Metadata key of a package's compression report (spec, bound, weights kept in fp16).
METADATA_KEY = "anekit.compression"

_SPEC = re.compile(
    r"(?:(?P<linear>int8|int4)(?:-b(?P<block>\d+))?"
    r"|palettize(?P<bits>\d)(?:-g(?P<group>\d+))?)"
)


@dataclass(frozen=True)
class Compression:
    """How weights are stored: ``method`` ``"linear"`` or ``"palettize"``, ``bits``, its
    ``granularity`` (``per_channel``/``per_block`` for linear, ``per_tensor``/
    ``per_grouped_channel`` for palettes), the block or group ``size``, and the error
    bound above which a weight stays fp16."""

    method: str
    bits: int
    granularity: str
    size: int | None = None
    max_error: float | None = None

    @classmethod
    def parse(
        cls, spec: str | Compression, *, max_error: float | None = None
    ) -> Compression | None:
        """The compression a spec names (None for ``fp16``); a clear error otherwise. A
        :class:`Compression` passes through (with ``max_error`` when given)."""
        if isinstance(spec, Compression):
            return spec if max_error is None else spec.with_max_error(max_error)
        text = str(spec).strip().lower()
        if text == "fp16":
            return None
        match = _SPEC.fullmatch(text)
        if match is None:
            raise ProgramError(
                f"unknown weight compression {spec!r}: use fp16, int8 or int4 (per output "
                "channel), int8-bN or int4-bN (blocks of N inputs), palettizeB (a B-bit "
                "palette per tensor, B in 1, 2, 3, 4, 6, 8) or palettizeB-gN (per group of N "
                f"output channels); presets: {', '.join(PRESETS)}"
            )
        if match["linear"]:
            bits = int(match["linear"].removeprefix("int"))
            size = _size(match["block"], spec)
            made = cls("linear", bits, "per_block" if size else "per_channel", size, max_error)
        else:
            bits = int(match["bits"])
            if bits not in PALETTE_BITS:
                raise ProgramError(
                    f"{spec!r}: a palette has {', '.join(map(str, PALETTE_BITS))} bits, not {bits}"
                )
            size = _size(match["group"], spec)
            granularity = "per_grouped_channel" if size else "per_tensor"
            made = cls("palettize", bits, granularity, size, max_error)
        if max_error is not None and not (max_error > 0 and math.isfinite(max_error)):
            raise ProgramError(f"max_error must be a positive number, got {max_error!r}")
        return made

    @property
    def name(self) -> str:
        """The spec this compression parses from (``int4-b32``, ``palettize4``)."""
        if self.method == "linear":
            return f"int{self.bits}" + (f"-b{self.size}" if self.size else "")
        return f"palettize{self.bits}" + (f"-g{self.size}" if self.size else "")

    @property
    def bound(self) -> float:
        """The relative weight error above which a weight stays fp16."""
        return self.max_error if self.max_error is not None else MAX_ERROR

    @property
    def needs_ios18(self) -> bool:
        """Whether the format exists only in the iOS18 / macOS15 opset (coremltools
        refuses it for an older target)."""
        if self.method == "linear":
            return self.bits == 4 or self.granularity == "per_block"
        return self.bits == 3 or self.granularity == "per_grouped_channel"

    def with_max_error(self, max_error: float) -> Compression:
        return replace(self, max_error=max_error)

    def describe(self) -> str:
        if self.method == "linear":
            where = f"per block of {self.size} inputs" if self.size else "per output channel"
            return f"int{self.bits} linear symmetric, one scale {where}"
        where = f"per group of {self.size} output channels" if self.size else "per tensor"
        return f"{self.bits}-bit k-means palette {where}"

    def op_config(self, *, skip: frozenset[str] = frozenset()) -> Any:
        """coremltools' ``OptimizationConfig`` for this compression; the const ops named
        in ``skip`` stay uncompressed."""
        import coremltools.optimize.coreml as cto

        if self.method == "linear":
            config: Any = cto.OpLinearQuantizerConfig(
                mode="linear_symmetric",
                dtype=f"int{self.bits}",
                granularity=self.granularity,
                **({"block_size": self.size} if self.size else {}),
                weight_threshold=WEIGHT_THRESHOLD,
            )
        else:
            config = cto.OpPalettizerConfig(
                mode="kmeans",
                nbits=self.bits,
                granularity=self.granularity,
                **({"group_size": self.size} if self.size else {}),
                weight_threshold=WEIGHT_THRESHOLD,
            )
        return cto.OptimizationConfig(
            global_config=config, op_name_configs=dict.fromkeys(sorted(skip))
        )


def _size(text: str | None, spec: str) -> int | None:
    if text is None:
        return None
    size = int(text)
    if size < 1:
        raise ProgramError(f"{spec!r}: a block or group size is a positive number")
    return size


@dataclass(frozen=True)
class WeightOutcome:
    """What became of one weight: its const op, the op that reads it, its shape, its
    relative error once compressed (None: not compressed) and, when it stayed fp16, why."""

    name: str
    reader: str
    shape: tuple[int, ...]
    error: float | None
    kept_because: str | None = None

    @property
    def compressed(self) -> bool:
        return self.kept_because is None


@dataclass
class CompressionReport:
    """The weights of one program and what a compression did to each."""

    spec: str
    bound: float
    weights: list[WeightOutcome] = field(default_factory=list)

    def kept(self) -> list[WeightOutcome]:
        """The weights left in fp16, each with its reason."""
        return [weight for weight in self.weights if not weight.compressed]

    def max_error(self) -> float:
        """The largest relative error among the compressed weights (0 when none)."""
        return max((w.error or 0.0 for w in self.weights if w.compressed), default=0.0)

    def summary(self) -> str:
        done = sum(weight.compressed for weight in self.weights)
        text = (
            f"{self.spec}: {done} of {len(self.weights)} weights compressed, "
            f"largest relative error {self.max_error():.4f} (bound {self.bound:.4f})"
        )
        kept = [f"{w.name} ({w.kept_because})" for w in self.kept()]
        if len(kept) > 4:
            kept = [*kept[:3], f"{len(kept) - 3} more"]
        return text + ("; kept fp16: " + "; ".join(kept) if kept else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "bound": self.bound,
            "weights": [
                {
                    "name": w.name,
                    "reader": w.reader,
                    "shape": list(w.shape),
                    "error": None if w.error is None else round(w.error, 6),
                    "kept_because": w.kept_because,
                }
                for w in self.weights
            ],
        }

    def metadata(self) -> str:
        """The report in short for a package's metadata: spec, bound, weights kept fp16."""
        kept = {w.name: w.kept_because for w in self.kept()}
        return json.dumps({"spec": self.spec, "bound": self.bound, "kept_fp16": kept})


def compress_model(
    model: Any, compression: Compression | str | None
) -> tuple[Any, CompressionReport]:
    """``model`` (a coremltools ``MLModel`` of an ML program) with its weights compressed,
    and the report of every weight. Weights over the error bound are kept fp16 (the
    model is compressed again without them); a format the model's opset lacks is an
    error naming both."""
    chosen = None if compression is None else Compression.parse(compression)
    if chosen is None:
        return model, CompressionReport("fp16", 0.0, [])
    version = int(model.get_spec().specificationVersion)
    if chosen.needs_ios18 and version < IOS18_SPEC:
        raise ProgramError(
            f"{chosen.name} ({chosen.describe()}) needs the iOS18 / macOS15 opset; this "
            f"program targets an older one (Core ML specification {version}): compile with "
            "deployment_target='macOS15' or choose int8 or palettize4/6/8"
        )
    originals = dict(_weights(model._mil_program))
    if not originals:
        return model, CompressionReport(chosen.name, chosen.bound, [])
    from anekit._coremltools import quiet_passes

    skipped: dict[str, float] = {}  # weight -> its error when compressed
    while True:
        with quiet_passes():
            compressed = _compressor(chosen)(model, chosen.op_config(skip=frozenset(skipped)))
        outcomes = _outcomes(chosen, originals, compressed._mil_program, skipped)
        over = {
            w.name: w.error
            for w in outcomes
            if w.compressed and w.error is not None and w.error > chosen.bound
        }
        if not over:
            return compressed, CompressionReport(chosen.name, chosen.bound, outcomes)
        skipped.update(over)


def _compressor(chosen: Compression) -> Any:
    import coremltools.optimize.coreml as cto

    return cto.linear_quantize_weights if chosen.method == "linear" else cto.palettize_weights


def _weights(program: Any) -> Iterator[tuple[tuple[str, str], tuple[str, np.ndarray]]]:
    """(reader op, input name) -> (const op name, value) for every float constant a
    compressible op reads."""
    # Here, not at the top: `anekit build-model` parses a spec with this module and names
    # a bad argument before the op knowledge loads (tests/cli/test_cli_usage_errors.py).
    from anekit.ops.groups import WEIGHT_READERS

    for function in program.functions.values():
        for op in function.operations:
            if op.op_type not in WEIGHT_READERS:
                continue
            for key, var in op.inputs.items():
                source = getattr(var, "op", None)
                if source is None or source.op_type != "const" or var.val is None:
                    continue
                value = np.asarray(var.val)
                if value.dtype.kind == "f" and value.ndim >= 2:
                    yield (op.name, key), (source.name, value)


def _outcomes(
    chosen: Compression,
    originals: dict[tuple[str, str], tuple[str, np.ndarray]],
    program: Any,
    skipped: dict[str, float],
) -> list[WeightOutcome]:
    from anekit.ops.defs.misc import decompressed

    readers = {
        (op.name, key): var
        for function in program.functions.values()
        for op in function.operations
        for key, var in op.inputs.items()
    }
    outcomes: dict[str, WeightOutcome] = {}
    for (reader, key), (name, original) in originals.items():
        if name in outcomes:
            continue
        var = readers.get((reader, key))
        source = getattr(var, "op", None)
        label = f"{reader}.{key}"
        shape = tuple(int(n) for n in original.shape)
        if source is not None and source.op_type.startswith("constexpr_"):
            value = np.asarray(decompressed(source), np.float64)
            reference = original.astype(np.float64)
            scale = float(np.linalg.norm(reference)) or 1.0
            error = float(np.linalg.norm(value - reference)) / scale
            outcomes[name] = WeightOutcome(name, label, shape, error)
        elif name in skipped:
            error = skipped[name]
            why = f"relative error {error:.4g} above {chosen.bound:.4g}"
            outcomes[name] = WeightOutcome(name, label, shape, error, why)
        else:
            outcomes[name] = WeightOutcome(name, label, shape, None, _why_kept(chosen, original))
    return list(outcomes.values())


def _why_kept(chosen: Compression, original: np.ndarray) -> str:
    if original.size <= WEIGHT_THRESHOLD:
        return f"{original.size} values, not more than {WEIGHT_THRESHOLD}"
    axis, what = (1, "block") if chosen.method == "linear" else (0, "group")
    if chosen.size and original.shape[axis] % chosen.size:
        shape = tuple(original.shape)
        return f"axis {axis} of {shape} is not divisible by the {what} size {chosen.size}"
    return "left uncompressed by coremltools (its log says why)"


__all__ = [
    "MAX_ERROR",
    "METADATA_KEY",
    "PRESETS",
    "WEIGHT_THRESHOLD",
    "Compression",
    "CompressionReport",
    "WeightOutcome",
    "compress_model",
]
