"""The NumPy fp32 reference path and the known-answer fixture, each against
sentence-transformers (torch): the fixture is anchored to an independent model, not to
the NumPy path that generated it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import minilm
from anekit.embedder import Embedder
from anekit.models import known_answers
from anekit.models.batching import bucket_for, buckets_for

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return known_answers.load().texts


@pytest.fixture(scope="module")
def reference(texts: list[str]) -> dict[int, np.ndarray]:
    """sentence-transformers' vectors of the chunks at max length 256 and 512."""
    return {n: minilm.sentence_transformers_encode(texts, max_length=n) for n in (256, 512)}


@pytest.mark.parametrize(
    "max_length",
    [256, pytest.param(512, marks=pytest.mark.slow)],  # 512: ~35 s more
)
def test_reference_matches_sentence_transformers(
    texts: list[str], reference: dict[int, np.ndarray], max_length: int
) -> None:
    embedder = Embedder(runtime="numpy", max_length=max_length)
    want = reference[max_length]
    got = embedder.encode(texts)
    cosines = (got * want).sum(1)
    assert cosines.min() >= 0.99999, cosines.min()
    # the long chunks really were truncated differently at 256 and 512
    lengths = [len(ids) for ids in embedder.tokenize(texts)]
    assert max(lengths) == max_length


def test_known_answers_are_sentence_transformers_vectors(
    reference: dict[int, np.ndarray],
) -> None:
    """The stored vectors against sentence-transformers' own encode of the stored
    chunks: a bug in the NumPy path that wrote the fixture cannot hide here."""
    answers = known_answers.load()
    assert answers.model == "all-MiniLM-L6-v2" and answers.max_length == 256
    assert len(answers.chunks) == 32 and answers.vectors.shape == (32, 384)
    assert {"text", "source", "license"} <= set(answers.chunks[0])
    want = reference[answers.max_length]
    cosines = answers.cosines(want)
    assert cosines.min() >= 0.99999, (int(cosines.argmin()), cosines.min())
    np.testing.assert_allclose(answers.vectors, want, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(answers.vectors, axis=1), 1.0, atol=1e-5)


def test_known_answer_chunks_are_the_code_chunks_fixture(texts: list[str]) -> None:
    """The chunks are tests/fixtures/code_chunks.json, and they cover what the tests
    that use them rely on: every default bucket, truncation, distinct texts, several
    languages, a source and license for each."""
    fixture = json.loads(minilm.CHUNKS.read_text("utf-8"))
    assert known_answers.load().chunks == fixture
    assert len(set(texts)) == len(texts) == 32
    assert all(item["source"].rsplit(":", 1)[1].isdigit() and item["license"] for item in fixture)
    assert len({item["language"] for item in fixture}) >= 3
    lengths = [len(ids) for ids in Embedder(runtime="numpy", max_length=512).tokenize(texts)]
    buckets = buckets_for(256)
    assert {bucket_for(min(length, 256), buckets) for length in lengths} == set(buckets)
    assert sum(length > 256 for length in lengths) >= 2  # truncated at the default length
    assert min(lengths) >= 8  # no near-empty chunk


def test_known_answer_cosines_flag_bad_vectors() -> None:
    answers = known_answers.load()
    bad = answers.vectors.copy()
    bad[3] = np.nan
    bad[5] = 0.0
    cosines = answers.cosines(bad)
    assert cosines[3] == -1.0 and cosines[5] == -1.0
    assert cosines[0] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="expected vectors of shape"):
        answers.cosines(bad[:4])
