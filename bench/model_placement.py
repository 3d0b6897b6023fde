"""Placement and pass reports of the issue-17 models at real sizes: the ModernBERT package's
six buckets at granite-embedding-small-english-r2's size, and the Whisper encoder at
whisper-base's and whisper-small's.

The weights are random (transformers' own initialization, saved as Hugging Face folders):
placement and what the ANE passes rewrite depend on the shapes and the ops, not on the
weight values, so these are the figures a real checkpoint of the same configuration gets.
The simulated fidelity printed with them is of random weights and says only that nothing
overflows; a real checkpoint's fidelity needs that checkpoint (``anekit build-model FOLDER``
then ``Embedder(FOLDER, runtime="sim")``).

    .venv/bin/python bench/model_placement.py [--quick] [--save FILE.json]

``--quick``: the smallest bucket and whisper-base only. Needs the ``torch`` extra (to make
the folders).
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

from tinymodernbert import GRANITE_SMALL  # granite-embedding-small-english-r2's shape

FAMILY = "a14"
WHISPER = {
    "whisper-base": {"d_model": 512, "encoder_layers": 6, "encoder_attention_heads": 8,
                     "encoder_ffn_dim": 2048, "num_mel_bins": 80},
    "whisper-small": {"d_model": 768, "encoder_layers": 12, "encoder_attention_heads": 12,
                      "encoder_ffn_dim": 3072, "num_mel_bins": 80},
}  # fmt: skip


def _passes(program: Any) -> list[dict[str, Any]]:
    """What each ANE pass changed: its name and number of rewrites (passes that changed
    nothing are left out)."""
    report = program.pass_report
    if report is None:
        return []
    return [
        {"pass": item.name, "rewrites": len(item.changes), "notes": len(item.notes)}
        for item in report.results
        if item.changed
    ]


def _placement(program: Any) -> dict[str, Any]:
    from anekit.analysis import analyze

    (function,) = analyze(program).functions
    ops = function.compute_ops()
    return {
        "compute_ops": len(ops),
        "ane": function.on_ane(FAMILY),
        "off_ane": sorted({op.op_type for op in ops if op.device[FAMILY] != "ane"}),
        "gather": sum(op.op_type == "gather" for op in ops),
    }


def modernbert(folder: Path, buckets: tuple[int, ...]) -> dict[str, Any]:
    import torch
    from transformers import ModernBertConfig, ModernBertModel

    from anekit.models.config import load_config
    from anekit.models.embeddings import embed
    from anekit.models.encoders import LoadedModel, ReferenceEncoder
    from anekit.models.package import trace_bucket
    from anekit.models.weights import load_weights

    torch.manual_seed(0)
    ModernBertModel(ModernBertConfig(**GRANITE_SMALL)).save_pretrained(folder)
    config = load_config(folder, max_length=max(buckets))
    model = LoadedModel(folder.name, folder, config, load_weights(folder, config))
    rows = []
    for size in buckets:
        started = time.perf_counter()
        program = trace_bucket(config, model.weights, size)
        row = {"bucket": f"4x{size}", **_placement(program), "passes": _passes(program),
               "trace_s": round(time.perf_counter() - started, 1)}  # fmt: skip
        if size == buckets[0]:
            ids = np.random.default_rng(0).integers(1000, 50000, (4, size))
            keep = np.ones((4, size), np.float32)
            keep[1, size // 2 :] = 0
            hidden = embed(model.weights, config, ids)
            want = np.asarray(ReferenceEncoder(model).function(hidden, keep), np.float64)
            got = np.asarray(program(hidden, keep, backend="sim"), np.float64)
            cosine = (
                (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
            )
            row["simulated_min_cosine_random_weights"] = float(cosine.min())
        rows.append(row)
        print(
            f"ModernBERT {row['bucket']}: {row['ane']}/{row['compute_ops']} on the ANE",
            file=sys.stderr,
        )
    return {"configuration": GRANITE_SMALL, "buckets": rows}


def whisper(folder: Path, name: str) -> dict[str, Any]:
    import torch
    from transformers import WhisperConfig, WhisperModel

    from anekit.models import whisper as whisper_model

    torch.manual_seed(0)
    shape = WHISPER[name]  # the decoder (unused) kept small
    decoder = {"decoder_layers": 1, "decoder_attention_heads": shape["encoder_attention_heads"]}
    WhisperModel(WhisperConfig(**shape, **decoder)).save_pretrained(folder)
    config = whisper_model.read_config(folder)
    started = time.perf_counter()
    program = whisper_model.trace(config, whisper_model.read_weights(folder))
    row = {"model": name, **_placement(program), "passes": _passes(program),
           "trace_s": round(time.perf_counter() - started, 1),
           "query_chunks": whisper_model.query_chunks(config.positions)}  # fmt: skip
    print(f"{name} encoder: {row['ane']}/{row['compute_ops']} on the ANE", file=sys.stderr)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    from anekit.models.batching import BUCKETS

    buckets = BUCKETS[:1] if args.quick else BUCKETS
    whispers = ["whisper-base"] if args.quick else list(WHISPER)
    with tempfile.TemporaryDirectory(prefix="anekit-placement-") as scratch:
        record = {
            "command": "python bench/model_placement.py" + (" --quick" if args.quick else ""),
            "date": datetime.date.today().isoformat(),
            "machine": machine(),
            "source": source_state(),
            "family": FAMILY,
            "modernbert": modernbert(Path(scratch) / "granite-small-shape", buckets),
            "whisper": [whisper(Path(scratch) / name, name) for name in whispers],
        }
    emit(record, args.save)


if __name__ == "__main__":
    main()
