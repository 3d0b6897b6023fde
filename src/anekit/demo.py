"""``anekit demo``: trace the LLaMA-style feed-forward block of seed 003 and save it.

The block is RMSNorm, SwiGLU and a residual, D=512, H=1536, T=256, fp16 input,
written as ordinary NumPy exactly as the AppleNeuralEngine.jl announcement writes
it in Julia (shared/seeds/003). Weights are random with a fixed seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import anekit
from anekit.program import CompiledProgram
from anekit.trace.source import register_user_code

# The demo's NumPy function is user code: trace locations point into this file.
register_user_code(__file__)

D_MODEL = 512
D_HIDDEN = 1536
TOKENS = 256


def make_ffn(
    d_model: int = D_MODEL, d_hidden: int = D_HIDDEN, seed: int = 0
) -> Callable[[Any], Any]:
    """The feed-forward block as a NumPy function of ``x`` (T, D), weights closed over."""
    rng = np.random.default_rng(seed)
    g = (1 + 0.1 * rng.standard_normal(d_model)).astype(np.float16)
    W1 = (rng.standard_normal((d_hidden, d_model)) / np.sqrt(d_model)).astype(np.float16)
    W3 = (rng.standard_normal((d_hidden, d_model)) / np.sqrt(d_model)).astype(np.float16)
    W2 = (rng.standard_normal((d_model, d_hidden)) / np.sqrt(d_hidden)).astype(np.float16)

    def silu(z: Any) -> Any:
        return z / (1 + np.exp(-z))

    def ffn(x: Any) -> Any:
        n = x / np.sqrt(np.sum(x * x, axis=1, keepdims=True) / x.shape[1] + 1e-5) * g
        return x + (silu(n @ W1.T) * (n @ W3.T)) @ W2.T

    return ffn


def example_input(tokens: int = TOKENS, d_model: int = D_MODEL, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((tokens, d_model)).astype(np.float16)


@dataclass
class DemoResult:
    """What the demo built and measured."""

    program: CompiledProgram
    package: Path
    package_bytes: int
    trace_seconds: float
    save_seconds: float

    def to_json(self) -> dict[str, Any]:
        ops = [op.to_json() for op in self.program.ops()]
        return {
            "source": self.program.source,
            "inputs": [spec.to_json() for spec in self.program.input_specs],
            "outputs": [spec.to_json() for spec in self.program.output_specs],
            "ops": ops,
            "compute_ops": sum(1 for op in ops if op["type"] != "const"),
            "package": {"path": str(self.package), "bytes": self.package_bytes},
            "timings_s": {"trace": self.trace_seconds, "save": self.save_seconds},
        }


def directory_size(path: Path) -> int:
    """Total bytes of the files below ``path``."""
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def run(out_dir: Path) -> DemoResult:
    """Trace the FFN block, save ``ffn.mlpackage`` under ``out_dir``, and report."""
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
    )
