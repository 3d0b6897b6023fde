"""The NumPy fp32 reference path against sentence-transformers (torch), and the
known-answer fixture it generates."""

from __future__ import annotations

import numpy as np
import pytest

from anekit.models import Embedder, known_answers

sentence_transformers = pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return known_answers.load().texts


@pytest.mark.parametrize("max_length", [256, 512])
def test_reference_matches_sentence_transformers(texts: list[str], max_length: int) -> None:
    embedder = Embedder(backend="numpy", max_length=max_length)
    model = sentence_transformers.SentenceTransformer(str(embedder.folder), device="cpu")
    model.max_seq_length = max_length
    want = model.encode(texts, normalize_embeddings=True)
    got = embedder.encode(texts)
    cosines = (got * want).sum(1)
    assert cosines.min() >= 0.99999, cosines.min()
    # the long chunks really were truncated differently at 256 and 512
    lengths = [len(ids) for ids in embedder.tokenize(texts)]
    assert max(lengths) == max_length


def test_known_answer_fixture_is_current(texts: list[str]) -> None:
    answers = known_answers.load()
    assert answers.model == "all-MiniLM-L6-v2" and answers.max_length == 256
    assert len(answers.chunks) == 32 and answers.vectors.shape == (32, 384)
    assert {"text", "source", "license"} <= set(answers.chunks[0])
    fresh = Embedder(backend="numpy", max_length=answers.max_length).encode(texts)
    assert answers.cosines(fresh).min() >= 0.999999
    np.testing.assert_allclose(np.linalg.norm(answers.vectors, axis=1), 1.0, atol=1e-5)


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
