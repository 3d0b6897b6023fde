"""The README's quickstart runs as written (its Core ML call only on macOS)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anekit._coremltools import core_ml_runtime_available

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README has no python example"
    code = blocks[0]
    if not core_ml_runtime_available():
        code = "\n".join(line for line in code.splitlines() if "program(x)" not in line)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {})
    assert (tmp_path / "block.mlpackage").is_dir()
