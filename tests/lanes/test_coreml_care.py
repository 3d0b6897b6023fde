"""The Core ML lane's care, with coremltools' compile and load stood in for off macOS:
one compile per package under a lock, at a stable path, partial artefacts cleaned up,
the longest bucket loaded first. The real lane runs in the ``macos`` test."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from anekit._coremltools import ct
from anekit.lanes import coreml_engine


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Stand in for ``ct.models.utils.compile_model``: slow, and it writes a directory."""
    monkeypatch.setenv("ANEKIT_PACKAGES", str(tmp_path / "packages"))
    calls: list[str] = []

    def compile_model(model: str, destination: str) -> str:
        calls.append(model)
        time.sleep(0.3)
        Path(destination).mkdir(parents=True)
        (Path(destination) / "model.mil").write_text("compiled")
        return destination

    monkeypatch.setattr(ct.models.utils, "compile_model", compile_model)
    return calls


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "minilm-fp16.mlpackage"
    package.mkdir()
    return package


def test_a_package_is_compiled_once_to_a_stable_path(compiles: list[str], tmp_path: Path) -> None:
    package = _package(tmp_path)
    first = coreml_engine.compiled_path(package)
    second = coreml_engine.compiled_path(package)
    assert first == second == tmp_path / "packages" / "compiled" / "minilm-fp16.mlmodelc"
    assert (first / "model.mil").read_text() == "compiled"
    assert compiles == [str(package)]


def test_two_processes_never_compile_the_same_model_at_once(
    compiles: list[str], tmp_path: Path
) -> None:
    package = _package(tmp_path)
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(coreml_engine.compiled_path(package)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(compiles) == 1  # the others waited on the lock, then found it compiled
    assert len(set(results)) == 1


def test_partial_compiles_left_by_a_killed_worker_are_removed(
    compiles: list[str], tmp_path: Path
) -> None:
    package = _package(tmp_path)
    folder = tmp_path / "packages" / "compiled"
    stale = folder / "minilm-fp16.mlmodelc.partial"
    stale.mkdir(parents=True)
    (stale / "half-written").write_text("killed here")
    target = coreml_engine.compiled_path(package)
    assert not (target / "half-written").exists()
    assert [path.name for path in folder.iterdir() if "partial" in path.name] == []


def test_the_longest_bucket_is_loaded_first(
    compiles: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[tuple[str, str]] = []

    def compiled_model(path: str, compute_units: Any, function_name: str) -> Any:
        loaded.append((Path(path).name, function_name))
        return SimpleNamespace(predict=None)

    monkeypatch.setattr(ct.models, "CompiledMLModel", compiled_model)
    package = _package(tmp_path)
    embedder = SimpleNamespace(
        dimension=384,
        model_id="all-MiniLM-L6-v2",
        buckets=(128, 192, 256, 320, 384, 512),
        package=lambda: SimpleNamespace(path=package),
    )
    engine = coreml_engine.CoreMLEngine(embedder, "CPU_AND_NE")
    assert [name for _, name in loaded] == [
        "seq512",
        "seq384",
        "seq320",
        "seq256",
        "seq192",
        "seq128",
    ]
    assert {path for path, _ in loaded} == {"minilm-fp16.mlmodelc"}
    assert engine.device == "Core ML (CPU_AND_NE)"


@pytest.mark.macos
def test_the_ane_lane_is_admitted_on_a_mac() -> None:
    from anekit.lanes import Scheduler
    from anekit.models import Embedder, known_answers

    texts = known_answers.load().texts[:8]
    reference = Embedder(backend="numpy").encode(texts)
    with Scheduler(["ane"]) as scheduler:
        scheduler.start()
        (status,) = scheduler.status()
        assert status["state"] == "ready", status["reason"]
        assert status["min_cosine"] >= 0.999
        vectors = scheduler.embed(Embedder(backend="numpy").tokenize(texts))
    assert ((vectors * reference).sum(1) >= 0.999).all()
    assert np.isfinite(vectors).all()
