"""What the processes that only embed import: no tracer, no coremltools, no torch.

Each check runs in a fresh interpreter, so that nothing another test imported counts.
The ONNX models are built (once, cached) before the worker's check: a cached CPU lane
worker only loads them.
"""

from __future__ import annotations

import json
import subprocess
import sys

from anekit.embedder import Embedder

#: Modules neither process may import (heavy, and not needed to embed).
HEAVY = ("torch", "coremltools", "transformers", "sympy", "onnx", "anekit.trace", "anekit.sim")


def _imported(code: str) -> list[str]:
    script = code + (
        "\nimport json, sys\n"
        f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    found: list[str] = json.loads(result.stdout.splitlines()[-1])
    return found


def test_the_parent_of_lanes_imports_no_tracer_coremltools_or_torch() -> None:
    code = (
        "from anekit.embedder import Embedder\n"
        "embedder = Embedder(lanes=['cpu'])\n"
        "embedder.tokenize(['def f(): pass'])\n"
    )
    assert _imported(code) == []


def test_a_cached_cpu_lane_worker_imports_onnx_runtime_and_numpy_only() -> None:
    built = Embedder(runtime="onnx", device="cpu")
    assert built.onnx_encoder is not None
    built.onnx_encoder.prepare()  # the model built and cached
    code = (
        "from anekit.lanes.engines import make_engine\n"
        "from anekit.lanes.worker import admission\n"
        "from anekit.lanes.faults import Faults\n"
        "engine = make_engine('cpu', None, None, 1)\n"
        "assert admission('cpu', engine, Faults())['admitted']\n"
    )
    assert _imported(code) == []
