"""Dynamic int8 weights per channel against per tensor, on the known answers, in both
layouts anekit emits to ONNX.

- ``rows``: the CPU lane's encoder (``make_row_encoder``, traced without the ANE passes):
  (B, S, C) activations, linear layers as MatMul.
- ``ane``: the packages' encoder (``make_encoder``) through the ANE passes: (B, C, 1, S)
  activations, linear layers as 1x1 Conv.

Each layout's fp32 ONNX buckets (batch 8, buckets 128/192/256) embed the 32
known-answer chunks as they are and quantized: by ``quantize_int8`` per channel (the
default: 1x1 convolutions become MatMul first), ``quantize_int8`` per tensor, and, for
the ``ane`` layout, two ways that keep the convolutions: ONNX Runtime's
``quantize_dynamic(per_channel=True)`` as it is (what ``quantize_int8`` did before: its
``ConvInteger`` is per tensor, whatever ``per_channel`` says) and
``quantize_convs_per_channel`` alone (per channel, still ``ConvInteger``). Each is
compared with the stored fp32 reference (what lane admission does; the CPU lane's floor
is 0.98) and timed: the median of ``--runs`` passes over the 32 chunks, one intra-op
thread, after one warm-up pass.

    .venv/bin/python bench/int8_granularity.py [--runs 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import datetime
import logging
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

BATCH = 8
LAYOUTS = ("rows", "ane")


def _build(layout: str, config: Any, weights: Any, size: int, folder: Path) -> Path:
    import anekit
    from anekit.models.bert import make_encoder, make_row_encoder
    from anekit.package.onnx_emitter import save_onnx, to_onnx

    hidden = config.hidden_size
    if layout == "rows":
        program = anekit.compile(
            make_row_encoder(config, weights),
            anekit.TensorSpec((BATCH, size, hidden), np.float32, "hidden"),
            anekit.TensorSpec((BATCH, size), np.float32, "keep"),
            output_names=["embedding"],
            passes=False,
        )
    else:
        program = anekit.compile(
            make_encoder(config, weights, np.float32),
            anekit.TensorSpec((BATCH, hidden, 1, size), np.float32, "hidden"),
            anekit.TensorSpec((BATCH, size), np.float32, "keep"),
            output_names=["embedding"],
        )
    return save_onnx(to_onnx(program), folder / f"{layout}-{size}.onnx")


def _ort_as_is(source: Path, target: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(source),
        str(target),
        per_channel=True,
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Conv"],
    )
    return target


def _convs_kept(source: Path, target: Path) -> Path:
    import onnx

    from anekit.package.onnx_int8 import dynamic_int8, quantize_convs_per_channel

    model = onnx.load(str(source))
    quantize_convs_per_channel(model)
    return dynamic_int8(model, target)


def _variants(layout: str) -> Iterator[tuple[str, Callable[[Path, Path], Path] | None]]:
    from anekit.package.onnx_int8 import quantize_int8

    yield "fp32", None
    yield "int8 per channel", lambda s, t: quantize_int8(s, t, per_channel=True)
    if layout == "ane":
        yield "int8 per channel, convs kept (ConvInteger)", _convs_kept
    yield "int8 per tensor", lambda s, t: quantize_int8(s, t, per_channel=False)
    if layout == "ane":
        yield "ORT quantize_dynamic as is (Conv per tensor)", _ort_as_is


def _encode(
    sessions: dict[int, Any], layout: str, groups: list[Any], weights: Any, config: Any
) -> np.ndarray:
    """The (not normalized) embedding of every known-answer chunk, in order."""
    from anekit.models.embeddings import embed, row_inputs

    count = sum(len(batch.indices) for batch in groups)
    found = np.zeros((count, config.hidden_size), np.float32)
    for batch in groups:
        hidden = (
            row_inputs(weights, config, batch.ids, batch.keep)["hidden"]
            if layout == "rows"
            else embed(weights, config, batch.ids)
        )
        (vectors,) = sessions[batch.bucket].run(
            None, {"hidden": hidden, "keep": batch.keep.astype(np.float32)}
        )
        found[batch.indices] = vectors[: len(batch.indices)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import onnxruntime

    from anekit.backends.onnx import session_for
    from anekit.models import known_answers
    from anekit.models.batching import batches, buckets_for, load_tokenizer, tokenize
    from anekit.models.config import load_config
    from anekit.models.registry import resolve
    from anekit.models.weights import load_weights

    logging.getLogger().setLevel(logging.ERROR)  # ORT's pre-processing hint
    answers = known_answers.load()
    _, folder = resolve(None)
    config = load_config(folder, max_length=answers.max_length)
    weights = load_weights(folder, config)
    ids = tokenize(load_tokenizer(folder, config.max_length), answers.texts)
    buckets = buckets_for(config.max_length)
    groups = list(batches(ids, buckets, config.pad_token_id, BATCH))

    print(
        f"{datetime.date.today()}; {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, onnxruntime {onnxruntime.__version__}; "
        f"batch {BATCH}, buckets {'/'.join(map(str, buckets))}, {args.threads} thread(s), "
        f"median of {args.runs}"
    )
    print("| layout | weights | min cosine | mean cosine | chunks under 0.98 | s | MB |")
    print("|---|---|--:|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        for layout in LAYOUTS:
            sources = {size: _build(layout, config, weights, size, work) for size in buckets}
            for label, quantize in _variants(layout):
                models = {
                    size: (
                        source
                        if quantize is None
                        else quantize(source, work / f"{layout}-{size}-{len(label)}.onnx")
                    )
                    for size, source in sources.items()
                }
                sessions = {
                    size: session_for(path, args.threads, device="cpu")
                    for size, path in models.items()
                }

                cosines = answers.cosines(_encode(sessions, layout, groups, weights, config))
                seconds = []
                for _ in range(args.runs):
                    started = time.perf_counter()
                    _encode(sessions, layout, groups, weights, config)
                    seconds.append(time.perf_counter() - started)
                megabytes = sum(path.stat().st_size for path in models.values()) / 1e6
                print(
                    f"| {layout} | {label} | {cosines.min():.4f} | {cosines.mean():.4f} | "
                    f"{int(np.sum(cosines < 0.98))} | {statistics.median(seconds):.3f} | "
                    f"{megabytes:.0f} |",
                    flush=True,
                )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
