"""``anekit demo``: trace the LLaMA-style feed-forward block of seed 003, save it, and
check its fp16 numerics in the simulator.

The block is RMSNorm, SwiGLU and a residual, D=512, H=1536, T=256, fp16 input,
written as ordinary NumPy exactly as the AppleNeuralEngine.jl announcement writes
it in Julia (shared/seeds/003). Weights are random with a fixed seed. The saved
package is read back and run in the ANE simulator (fp16 numerics) against the
NumPy function in float64: a simulation, not a measurement of a Neural Engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import anekit
from anekit import sim
from anekit.program import CompiledProgram
from anekit.sim import NumericsReport
from anekit.trace.source import register_user_code

# The demo's NumPy function is user code: trace locations point into this file.
register_user_code(__file__)

D_MODEL = 512
D_HIDDEN = 1536
TOKENS = 256


def make_ffn(
    d_model: int = D_MODEL, d_hidden: int = D_HIDDEN, seed: int = 0, dtype: Any = np.float16
) -> Callable[[Any], Any]:
    """The feed-forward block as a NumPy function of ``x`` (T, D), weights closed over:
    fp16 values, held as ``dtype`` (float32 for NumPy's own speed, float64 as reference)."""
    rng = np.random.default_rng(seed)

    def weight(values: np.ndarray) -> np.ndarray:
        return values.astype(np.float16).astype(dtype)

    g = weight(1 + 0.1 * rng.standard_normal(d_model))
    W1 = weight(rng.standard_normal((d_hidden, d_model)) / np.sqrt(d_model))
    W3 = weight(rng.standard_normal((d_hidden, d_model)) / np.sqrt(d_model))
    W2 = weight(rng.standard_normal((d_model, d_hidden)) / np.sqrt(d_hidden))

    def silu(z: Any) -> Any:
        return z / (1 + np.exp(-z))

    def ffn(x: Any) -> Any:
        n = x / np.sqrt(np.sum(x * x, axis=1, keepdims=True) / x.shape[1] + 1e-5) * g
        return x + (silu(n @ W1.T) * (n @ W3.T)) @ W2.T

    return ffn


def example_input(tokens: int = TOKENS, d_model: int = D_MODEL, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((tokens, d_model)).astype(np.float16)


@dataclass
class Fidelity:
    """The saved package simulated with ANE fp16 numerics, against float64 NumPy."""

    max_relative_error: float
    min_cosine: float
    report: NumericsReport
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "simulated": True,
            "max_relative_error": self.max_relative_error,
            "min_cosine": self.min_cosine,
            "seconds": self.seconds,
            "numerics": self.report.to_json(),
        }


@dataclass
class DemoResult:
    """What the demo built and measured."""

    program: CompiledProgram
    package: Path
    package_bytes: int
    trace_seconds: float
    save_seconds: float
    fidelity: Fidelity

    def to_json(self) -> dict[str, Any]:
        ops = [op.to_json() for op in self.program.ops()]
        return {
            "source": self.program.source,
            "inputs": [spec.to_json() for spec in self.program.input_specs],
            "outputs": [spec.to_json() for spec in self.program.output_specs],
            "ops": ops,
            "compute_ops": sum(1 for op in ops if op["type"] != "const"),
            "passes": report.to_json() if (report := self.program.pass_report) else None,
            "package": {"path": str(self.package), "bytes": self.package_bytes},
            "timings_s": {"trace": self.trace_seconds, "save": self.save_seconds},
            "fidelity": self.fidelity.to_json(),
        }


def directory_size(path: Path) -> int:
    """Total bytes of the files below ``path``."""
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def simulate_package(package: Path, ffn: Callable[[Any], Any], x: np.ndarray) -> Fidelity:
    """Run the saved package in ``ane`` numerics and compare with ``ffn`` in float64."""
    loaded = anekit.load(package)
    feeds = loaded.package_feeds({"x": x})
    result = sim.run(loaded.program, feeds, mode="ane", function=loaded.function_name)
    got = result.outputs[str(loaded.output_specs[0].name)].astype(np.float64)
    want = np.asarray(ffn(x.astype(np.float64)), np.float64)
    cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    return Fidelity(
        max_relative_error=float(np.abs(got - want).max() / np.abs(want).max()),
        min_cosine=float(cosine.min()),
        report=result.report,
        seconds=result.seconds,
    )


@dataclass
class ModelDemo:
    """The default embedding model's package: placement and simulated fidelity."""

    package: Path
    package_bytes: int
    functions: dict[str, tuple[int, int]]  # function -> (compute ops on the ANE, all), a14
    families_all_on_ane: bool
    min_cosine: float
    chunks: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "package": {"path": str(self.package), "bytes": self.package_bytes},
            "placement": {
                name: {"ane": ane, "compute_ops": total}
                for name, (ane, total) in self.functions.items()
            },
            "all_on_ane": self.families_all_on_ane,
            "simulated": True,
            "min_cosine_to_fp32": self.min_cosine,
            "chunks": self.chunks,
            "seconds": self.seconds,
        }


def run_model(progress: Callable[[str], None] | None = None) -> ModelDemo:
    """Build (or reuse) the default model's fp16 package, report its placement, and
    simulate it on the known-answer chunks against the fp32 reference."""
    from anekit.analysis import analyze
    from anekit.embedder import Embedder
    from anekit.models import known_answers

    started = time.perf_counter()
    answers = known_answers.load()
    embedder = Embedder(runtime="sim", max_length=answers.max_length, progress=progress)
    info = embedder.package()
    report = analyze(info.path, families=["a14"])
    functions = {
        function.name: (function.on_ane("a14"), len(function.compute_ops()))
        for function in sorted(report.functions, key=lambda item: int(item.name[3:]))
    }
    if progress is not None:
        progress(f"simulating {len(answers.chunks)} known-answer chunks with ANE numerics")
    cosines = answers.cosines(embedder.encode(answers.texts))
    return ModelDemo(
        package=info.path,
        package_bytes=directory_size(info.path),
        functions=functions,
        families_all_on_ane=analyze(info.path).all_on_ane,
        min_cosine=float(cosines.min()),
        chunks=len(cosines),
        seconds=time.perf_counter() - started,
    )


def run(out_dir: Path) -> DemoResult:
    """Trace the FFN block, save ``ffn.mlpackage`` under ``out_dir``, simulate it."""
    ffn = make_ffn()
    x = example_input()
    start = time.perf_counter()
    program = anekit.compile(ffn, x)
    traced = time.perf_counter()
    package = program.save(out_dir / "ffn.mlpackage")
    saved = time.perf_counter()
    return DemoResult(
        program=program,
        package=package,
        package_bytes=directory_size(package),
        trace_seconds=traced - start,
        save_seconds=saved - traced,
        fidelity=simulate_package(package, ffn, x),
    )
