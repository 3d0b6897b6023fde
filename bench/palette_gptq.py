"""4-bit palettes with GPTQ's error feedback, against plain k-means palettes, on MiniLM's
fp32 path (issue 34's 4-bit target: min cosine >= 0.99 on the known answers).

Each of the 36 linear weights (6 layers: q, k, v, out, up, down) gets a 16-entry palette
from 1-D k-means over its values (per tensor). *Nearest* maps every weight to its nearest
entry (what coremltools' k-means palettizer does). *GPTQ* maps the input columns one by
one, largest Hessian diagonal first, and moves the error of each column onto the columns
not yet mapped through the inverse of ``H = X X^T`` (Frantar et al., "GPTQ", 2022, its
algorithm 1 with a palette for the grid; 1 % dampening, blocks of 128), where ``X`` are
the layer's inputs on anekit's calibration texts (232 pieces of the standard library,
none of them a known answer): every token (``all``), every token scaled to unit length
(``unit``: the [CLS] and [SEP] rows' large activations otherwise dominate ``H``), or the
tokens between [CLS] and [SEP] (``inner``). The weights go back into the fp32 NumPy
encoder, which embeds the 32 known answers; min and mean cosine against their fp32
vectors. Also printed: each route's layer-wise objective ``tr((W-Q) H (W-Q)^T)``
relative to nearest, summed over the weights.

    .venv/bin/python bench/palette_gptq.py [--save FILE.json]

Figures of the fp32 path, not of a package in the simulator nor of the ANE.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmachine import emit, machine, source_state

NAMES = ("q", "k", "v", "out", "up", "down")  # the order bert.make_encoder calls them
HESSIANS = ("all", "unit", "inner")
BITS = 4


def kmeans_palette(values: np.ndarray, entries: int, iterations: int = 30) -> np.ndarray:
    """A sorted palette of ``entries`` values: Lloyd's 1-D k-means from quantiles."""
    ordered = np.sort(values.ravel().astype(np.float64))
    palette = np.quantile(ordered, (np.arange(entries) + 0.5) / entries)
    for _ in range(iterations):
        nearest = np.searchsorted((palette[1:] + palette[:-1]) / 2, ordered)
        sums = np.bincount(nearest, ordered, entries)
        counts = np.bincount(nearest, minlength=entries)
        moved = np.sort(np.where(counts > 0, sums / np.maximum(counts, 1), palette))
        if np.allclose(moved, palette):
            break
        palette = moved
    return palette


def to_palette(values: np.ndarray, palette: np.ndarray) -> np.ndarray:
    return palette[np.searchsorted((palette[1:] + palette[:-1]) / 2, values)]


def nearest(weight: np.ndarray, hessian: np.ndarray) -> np.ndarray:
    return to_palette(weight, kmeans_palette(weight, 2**BITS)).astype(np.float32)


def gptq(weight: np.ndarray, hessian: np.ndarray, block: int = 128) -> np.ndarray:
    """``weight`` (out, in) on its k-means palette, column errors fed forward (module doc)."""
    palette = kmeans_palette(weight, 2**BITS)
    w = weight.astype(np.float64).copy()
    h = hessian.copy()
    dead = np.diag(h) == 0
    h[dead, dead] = 1.0
    w[:, dead] = 0.0
    order = np.argsort(-np.diag(h))
    w, h = w[:, order], h[order][:, order]
    h += 0.01 * np.mean(np.diag(h)) * np.eye(len(h))
    inverse = np.linalg.cholesky(np.linalg.inv(h)).T  # upper: U^T U = H^-1
    mapped = np.zeros_like(w)
    columns = w.shape[1]
    for first in range(0, columns, block):
        last = min(first + block, columns)
        part, errors = w[:, first:last].copy(), np.zeros((w.shape[0], last - first))
        corner = inverse[first:last, first:last]
        for i in range(last - first):
            mapped[:, first + i] = to_palette(part[:, i], palette)
            errors[:, i] = (part[:, i] - mapped[:, first + i]) / corner[i, i]
            part[:, i:] -= np.outer(errors[:, i], corner[i, i:])
        w[:, last:] -= errors @ inverse[first:last, last:]
    return mapped[:, np.argsort(order)].astype(np.float32)


def layer_error(weight: np.ndarray, mapped: np.ndarray, hessian: np.ndarray) -> float:
    """GPTQ's layer-wise objective ``tr((W-Q) H (W-Q)^T)``."""
    error = weight.astype(np.float64) - mapped
    return float(np.einsum("ij,jk,ik->", error, hessian, error))


def hessians(embedder: Any, texts: list[str]) -> dict[str, dict[tuple[int, str], np.ndarray]]:
    """Each linear weight's ``X X^T`` over ``texts``, per :data:`HESSIANS` kind."""
    from anekit import nn

    encoder = embedder.encoder
    found: dict[str, dict[tuple[int, str], np.ndarray]] = {kind: {} for kind in HESSIANS}
    state: dict[str, Any] = {}
    real_conv, real_function = nn.conv1x1, encoder.function

    def conv(x: Any, weight: Any, bias: Any = None) -> Any:
        layer, which = divmod(state["calls"], len(NAMES))
        state["calls"] += 1
        rows = np.asarray(x, np.float64)[:, :, 0, :]
        kept = [np.flatnonzero(keep) for keep in state["keep"]]
        tokens = np.concatenate([rows[b][:, at] for b, at in enumerate(kept)], axis=1)
        unit = tokens / np.maximum(np.linalg.norm(tokens, axis=0, keepdims=True), 1e-12)
        inner = np.concatenate([rows[b][:, at[1:-1]] for b, at in enumerate(kept)], axis=1)
        key = (layer, NAMES[which])
        for kind, columns in (("all", tokens), ("unit", unit), ("inner", inner)):
            found[kind][key] = found[kind].get(key, 0.0) + columns @ columns.T
        return real_conv(x, weight, bias)

    def function(hidden: Any, keep: Any) -> Any:
        state["calls"], state["keep"] = 0, np.asarray(keep).astype(bool)
        return real_function(hidden, keep)

    nn.conv1x1, encoder.function = conv, function  # type: ignore[assignment]
    try:
        embedder.encode(texts)
    finally:
        nn.conv1x1, encoder.function = real_conv, real_function  # type: ignore[assignment]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--save", type=Path, default=None)
    args = parser.parse_args()
    from anekit.embedder import Embedder
    from anekit.models import calibration, known_answers
    from anekit.models.bert import make_encoder

    embedder = Embedder(runtime="numpy")
    encoder = embedder.encoder
    config, weights = encoder.config, encoder.weights
    answers = known_answers.load()
    started = time.perf_counter()
    found = hessians(embedder, calibration.load())
    record: dict[str, Any] = {
        "command": "python bench/palette_gptq.py " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "source": source_state(),
        "note": "fp32 NumPy path with palettized weights; not a package, not the ANE",
        "hessians_s": round(time.perf_counter() - started, 1),
        "routes": [],
    }

    def route(label: str, kind: str, quantize: Callable[..., np.ndarray]) -> None:
        started = time.perf_counter()
        layers, objective, baseline = [], 0.0, 0.0
        for number, layer in enumerate(weights.layers):
            changed = {}
            for name in NAMES:
                weight, hessian = getattr(layer, name), found[kind][(number, name)]
                changed[name] = quantize(weight, hessian)
                objective += layer_error(weight, changed[name], hessian)
                baseline += layer_error(weight, nearest(weight, hessian), hessian)
            layers.append(dataclasses.replace(layer, **changed))
        quantized = dataclasses.replace(weights, read_layers=lambda: tuple(layers))
        encoder.function = make_encoder(config, quantized, np.float32)
        cosines = answers.cosines(embedder.encode(answers.texts))
        row = {
            "route": label,
            "hessian": kind,
            "min_cosine": round(float(cosines.min()), 4),
            "mean_cosine": round(float(cosines.mean()), 4),
            "objective_vs_nearest": round(objective / baseline, 3),
            "seconds": round(time.perf_counter() - started, 1),
        }
        record["routes"].append(row)
        print(row, flush=True)

    route("nearest (k-means palette)", "all", nearest)
    for kind in HESSIANS:
        route("gptq", kind, gptq)
    emit(record, args.save)


if __name__ == "__main__":
    main()
