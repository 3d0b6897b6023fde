"""The README's Python examples run as written (Core ML on a Mac, the simulator elsewhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks:  # later examples build on earlier ones
        exec(compile(block, str(README), "exec"), namespace)
    assert (tmp_path / "block.mlpackage").is_dir()
    assert getattr(namespace["y"], "shape", None) == (256, 512)
    assert "result" in namespace
