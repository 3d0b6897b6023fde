"""The bucketed packages: metadata, placement, and simulated fidelity per bucket."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import anekit
from anekit.embedder import Embedder
from anekit.frontends.mlpackage import read_program
from anekit.models import BATCH, BUCKETS, known_answers, read_package
from anekit.models.package import function_name


def test_package_metadata(fp16: Embedder) -> None:
    info = read_package(fp16.package().path)
    assert info.model == "all-MiniLM-L6-v2"
    assert info.variant == "fp16"
    assert info.weights_sha256 == fp16.weights.digest and len(info.weights_sha256) == 64
    assert info.buckets == BUCKETS and info.batch == BATCH == 4
    assert info.anekit_version == anekit.__version__
    assert info.pooling == "mean" and info.normalize
    assert info.to_json()["buckets"][0] == {"function": "seq128", "batch": 4, "sequence": 128}


def test_reading_a_package_leaves_it_untouched(fp16: Embedder, tmp_path: Path) -> None:
    """read_package (the embedder's cache check) must not rewrite Manifest.json, as
    coremltools' load_spec does when another tool wrote it."""
    package = Path(shutil.copytree(fp16.package().path, tmp_path / "copy.mlpackage"))
    manifest = package / "Manifest.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text())))  # compact, as tools write
    os.utime(manifest, ns=(10**18, 10**18))
    before = (manifest.read_bytes(), manifest.stat().st_mtime_ns)
    assert read_package(package).model == "all-MiniLM-L6-v2"
    assert (manifest.read_bytes(), manifest.stat().st_mtime_ns) == before


def test_every_bucket_is_a_function_with_shared_weights(fp16: Embedder) -> None:
    path = fp16.package().path
    functions = read_program(path)[0].functions  # read once: all six functions
    for size in BUCKETS:
        function = functions[function_name(size)]
        shapes = [tuple(var.shape) for var in function.inputs.values()]
        assert shapes == [(BATCH, 384, 1, size), (BATCH, size)]
        assert [tuple(var.shape) for var in function.outputs] == [(BATCH, 384)]
    weights = sum(f.stat().st_size for f in path.rglob("*.bin"))
    assert weights < 2 * 11_000_000 * 2  # fp16 encoder weights once (~21 MB), not six times


def test_embedder_on_the_package_matches_the_reference(fp16: Embedder) -> None:
    answers = known_answers.load()
    sim = Embedder(runtime="sim", max_length=answers.max_length)
    assert sim.package().path == fp16.package().path  # the same cached package
    assert answers.cosines(sim.encode(answers.texts)).min() >= 0.9999


def test_a_package_from_other_weights_is_refused(fp16: Embedder, tmp_path: Any) -> None:
    import shutil

    from anekit.errors import ModelError
    from anekit.models.encoders import SimEncoder, load_model, open_encoder

    copy = tmp_path / "other.mlpackage"
    shutil.copytree(fp16.package().path, copy)
    weights = dataclasses.replace(load_model(None).weights, digest="0" * 64)
    other = open_encoder("sim", package=copy, weights=weights)
    assert isinstance(other, SimEncoder)
    with pytest.raises(ModelError, match="other weights"):
        other.package  # noqa: B018 (found on first use)


@pytest.mark.macos
def test_coreml_backend_reproduces_the_known_answers() -> None:
    """Unverified in CI (no Mac): the package on Core ML with the Neural Engine."""
    answers = known_answers.load()
    embedder = Embedder(runtime="coreml", max_length=answers.max_length)
    assert answers.cosines(embedder.encode(answers.texts)).min() >= 0.999
