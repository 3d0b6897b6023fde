"""A usage error answers before the heavy imports (issue 32 item 1): each command checks
its arguments (no such file, a bad --shape or --input, an option that does not apply)
before it imports coremltools, torch, ONNX, the tracer or anekit's MIL modules.

Each case runs the command in a fresh interpreter and reports the exit status and which
of those modules it imported; no timing is measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Runs ``anekit ARGS`` (sys.argv[1:]) and prints its exit status and the heavy modules
# it imported; the command's own output goes to stderr (and to stdout before the JSON).
PROBE = """
import json, sys
from anekit.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="anekit")
except SystemExit as exit:
    code = exit.code
heavy = ("coremltools", "torch", "onnx", "onnxruntime")
ours = ("anekit.trace", "anekit._miltext", "anekit._milgraph", "anekit._mlpackage",
        "anekit._coremltools", "anekit.program", "anekit.analysis", "anekit.sim",
        "anekit.ops", "anekit.frontends.pytorch", "anekit.frontends.numpy")
imported = sorted(
    name for name in sys.modules
    if name.split(".")[0] in heavy or any(name == o or name.startswith(o + ".") for o in ours)
)
print(json.dumps({"exit": code, "imported": imported}))
"""


def _run(args: list[str], cwd: Path) -> tuple[int, list[str], str]:
    """Exit status, the heavy modules imported and stderr of ``anekit ARGS`` in ``cwd``."""
    environment = {**os.environ, "ANEKIT_HOME": str(cwd / "home")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    return result["exit"], result["imported"], done.stderr


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder with a Python file, an (empty) package folder and a torch.save file."""
    import torch

    (tmp_path / "model.py").write_text("def f(x):\n    return x\n")
    (tmp_path / "empty.mlpackage").mkdir()
    torch.save(torch.nn.Linear(2, 2), tmp_path / "pickled.pt")
    return tmp_path


CASES = [
    (["doctor", "missing.py:f", "--shape", "2"], "missing.py: no such Python file"),
    (["doctor", "missing.py"], "missing.py: no such Python file"),
    (["doctor", "missing.mlpackage"], "missing.mlpackage: no such file or directory"),
    (["doctor", "model.py:f", "--shape", "x=1,a"], "--shape 'x=1,a': dimensions must be integers"),
    (["doctor", "model.py:f"], "model.py:f: give the example input shapes"),
    (["doctor", "empty.mlpackage", "--shape", "2"], "--shape applies to module:function"),
    (["simulate", "missing.mlpackage"], "missing.mlpackage: no such file or directory"),
    (
        ["simulate", "model.py"],
        "model.py: expected an .mlpackage directory, an .mlmodel file or an .aimodel folder",
    ),
    (["simulate", "empty.mlpackage", "--inputs", "gone.npz"], "--inputs gone.npz: no such file"),
    (
        ["simulate", "empty.mlpackage", "--mode", "fp32", "--accumulation", "fp16"],
        "fp16 accumulation applies to --numerics ane",
    ),
    (["run", "missing.mlpackage"], "missing.mlpackage: no such file or directory"),
    (["run", "empty.mlpackage", "--inputs", "gone.npz"], "--inputs gone.npz: no such file"),
    (["run", "empty.mlpackage", "--repeat", "0"], "must be at least 1"),
    (["convert", "missing.pt", "--input", "1,2"], "missing.pt: no such file"),
    (["convert", "pickled.pt", "--input", "1,2"], "pickled.pt: saved with torch.save"),
    (["convert", "missing.pt", "--input", "1,a"], "--input '1,a:float32': dimensions must be"),
    (["bench", "--column", "tpu"], "unknown column(s) tpu"),
    (["bench", "sweep", "--channels", "64,x"], "'64,x': comma-separated integers"),
    (["build-model", "missing-folder/"], "no model 'missing-folder/'"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_a_usage_error_is_told_before_the_heavy_imports(
    args: list[str], message: str, workdir: Path
) -> None:
    code, imported, stderr = _run(args, workdir)
    assert code == 2, stderr
    assert message in stderr
    assert imported == [], f"anekit {' '.join(args)} imported {imported} before saying so"


def test_the_bench_column_names_are_the_benchs() -> None:
    """``anekit bench --column`` is checked against a copy of the bench's column names
    (the bench imports coremltools); the copy must not drift."""
    from anekit import bench
    from anekit.cli.bench import COLUMN_KEYS

    assert tuple(bench.COLUMNS) == COLUMN_KEYS


@pytest.mark.parametrize(
    "args",
    [
        ["doctor", "model.py:f", "--shape", "2", "--family", "bogus"],
        ["ops", "--family", "bogus"],
    ],
)
def test_an_unknown_family_is_refused_from_the_op_table_alone(
    workdir: Path, args: list[str]
) -> None:
    """The op table is package data; only the analyzer and the rules need coremltools."""
    code, imported, stderr = _run(args, workdir)
    assert code == 2, stderr
    assert "unknown ANE family bogus; choose from a14" in stderr
    assert not [name for name in imported if name.split(".")[0] in ("coremltools", "torch")]
    assert "anekit.analysis.rules" not in imported
