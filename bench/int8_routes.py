"""Ways to quantize MiniLM's activations to int8 for the CPU lane, side by side: fidelity
to fp32 and speed, on one machine in one run.

Each route starts from anekit's float32 row encoder (``row_encoder_onnx``: the ONNX model
the onnx backend builds, attention op by op) with int8 weights per output channel, and
ends with attention fused (``fuse_attention``, as the backend's models are); they differ
in the activations' scales:

- ``dynamic``: one scale per run for every linear layer's input (ONNX Runtime's
  ``DynamicQuantizeLinear``; anekit before its scales were calibrated);
- ``fp32-down``: the same, with the down projections (the MLP's second layers, which lose
  the most) kept float32: "fp32 for the few layers that lose the most";
- ``static``: scales fixed from the calibration texts (ONNX Runtime's ``quantize_static``,
  QDQ, MinMax), no run-time scale;
- ``per-row``: every linear layer's input with one scale per row (token)
  (:func:`anekit.package.activation_scales.per_token` on all of them);
- ``smooth+per-row-all-down``: SmoothQuant on the LayerNorm-fed inputs and one scale per
  row for every down projection;
- ``smooth``: SmoothQuant on the LayerNorm-fed inputs, one scale per run everywhere;
- ``smooth+per-row-down``: SmoothQuant on the LayerNorm-fed inputs and one scale per row
  for the down projections whose rows are uneven on the calibration texts
  (``ROW_SPREAD``): what ``quantize_int8(calibration=...)`` does (the default);
- ``... (s8 weights)`` and ``... (u8 weights)``: that route with each int8 weight form
  (:mod:`anekit.package.int8_kernels`): int8 weights, which AVX2 machines without VNNI
  multiply with int16 saturation, and uint8 weights, which no kernel saturates. Every
  other route stores its weights in the form this machine takes (the record says which).

Fidelity: min and mean cosine to anekit's NumPy fp32 path on the known answers (32 code
chunks), the short-text fixture (tests/fixtures/short_texts.json, 102 texts) and the
calibration texts themselves (anekit.models.calibration: in-sample, what ``ALPHA`` was chosen
on); ``--texts FILE`` adds a JSON list of more texts. Each text runs alone (one row, as the
CPU lane runs int8). Speed: one intra-op thread per session, every route embeds the same
rows (the known answers and the 60 longest calibration texts) once per pass, the routes'
order alternating from pass to pass after a warm-up pass; the median pass and the range.

    .venv/bin/python bench/int8_routes.py [--passes 5] [--texts FILE] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmachine import emit, machine, source_state

ROOT = Path(__file__).resolve().parent.parent
SHORT_TEXTS = ROOT / "tests" / "fixtures" / "short_texts.json"
SPEED_ROWS = 60
ROUTES = (
    "dynamic",
    "fp32-down",
    "static",
    "per-row",
    "smooth",
    "smooth+per-row-all-down",
    "smooth+per-row-down",
    "smooth+per-row-down (s8 weights)",
    "smooth+per-row-down (u8 weights)",
)


def build_routes(
    source: Path, feeds: list[dict[str, np.ndarray]], folder: Path
) -> Iterator[tuple[str, Path]]:
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    from anekit.package import activation_scales
    from anekit.package.int8_kernels import WEIGHT_FORMS
    from anekit.package.onnx_int8 import dynamic_int8, quantize_int8

    def fresh() -> Any:
        return onnx.load(str(source))

    yield "dynamic", quantize_int8(source, folder / "dynamic.onnx")

    model = fresh()
    down = activation_scales.name_layers(model, lambda layer: layer.down_projection)
    yield "fp32-down", dynamic_int8(model, folder / "fp32-down.onnx", exclude=down)

    class Feeds(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.items = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    quantize_static(
        str(source),
        str(folder / "static.onnx"),
        Feeds(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
    )
    yield "static", folder / "static.onnx"

    model = fresh()
    every = activation_scales.name_layers(model, lambda layer: True)
    target = dynamic_int8(model, folder / "per-row.onnx", exclude=every)
    quantized = onnx.load(str(target))
    activation_scales.per_token(quantized, every)
    onnx.save(quantized, str(target))
    yield "per-row", target

    model = fresh()
    layers = activation_scales.linear_layers(model)
    sources = [layer.node.input[0] for layer in layers if layer.source_op == "LayerNormalization"]
    found = activation_scales.input_statistics(model, sources, feeds)
    activation_scales.smooth(model, {name: found[name].peaks for name in sources})
    yield "smooth", dynamic_int8(model, folder / "smooth.onnx")

    model = fresh()
    activation_scales.prepare(model, feeds)  # smoothed; every down projection per row
    down = activation_scales.name_layers(model, lambda layer: layer.down_projection)
    target = dynamic_int8(model, folder / "all-down.onnx", exclude=down)
    quantized = onnx.load(str(target))
    activation_scales.per_token(quantized, down)
    onnx.save(quantized, str(target))
    yield "smooth+per-row-all-down", target

    yield "smooth+per-row-down", quantize_int8(source, folder / "default.onnx", calibration=feeds)
    for form in WEIGHT_FORMS:
        path = folder / f"default-{form}.onnx"
        yield (
            f"smooth+per-row-down ({form} weights)",
            quantize_int8(source, path, calibration=feeds, form=form),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--texts", type=Path, help="a JSON list of more texts to measure on")
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.ERROR)

    import onnx
    import onnxruntime

    from anekit.embedder import Embedder
    from anekit.models import calibration, known_answers
    from anekit.models.embeddings import row_inputs
    from anekit.models.known_answers import row_cosines
    from anekit.models.onnx_models import calibration_inputs, row_encoder_onnx
    from anekit.package.int8_kernels import u8s8_saturates, weight_form
    from anekit.package.onnx_attention import fuse_attention

    fp32 = Embedder(runtime="onnx", variant="fp32")
    config, weights = fp32.config, fp32.weights
    sets = {
        "known answers": known_answers.load().texts,
        "short texts": json.loads(SHORT_TEXTS.read_text("utf-8"))["texts"],
        "calibration (in-sample)": calibration.load(),
    }
    if args.texts:
        sets[args.texts.name] = json.loads(args.texts.read_text("utf-8"))
    reference = Embedder(runtime="numpy")

    def one_row(text: str) -> dict[str, np.ndarray]:
        row = np.asarray([fp32.tokenize([text])[0]], np.int64)
        return row_inputs(weights, config, row, np.ones(row.shape, np.float32))

    rows = {name: [one_row(text) for text in texts] for name, texts in sets.items()}
    wanted = {name: reference.encode(texts) for name, texts in sets.items()}
    longest = sorted(rows["calibration (in-sample)"], key=lambda r: -r["keep"].shape[1])
    speed_rows = rows["known answers"] + longest[:SPEED_ROWS]
    feeds = calibration_inputs(config, weights, fp32.folder)

    results: dict[str, Any] = {}
    sessions: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="int8-routes-") as scratch:
        source = Path(scratch) / "fp32.onnx"
        onnx.save(row_encoder_onnx(config, weights), str(source))
        for route, path in build_routes(source, feeds, Path(scratch)):
            fused = onnx.load(str(path))
            fuse_attention(fused)  # as every built model is (anekit.models.onnx_models)
            onnx.save(fused, str(path))
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = 1
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
            sessions[route] = session
            fidelity = {}
            for name, inputs in rows.items():
                got = np.concatenate([session.run(["embedding"], one)[0] for one in inputs])
                found = row_cosines(got, wanted[name])
                fidelity[name] = {
                    "min": round(float(found.min()), 5),
                    "mean": round(float(found.mean()), 5),
                }
            results[route] = {"fidelity": fidelity, "bytes": path.stat().st_size}
            print(f"{route}: built and measured", file=sys.stderr)
        order = list(sessions)
        for row in speed_rows:  # warm-up pass
            for session in sessions.values():
                session.run(["embedding"], row)
        seconds: dict[str, list[float]] = {route: [] for route in order}
        for number in range(args.passes):
            for route in order if number % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                for row in speed_rows:
                    sessions[route].run(["embedding"], row)
                seconds[route].append(time.perf_counter() - start)
    base = statistics.median(seconds["dynamic"])
    for route in order:
        median = statistics.median(seconds[route])
        results[route]["speed"] = {
            "median_s": round(median, 4),
            "range_s": [round(min(seconds[route]), 4), round(max(seconds[route]), 4)],
            "rows_per_s": round(len(speed_rows) / median, 1),
            "vs_dynamic": round(base / median, 3),
        }
    record = {
        "script": "bench/int8_routes.py",
        "command": " ".join(["python", *sys.argv]),
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "source": source_state(),
        "speed_rows": len(speed_rows),
        "weight_form": weight_form(),
        "u8s8_saturates": u8s8_saturates(),
        "routes": results,
    }
    names = list(sets)
    print(
        f"| route | {' | '.join(f'{n}: min / mean' for n in names)} | rows/s | speed vs dynamic |"
    )
    print("|---|" + "--:|" * (len(names) + 2))
    for route in order:
        fidelity = results[route]["fidelity"]
        cells = [f"{fidelity[n]['min']:.4f} / {fidelity[n]['mean']:.4f}" for n in names]
        speed = results[route]["speed"]
        rate, ratio = speed["rows_per_s"], speed["vs_dynamic"]
        print(f"| {route} | {' | '.join(cells)} | {rate} | {ratio:.2f}x |")
    emit(record, args.json or ROOT / "bench" / "results" / f"int8-routes-{record['date']}.json")


if __name__ == "__main__":
    main()
