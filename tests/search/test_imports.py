"""Native libraries that must live in one process: the vector index and ONNX Runtime."""

from __future__ import annotations

import subprocess
import sys


def test_onnx_runtime_loads_after_the_vector_index() -> None:
    """usearch 2.26.3-2.26.6 made the import of onnxruntime that follows them crash
    the process (SIGSEGV): a search that opened its vector index before embedding its
    query died. Each order is tried in a fresh interpreter."""
    for first, second in [("anekit.search.vectors", "onnxruntime"), ("onnxruntime", "usearch")]:
        done = subprocess.run(
            [sys.executable, "-c", f"import {first}; import {second}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (first, second, done.returncode, done.stderr[-2000:])
