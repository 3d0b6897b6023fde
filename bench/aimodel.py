"""Core AI beside Core ML and ONNX Runtime on all-MiniLM-L6-v2's bucket program (issue 36).

Two measurements, each side in its own worker process (so that its peak memory, VmHWM,
is its own), sides alternated in blocks after a warm-up, at least three passes:

- **emit**: the six traced bucket programs (batch 4 x 128 ... 512, after the ANE passes)
  written as Core ML's multifunction ``.mlpackage`` (coremltools: fp16 conversion, the
  weights compressed for int8, the functions combined) against that package's MIL
  program written as one Core AI ``.aimodel`` (read back, lowered op by op, verified,
  saved); with the sizes of each: the package's weight file against the asset's
  bytecode (the asset also keeps a copy of the package, for ``anekit.load``).
- **run**: the ``seq128`` function of the fp16 package on Core AI's CPU runtime (the
  reference executor coreai-core bundles for Linux: the asset's fp16 program) against
  the same MIL function emitted to ONNX by anekit's exporter and run by ONNX Runtime
  on the CPU (fp32: the exporter widens fp16 values), on four real code chunks; the
  fidelity of each against anekit's fp32 NumPy encoder on the same inputs. These are
  CPU figures; neither side is a Neural Engine.

    .venv/bin/python bench/aimodel.py [--passes 3] [--out bench/results/aimodel-DATE.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchmachine import machine, peak_memory_mb, redacted, source_state  # noqa: E402

BUCKET = 128


def _size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


# -- workers (one per side, driven over stdin/stdout) --------------------------------------


def _emit_worker(kind: str, variant: str, scratch: Path) -> Any:
    """A side of the emit measurement: ``coreml`` saves the traced programs as the
    package; ``coreai`` writes the package's program as an asset."""
    from anekit.models.batching import BUCKETS
    from anekit.models.config import load_config
    from anekit.models.package import function_name, trace_bucket
    from anekit.models.registry import resolve
    from anekit.models.weights import load_weights
    from anekit.package import save_functions
    from anekit.package.coreai import save_package_asset

    _, folder = resolve(None)
    config = load_config(folder, max_length=max(BUCKETS))
    weights = load_weights(folder, config)
    package = scratch / f"minilm-{variant}.mlpackage"
    traced = (
        [(function_name(size), trace_bucket(config, weights, size)) for size in BUCKETS]
        if kind == "coreml"
        else None
    )
    if kind == "coreai":  # its input: the package the Core ML side writes
        save_functions(
            [(function_name(size), trace_bucket(config, weights, size)) for size in BUCKETS],
            package,
            weights=variant,
        )

    def once() -> dict[str, Any]:
        start = time.perf_counter()
        if kind == "coreml":
            assert traced is not None
            path = save_functions(traced, scratch / "timed.mlpackage", weights=variant)
            seconds = time.perf_counter() - start
            weights_bytes = sum(item.stat().st_size for item in path.rglob("*.bin"))
            return {"seconds": seconds, "bytes": _size(path), "weights_bytes": weights_bytes}
        path = save_package_asset(package, scratch / "timed.aimodel")
        seconds = time.perf_counter() - start
        return {
            "seconds": seconds,
            "bytes": _size(path),
            "bytecode_bytes": (path / "main.mlirb").stat().st_size,
        }

    return once


def _run_worker(kind: str, variant: str, scratch: Path) -> Any:
    """A side of the run measurement: the seq128 function on ``coreai`` (Core AI's CPU
    runtime) or ``ort`` (ONNX Runtime, CPU, the exporter's model of the same function)."""
    import anekit
    from anekit.embedder import Embedder
    from anekit.models.package import build_asset

    embedder = Embedder(runtime="sim", max_length=512, variant=variant)
    package = embedder.package().path
    program = anekit.load(package, function=f"seq{BUCKET}")
    feeds = _feeds(embedder, program)
    if kind == "coreai":
        from anekit.package.coreai import LoadedAsset

        loaded = LoadedAsset(build_asset(package, scratch / "minilm.aimodel"))

        def run() -> np.ndarray:
            return np.asarray(program.results_of(loaded(f"seq{BUCKET}", feeds)), np.float32)

    else:
        import onnxruntime

        from anekit.package.onnx_emitter import save_onnx, to_onnx

        model = save_onnx(to_onnx(program), scratch / "minilm-seq128.onnx")
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        names = [item.name for item in session.get_inputs()]
        onnx_feeds = {name: feeds[name].astype(np.float32) for name in names}

        def run() -> np.ndarray:
            outputs = dict(
                zip(
                    [o.name for o in session.get_outputs()],
                    session.run(None, onnx_feeds),
                    strict=True,
                )
            )
            return np.asarray(program.results_of(outputs), np.float32)

    return run


def _inputs(embedder: Any) -> tuple[np.ndarray, np.ndarray]:
    """Four real code chunks cut to at most 128 tokens: hidden states (4, 384, 1, 128)
    after the word lookup, and the keep mask (4, 128)."""
    from anekit.models.embeddings import embed
    from minilm import chunks

    texts = [text[:300] for text in chunks()[:4]]
    ids = embedder.tokenize(texts)
    padded = np.zeros((4, BUCKET), np.int64)
    keep = np.zeros((4, BUCKET), np.float32)
    for row, tokens in enumerate(ids):
        padded[row, : len(tokens)], keep[row, : len(tokens)] = tokens, 1
    hidden = embed(embedder.model.weights, embedder.config, padded)
    return np.asarray(hidden, np.float32), keep


def _feeds(embedder: Any, program: Any) -> dict[str, np.ndarray]:
    hidden, keep = _inputs(embedder)
    names = [str(spec.name) for spec in program.input_specs]
    return dict(program.package_feeds(dict(zip(names, (hidden, keep), strict=True))))


def _reference() -> np.ndarray:
    """anekit's fp32 NumPy encoder on the same hidden states and mask."""
    from anekit.embedder import Embedder
    from anekit.models.architectures import make_encoder

    embedder = Embedder(runtime="numpy", max_length=512)
    hidden, keep = _inputs(embedder)
    function = make_encoder(embedder.config, embedder.model.weights, np.float32)
    return np.asarray(function(hidden, keep), np.float32).reshape(4, -1)


def worker(task: str, kind: str, variant: str) -> None:
    """Serve ``once``/``peak``/``quit`` lines on stdin, one JSON line out for each."""
    scratch = Path(tempfile.mkdtemp(prefix=f"anekit-bench-{kind}-"))
    try:
        make = _emit_worker if task == "emit" else _run_worker
        started = time.perf_counter()
        once = make(kind, variant, scratch)
        print(json.dumps({"ready_s": time.perf_counter() - started}), flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "once":
                begin = time.perf_counter()
                result = once()
                seconds = time.perf_counter() - begin
                if isinstance(result, np.ndarray):
                    record: dict[str, Any] = {"seconds": seconds, "output": result.tolist()}
                else:
                    record = result
                print(json.dumps(record), flush=True)
            elif command == "peak":
                print(json.dumps({"peak_mb": peak_memory_mb()}), flush=True)
            else:
                break
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Side:
    """A worker process for one side."""

    def __init__(self, task: str, kind: str, variant: str) -> None:
        command = [sys.executable, __file__, "--worker", task, kind, variant]
        self.kind = kind
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.ready_s = self._read()["ready_s"]

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.kind} worker stopped")
        return dict(json.loads(line))

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
        except BrokenPipeError:
            pass  # the worker is gone already (its error is on stderr)
        self.process.wait(timeout=60)


def _alternated(sides: list[Side], passes: int, block: int) -> dict[str, list[dict[str, Any]]]:
    """A warm-up call of each side, then ``passes`` rounds of ``block`` calls per side,
    the order of the sides swapped every round."""
    records: dict[str, list[dict[str, Any]]] = {side.kind: [] for side in sides}
    for side in sides:
        side.ask("once")  # warm-up
    for round_ in range(passes):
        for side in sides if round_ % 2 == 0 else list(reversed(sides)):
            records[side.kind] += [side.ask("once") for _ in range(block)]
    return records


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [record["seconds"] for record in records]
    return {
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "runs": len(seconds),
    }


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=3, help="rounds per measurement (>= 3)")
    parser.add_argument("--out", type=Path, default=None, help="where to write the JSON record")
    parser.add_argument("--skip-emit", action="store_true", help="only the run measurement")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    if args.passes < 3:
        parser.error("--passes: at least 3")
    import coreai
    import onnxruntime

    import anekit

    record: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "versions": {
            "anekit": anekit.__version__,
            "coreai-core": getattr(coreai, "__version__", "1.0.0b3"),
            "onnxruntime": onnxruntime.__version__,
        },
        "source": source_state(),
        "passes": args.passes,
    }
    if not args.skip_emit:
        record["emit"] = {}
        for variant in ("fp16", "int8"):
            sides = [Side("emit", kind, variant) for kind in ("coreml", "coreai")]
            try:
                runs = _alternated(sides, args.passes, 1)
                record["emit"][variant] = {
                    side.kind: {
                        **_summary(runs[side.kind]),
                        **{k: v for k, v in runs[side.kind][-1].items() if k != "seconds"},
                        "peak_mb": side.ask("peak")["peak_mb"],
                    }
                    for side in sides
                }
            finally:
                for side in sides:
                    side.close()
            print(json.dumps({variant: record["emit"][variant]}), flush=True)
    reference = _reference()
    sides = [Side("run", kind, "fp16") for kind in ("coreai", "ort")]
    try:
        runs = _alternated(sides, args.passes, 1)
        record["run"] = {}
        for side in sides:
            output = np.asarray(runs[side.kind][-1]["output"], np.float32).reshape(4, -1)
            record["run"][side.kind] = {
                **_summary(runs[side.kind]),
                "load_s": side.ready_s,
                "peak_mb": side.ask("peak")["peak_mb"],
                "min_cosine_vs_fp32": float(_cosines(output, reference).min()),
                "max_abs_vs_fp32": float(np.abs(output - reference).max()),
            }
    finally:
        for side in sides:
            side.close()
    run = record["run"]
    record["run"]["coreai_over_ort"] = run["coreai"]["median_s"] / run["ort"]["median_s"]
    text = json.dumps(redacted(record), indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
