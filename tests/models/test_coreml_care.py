"""The Core ML lane's care, with coremltools and PyObjC's Core ML stood in for off
macOS by contract-enforcing stand-ins (tests/standins.py: a call the real API refuses
fails here too): one compile per package content under a lock, into a temporary
``*.mlmodelc`` renamed into place, temporaries cleaned up, the longest bucket loaded
first. The real lane runs in the ``macos`` test."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from anekit._coremltools import ct
from anekit.backends import coreml_nogil
from anekit.models import coreml_encoder
from standins import CoreMLTools, PyObjCCoreML, fake_mlpackage, tree_digest

BUCKETS = (128, 192, 256, 320, 384, 512)


@pytest.fixture
def coremltools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CoreMLTools:
    """coremltools' compile_model (slow: 0.3 s) and CompiledMLModel, as on a Mac."""
    monkeypatch.setenv("ANEKIT_PACKAGES", str(tmp_path / "packages"))
    return CoreMLTools(seconds=0.3).install(monkeypatch)


def _compiled_folder(tmp_path: Path) -> Path:
    return tmp_path / "packages" / "compiled"


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in _compiled_folder(tmp_path).iterdir() if "tmp" in path.name)


def test_a_package_is_compiled_once_to_a_stable_content_keyed_path(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = fake_mlpackage(tmp_path / "minilm-fp16.mlpackage")
    first = coreml_encoder.compiled_path(package)
    second = coreml_encoder.compiled_path(package)
    key = coreml_encoder.compile_key(package)
    assert key.startswith("minilm-fp16-") and len(key) == len("minilm-fp16-") + 16
    assert first == second == _compiled_folder(tmp_path) / f"{key}.mlmodelc"
    assert tree_digest(first / "source") == tree_digest(package)
    # compile_model got the package and a temporary *.mlmodelc beside the target
    ((source, destination),) = coremltools.compiles
    assert source == str(package)
    assert destination is not None and Path(destination).parent == first.parent
    assert destination.endswith(".tmp.mlmodelc") and Path(destination).name.startswith(key)
    assert _leftovers(tmp_path) == []


def test_packages_with_the_same_name_never_share_a_compiled_model(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    one = fake_mlpackage(tmp_path / "a" / "minilm-fp16.mlpackage", weights=b"first weights")
    two = fake_mlpackage(tmp_path / "b" / "minilm-fp16.mlpackage", weights=b"other weights")
    same = fake_mlpackage(tmp_path / "c" / "minilm-fp16.mlpackage", weights=b"first weights")
    compiled_one = coreml_encoder.compiled_path(one)
    compiled_two = coreml_encoder.compiled_path(two)
    assert compiled_one != compiled_two
    assert tree_digest(compiled_one / "source") == tree_digest(one)
    assert tree_digest(compiled_two / "source") == tree_digest(two)
    # the same content under another folder is the same model: compiled once
    assert coreml_encoder.compiled_path(same) == compiled_one
    assert [source for source, _ in coremltools.compiles] == [str(one), str(two)]


def test_a_package_changed_in_place_is_compiled_again(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = fake_mlpackage(tmp_path / "minilm-fp16.mlpackage", weights=b"before")
    before = coreml_encoder.compiled_path(package)
    (package / "Data" / "com.apple.CoreML" / "weights" / "weight.bin").write_bytes(b"after!")
    after = coreml_encoder.compiled_path(package)
    assert after != before and tree_digest(after / "source") == tree_digest(package)
    assert len(coremltools.compiles) == 2


def test_two_processes_never_compile_the_same_model_at_once(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = fake_mlpackage(tmp_path / "minilm-fp16.mlpackage")
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(coreml_encoder.compiled_path(package)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(coremltools.compiles) == 1  # the others waited on the lock, then found it
    assert len(set(results)) == 1 and len(results) == 3


def test_temporaries_left_by_a_killed_worker_are_removed(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = fake_mlpackage(tmp_path / "minilm-fp16.mlpackage")
    key = coreml_encoder.compile_key(package)
    folder = _compiled_folder(tmp_path)
    stale = folder / f"{key}.4242-deadbeef.tmp.mlmodelc"
    (stale / "source").mkdir(parents=True)
    (stale / "half-written").write_text("killed here")
    other = folder / "another-model-0123456789abcdef.1-ab.tmp.mlmodelc"
    other.mkdir()  # another key's compile, perhaps running now: not ours to remove
    target = coreml_encoder.compiled_path(package)
    assert not (target / "half-written").exists()
    assert _leftovers(tmp_path) == [other.name]


def test_a_failed_compile_leaves_nothing_and_the_next_one_compiles(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = fake_mlpackage(tmp_path / "minilm-fp16.mlpackage")
    coremltools.fail_compile = "the compiler gave up"
    with pytest.raises(RuntimeError, match="the compiler gave up"):
        coreml_encoder.compiled_path(package)
    folder = _compiled_folder(tmp_path)
    assert not [path for path in folder.iterdir() if path.name.endswith(".mlmodelc")]
    target = coreml_encoder.compiled_path(package)  # the lock was released
    assert (target / "coremldata.bin").is_file()
    assert len(coremltools.compiles) == 2


def _model() -> Any:
    """A LoadedModel's fields as the encoder reads them (no weights are touched)."""
    config = SimpleNamespace(hidden_size=384, max_length=BUCKETS[-1])
    return SimpleNamespace(model_id="all-MiniLM-L6-v2", folder=None, config=config, weights=None)


def _package(path: Path) -> Any:
    return SimpleNamespace(path=path)


@pytest.mark.skipif(
    coreml_nogil.available(),
    reason="PyObjC's CoreML is installed here: the lane loads through it",
)
def test_the_longest_bucket_is_loaded_first_through_coremltools(
    coremltools: CoreMLTools, tmp_path: Path
) -> None:
    package = fake_mlpackage(tmp_path / "minilm-fp16.mlpackage")
    coremltools.functions = frozenset(f"seq{size}" for size in BUCKETS)
    engine = coreml_encoder.CoreMLEncoder(_model(), _package(package), "CPU_AND_NE")
    loads = coremltools.loads
    assert [load.function_name for load in loads] == [f"seq{size}" for size in reversed(BUCKETS)]
    assert {load.path for load in loads} == {str(coreml_encoder.compiled_path(package))}
    assert {load.compute_units for load in loads} == {ct.ComputeUnit.CPU_AND_NE}
    assert engine.device == "Core ML (CPU_AND_NE)"


@pytest.mark.parametrize(("units", "expected"), [("CPU_AND_NE", 3), ("CPU_AND_GPU", 1)])
def test_the_lanes_load_through_pyobjc_with_core_mls_compute_units(
    coremltools: CoreMLTools,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    units: str,
    expected: int,
) -> None:
    core_ml = PyObjCCoreML(functions=frozenset(f"seq{size}" for size in BUCKETS))
    core_ml.install(monkeypatch)
    package = fake_mlpackage(tmp_path / "minilm-fp16.mlpackage")
    engine = coreml_encoder.CoreMLEncoder(_model(), _package(package), units)
    assert [model.configuration.functionName for model in core_ml.loads] == [
        f"seq{size}" for size in reversed(BUCKETS)
    ]
    assert core_ml.compute_units() == [expected] * len(BUCKETS)  # MLComputeUnits
    assert {model.path for model in core_ml.loads} == {str(coreml_encoder.compiled_path(package))}
    assert coremltools.loads == []  # coremltools' loader (GIL held) is not used
    assert engine.device == f"Core ML ({units})"


@pytest.mark.macos
def test_the_ane_lane_is_admitted_on_a_mac() -> None:
    from anekit.embedder import Embedder
    from anekit.lanes import Scheduler
    from anekit.models import known_answers

    texts = known_answers.load().texts[:8]
    reference = Embedder(runtime="numpy").encode(texts)
    with Scheduler(["ane"]) as scheduler:
        scheduler.start()
        (status,) = scheduler.status()
        assert status["state"] == "ready", status["reason"]
        assert status["min_cosine"] >= 0.999
        vectors = scheduler.embed(Embedder(runtime="numpy").tokenize(texts))
    assert ((vectors * reference).sum(1) >= 0.999).all()
    assert np.isfinite(vectors).all()
