"""ModernBERT's fidelity on every path, per bucket, on the tests' small random-weight model
(tests/tinymodernbert.py: no download): the fp32 NumPy path against transformers'
``ModernBertModel``, then the fp16 and int8 packages in the simulator (one batch per
bucket) and ONNX Runtime fp32 and int8 against that path. The figures behind
docs/models.md's ModernBERT table; the tests assert their floors.

    .venv/bin/python bench/model_fidelity.py [--save FILE.json]

Simulated figures are fp16 numerics on this machine, not ANE measurements. Needs the
``torch`` extra (transformers builds the model and is the reference).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from benchmachine import emit, machine, source_state

from tinymodernbert import BUCKET_LENGTHS, ids_of_lengths, tiny_modernbert


def _cosines(got: np.ndarray, want: np.ndarray) -> list[float]:
    from anekit.models.known_answers import row_cosines

    return [round(float(value), 7) for value in row_cosines(got, want)]


def _transformers(folder: Path, token_ids: list[list[int]]) -> np.ndarray:
    """Mean-pooled, normalized ``ModernBertModel`` states of each row, run alone."""
    import torch
    from transformers import ModernBertModel

    model: Any = ModernBertModel.from_pretrained(folder, attn_implementation="eager")
    model.eval()
    rows = []
    with torch.no_grad():
        for ids in token_ids:
            states = model(input_ids=torch.tensor([ids])).last_hidden_state[0].numpy()
            mean = states.astype(np.float64).mean(0)
            rows.append(mean / np.linalg.norm(mean))
    return np.asarray(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anekit-fidelity-") as scratch:
        os.environ["ANEKIT_HOME"] = scratch  # packages and ONNX models built afresh
        from anekit.analysis import analyze
        from anekit.embedder import Embedder
        from anekit.models.package import build_package

        folder = tiny_modernbert(Path(scratch) / "tiny-modernbert")
        token_ids = ids_of_lengths(folder, BUCKET_LENGTHS)
        reference = Embedder(folder, runtime="numpy").embed_ids(token_ids)
        record: dict[str, Any] = {
            "command": "python bench/model_fidelity.py",
            "date": datetime.date.today().isoformat(),
            "machine": machine(),
            "source": source_state(),
            "model": "tests/tinymodernbert.py: 4 layers (2 global, 2 sliding, window 8), d=64",
            "lengths": list(BUCKET_LENGTHS),
            "fp32_vs_transformers": _cosines(reference, _transformers(folder, token_ids)),
        }
        for variant in ("fp16", "int8"):
            started = time.perf_counter()
            target = Path(scratch) / f"tiny-{variant}.mlpackage"
            info = build_package(folder, variant=variant, out=target, progress=lambda _: None)
            seconds = time.perf_counter() - started
            simulated = Embedder(folder, runtime="sim", package=info.path).embed_ids(token_ids)
            record[f"package_{variant}"] = {
                "build_s": round(seconds, 1),
                "simulated_vs_fp32": _cosines(simulated, reference),
                "placement": {
                    function.name: f"{function.on_ane('a14')}/{len(function.compute_ops())}"
                    for function in analyze(info.path).functions
                },
            }
        for variant in ("fp32", "int8"):
            onnx = Embedder(folder, runtime="onnx", variant=variant).embed_ids(token_ids)
            record[f"onnx_{variant}_vs_fp32"] = _cosines(onnx, reference)
    emit(record, args.save)


if __name__ == "__main__":
    main()
