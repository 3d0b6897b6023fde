"""The bucketed packages: metadata, placement, and simulated fidelity per bucket."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit.analysis import analyze
from anekit.embedder import Embedder
from anekit.models import BATCH, BUCKETS, known_answers, read_package
from anekit.models.batching import load_tokenizer
from anekit.models.bert import make_encoder
from anekit.models.embeddings import embed
from anekit.models.package import function_name


@pytest.fixture(scope="module")
def fp16() -> Embedder:
    embedder = Embedder(backend="sim", max_length=512)
    embedder.package()
    return embedder


@pytest.fixture(scope="module")
def int8() -> Embedder:
    embedder = Embedder(backend="sim", max_length=512, variant="int8")
    embedder.package()
    return embedder


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
    functions = anekit.load(path).program.functions  # read once: all six functions
    for size in BUCKETS:
        function = functions[function_name(size)]
        shapes = [tuple(var.shape) for var in function.inputs.values()]
        assert shapes == [(BATCH, 384, 1, size), (BATCH, size)]
        assert [tuple(var.shape) for var in function.outputs] == [(BATCH, 384)]
    weights = sum(f.stat().st_size for f in path.rglob("*.bin"))
    assert weights < 2 * 11_000_000 * 2  # fp16 encoder weights once (~21 MB), not six times


def test_placement_is_all_on_the_ane(fp16: Embedder, int8: Embedder) -> None:
    for embedder in (fp16, int8):
        report = analyze(embedder.package().path)
        assert sorted(function.name for function in report.functions) == sorted(
            function_name(size) for size in BUCKETS
        )
        assert report.all_on_ane, [
            (function.name, family, function.fallbacks(family))
            for function in report.functions
            for family in report.families
        ]


def _bucket_cosines(embedder: Embedder, size: int) -> np.ndarray:
    """Every known-answer chunk through bucket ``size`` (truncated to it) against the
    fp32 reference on the same tokens."""
    texts = known_answers.load().texts
    tokenizer = load_tokenizer(embedder.folder, size)
    token_ids = [encoding.ids for encoding in tokenizer.encode_batch(texts)]
    reference = make_encoder(embedder.config, embedder.weights, np.float32)
    program = anekit.load(embedder.package().path, function=function_name(size))
    cosines = []
    for start in range(0, len(token_ids), BATCH):
        group = token_ids[start : start + BATCH]
        ids = np.zeros((BATCH, size), np.int32)
        keep = np.zeros((BATCH, size), np.float32)
        keep[:, 0] = 1
        for row, tokens in enumerate(group):
            ids[row, : len(tokens)] = tokens
            keep[row, : len(tokens)] = 1
        hidden = embed(embedder.weights, embedder.config, ids)
        want = np.asarray(reference(hidden, keep), np.float64)[: len(group)]
        got = program(hidden.astype(np.float16), keep.astype(np.float16), backend="sim")
        got = np.asarray(got, np.float64)[: len(group)]
        cosines.append(
            (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
        )
    return np.concatenate(cosines)


@pytest.mark.parametrize("size", BUCKETS)
def test_fp16_package_matches_fp32_in_every_bucket(fp16: Embedder, size: int) -> None:
    cosines = _bucket_cosines(fp16, size)
    assert len(cosines) == 32
    assert cosines.min() >= 0.9999, (size, cosines.min())


@pytest.mark.parametrize("size", [256, 512])
def test_int8_package_is_within_its_bound(int8: Embedder, size: int) -> None:
    cosines = _bucket_cosines(int8, size)
    assert cosines.min() >= 0.99, (size, cosines.min())
    assert cosines.min() < 0.9999999  # the weights really are quantized


def test_embedder_on_the_package_matches_the_reference(fp16: Embedder) -> None:
    answers = known_answers.load()
    sim = Embedder(backend="sim", max_length=answers.max_length)
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
    embedder = Embedder(backend="coreml", max_length=answers.max_length)
    assert answers.cosines(embedder.encode(answers.texts)).min() >= 0.999
