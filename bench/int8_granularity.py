"""Dynamic int8 weights per channel against per tensor, on the known answers.

ONNX Runtime's ``quantize_dynamic`` defaults to one scale per weight tensor; anekit's
CPU lane uses one per output channel. This embeds the 32 known-answer chunks with the
model's fp32 ONNX buckets quantized both ways and compares each with the stored fp32
reference (what lane admission does; the CPU lane's floor is 0.98).

    .venv/bin/python bench/int8_granularity.py
"""

from __future__ import annotations

import datetime
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np


def main() -> None:
    import onnxruntime

    from anekit.backends.onnx import session_for
    from anekit.models import Embedder, known_answers
    from anekit.package.onnx_emitter import quantize_int8

    answers = known_answers.load()
    embedder = Embedder(backend="onnx", variant="fp32", max_length=answers.max_length)
    encoder = embedder._onnx
    assert encoder is not None
    encoder.prepare(embedder.buckets)  # builds (or finds) the fp32 bucket models
    fp32_models = {size: encoder.folder / f"seq{size}.onnx" for size in embedder.buckets}
    print(f"{datetime.date.today()}; {platform.machine()}, Python {platform.python_version()}, "
          f"onnxruntime {onnxruntime.__version__}")  # fmt: skip
    print("| weights | min cosine | mean cosine | chunks under 0.98 |")
    print("|---|--:|--:|--:|")
    with tempfile.TemporaryDirectory() as directory:
        for label, per_channel in (("int8 per channel", True), ("int8 per tensor", False)):
            for size, source in fp32_models.items():
                target = Path(directory) / f"{label.replace(' ', '-')}-{size}.onnx"
                quantize_int8(source, target, per_channel=per_channel)
                encoder._sessions[size] = session_for(target, gpu=False)
            cosines = answers.cosines(embedder.encode(answers.texts))
            under = int(np.sum(cosines < 0.98))
            print(f"| {label} | {cosines.min():.4f} | {cosines.mean():.4f} | {under} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
