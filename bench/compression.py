"""Compressed weights per variant: package size, build time, the per-weight error check,
expected placement, and simulated fidelity to fp32, for all-MiniLM-L6-v2 and the tests'
small ModernBERT. The figures behind docs/models.md's compression table.

For each variant (``fp16`` and the compression specs of ``anekit.package.compression``)
the bucketed package is built afresh (``build_package``: six buckets, weights shared),
its files summed, its placement predicted (``anekit.analysis.analyze``: compute ops
expected on the ANE per family, and the ops a compressed-weight rule flags), and it is
run in anekit's simulator with ANE fp16 numerics:

* MiniLM: the 32 known answers (``anekit.models.known_answers``: code chunks, vectors
  of the fp32 reference), min and mean cosine;
* ModernBERT (tests/tinymodernbert.py: 4 layers, d=64, random weights, MiniLM's
  tokenizer): one batch per bucket (100 ... 500 tokens of real code) against the fp32
  NumPy path.

    .venv/bin/python bench/compression.py [--variants fp16 int8 palettize4 ...]
        [--models minilm modernbert] [--save FILE.json]

Simulated figures are fp16 numerics on this machine, not ANE measurements; placement is
anekit's prediction (docs/op-support.md), unverified on hardware.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from benchmachine import emit, machine, source_state

VARIANTS = ("fp16", "int8", "int8-b32", "int4-b32", "palettize8", "palettize6", "palettize4",
            "palettize4-g16")  # fmt: skip
COMPRESSION_RULES = ("weights.compressed", "weights.palette_scale")


def _bytes(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def _placement(path: Path) -> dict[str, Any]:
    from anekit.analysis import analyze

    report = analyze(path)
    first = report.functions[0]
    flagged = {
        rule: sum(rule in op.rules for op in first.compute_ops()) for rule in COMPRESSION_RULES
    }
    return {
        "functions": len(report.functions),
        "ane": {
            family: min(function.on_ane(family) for function in report.functions)
            for family in report.families
        },
        "compute_ops": len(first.compute_ops()),
        "flagged_ops": flagged,
    }


def _variant(model: Any, variant: str, scratch: Path, score: Any) -> dict[str, Any]:
    from anekit.models.package import build_package

    started = time.perf_counter()
    info = build_package(model, variant=variant, out=scratch / f"{variant}.mlpackage",
                         progress=lambda _: None)  # fmt: skip
    seconds = time.perf_counter() - started
    cosines = score(info.path)
    kept = (info.compression or {}).get("kept_fp16", {})
    row = {
        "variant": variant,
        "build_s": round(seconds, 1),
        "bytes": _bytes(info.path),
        "kept_fp16": len(kept),
        "min_cosine": round(float(np.min(cosines)), 6),
        "mean_cosine": round(float(np.mean(cosines)), 6),
        "placement": _placement(info.path),
    }
    print(f"  {variant}: {row['bytes'] / 1e6:.2f} MB, min cosine {row['min_cosine']}, "
          f"kept fp16 {len(kept)}, {seconds:.0f} s", flush=True)  # fmt: skip
    return row


def _minilm(variants: list[str], scratch: Path) -> dict[str, Any]:
    from anekit.embedder import Embedder
    from anekit.models import known_answers

    answers = known_answers.load()

    def score(path: Path) -> np.ndarray:
        embedder = Embedder(runtime="sim", package=path, max_length=answers.max_length)
        return np.asarray(answers.cosines(embedder.encode(answers.texts)))

    print("all-MiniLM-L6-v2", flush=True)
    rows = [_variant(None, variant, scratch, score) for variant in variants]
    return {"model": "all-MiniLM-L6-v2", "fidelity": "32 known answers vs fp32", "rows": rows}


def _modernbert(variants: list[str], scratch: Path) -> dict[str, Any]:
    from anekit.embedder import Embedder
    from anekit.models.known_answers import row_cosines
    from tinymodernbert import BUCKET_LENGTHS, ids_of_lengths, tiny_modernbert

    folder = tiny_modernbert(scratch / "tiny-modernbert")
    token_ids = ids_of_lengths(folder, BUCKET_LENGTHS)
    reference = Embedder(folder, runtime="numpy").embed_ids(token_ids)

    def score(path: Path) -> np.ndarray:
        simulated = Embedder(folder, runtime="sim", package=path).embed_ids(token_ids)
        return np.asarray(row_cosines(simulated, reference))

    print("tiny ModernBERT", flush=True)
    rows = [_variant(folder, variant, scratch, score) for variant in variants]
    return {
        "model": "tests/tinymodernbert.py: 4 layers (2 global, 2 sliding, window 8), d=64, "
        "random weights",
        "fidelity": f"one batch per bucket ({', '.join(map(str, BUCKET_LENGTHS))} tokens) "
        "vs the fp32 NumPy path",
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--models", nargs="+", default=["minilm", "modernbert"],
                        choices=["minilm", "modernbert"])  # fmt: skip
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    record: dict[str, Any] = {
        "command": "python bench/compression.py " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "source": source_state(),
        "note": "simulated fp16 numerics and predicted placement, not ANE measurements",
    }
    with tempfile.TemporaryDirectory(prefix="anekit-compression-") as scratch:
        models = {"minilm": _minilm, "modernbert": _modernbert}
        record["models"] = [
            models[name](list(args.variants), Path(scratch)) for name in args.models
        ]
    emit(record, args.save)


if __name__ == "__main__":
    main()
