"""Embedder.encode: sentence-transformers' semantics on awkward input, bucketing and
errors (NumPy fp32 backend; the packages are tested in test_model_package.py)."""

from __future__ import annotations

import numpy as np
import pytest

import minilm
from anekit import errors
from anekit.embedder import Embedder
from anekit.models.batching import BATCH, batches, bucket_for, buckets_for


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(runtime="numpy")


def _one_by_one(embedder: Embedder, texts: list[str]) -> np.ndarray:
    return np.concatenate([embedder.encode([text]) for text in texts])


def test_awkward_texts_embed_to_unit_vectors(embedder: Embedder) -> None:
    texts = [
        "",
        "   \t\n  ",
        "naïve café — 東京 и Москва",
        "🚀🔥 emoji only 🎉",
        "line one\r\nline two\r\n",
    ]
    vectors = embedder.encode(texts)
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # empty and whitespace-only text both tokenize to [CLS] [SEP]: the same vector
    assert embedder.tokenize(texts[:2]) == [[101, 102], [101, 102]]
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
    # CRLF is whitespace to the tokenizer, like LF
    lf = embedder.encode(["line one\nline two\n"])[0]
    assert float(vectors[4] @ lf) > 0.99999


def test_long_inputs_are_truncated_not_refused(embedder: Embedder) -> None:
    long = "def f(x):\n    return x + 1\n" * 400
    (ids,) = embedder.tokenize([long])
    assert len(ids) == embedder.max_length == 256
    vector = embedder.encode([long])
    truncated = embedder.encode([long[: len(long) // 2]])
    assert float(vector[0] @ truncated[0]) > 0.9999  # both see the same first 256 tokens


def test_mixed_lengths_across_buckets_keep_input_order(embedder: Embedder) -> None:
    texts = [("word " * n).strip() for n in (200, 3, 90, 150, 1, 60, 240, 10, 120, 170)]
    lengths = [len(ids) for ids in embedder.tokenize(texts)]
    used = {
        bucket_for(max(lengths[i] for i in b.indices), embedder.buckets)
        for b in batches(embedder.tokenize(texts), embedder.buckets)
    }
    assert used == {128, 192, 256}
    together = embedder.encode(texts)
    np.testing.assert_allclose(together, _one_by_one(embedder, texts), atol=2e-6)
    windowed = embedder.encode(texts, batch_size=3)
    np.testing.assert_allclose(windowed, together, atol=2e-6)


def test_unnormalized_embeddings_are_the_mean_pooled_states(embedder: Embedder) -> None:
    pytest.importorskip("sentence_transformers")
    texts = ["hello world", "def add(a, b):\n    return a + b", "word " * 300]  # truncated
    raw = embedder.encode(texts, normalize_embeddings=False)
    want = minilm.sentence_transformers_encode(texts, normalize=False)  # torch, no Normalize module
    np.testing.assert_allclose(raw, want, rtol=1e-4, atol=2e-5)
    norms = np.linalg.norm(raw, axis=1)
    assert (np.abs(norms - 1.0) > 0.5).all(), norms  # so the check above is not of unit vectors
    np.testing.assert_allclose(raw / norms[:, None], embedder.encode(texts), atol=1e-6)


def test_empty_input(embedder: Embedder) -> None:
    assert embedder.encode([]).shape == (0, 384)
    assert embedder.encode(iter([]), normalize_embeddings=False).shape == (0, 384)


def test_any_iterable_of_texts_embeds_like_the_list(embedder: Embedder) -> None:
    texts = ["def add(a, b): return a + b", "How to install", "SELECT name FROM users"]
    want = embedder.encode(texts)
    assert want.shape == (3, 384)
    forms = {
        "generator": (text for text in texts),
        "iter": iter(texts),
        "map": map(str.strip, texts),
        "tuple": tuple(texts),
    }
    for name, given in forms.items():
        got = embedder.encode(given)
        assert got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert embedder.tokenize(text for text in texts) == embedder.tokenize(texts)


def test_a_lone_surrogate_is_refused_by_index(embedder: Embedder) -> None:
    message = r"text 1 is not valid Unicode: character 3 is a lone surrogate \(U\+D800\)"
    with pytest.raises(errors.ModelError, match=message):
        embedder.encode(["ok", "abc\ud800def", "fine"])
    with pytest.raises(errors.ModelError, match=r"text 0 .*U\+DCFF"):
        embedder.tokenize(iter(["\udcff"]))  # a byte decoded with surrogateescape
    assert embedder.encode(["abc\U0001f600def"]).shape == (1, 384)  # a real pair is fine


def test_batches_pad_rows_keep_one_key_open() -> None:
    (batch,) = batches([[101, 7, 102]], buckets_for(256))
    assert batch.ids.shape == (BATCH, 128)
    assert batch.keep[0, :3].tolist() == [1, 1, 1] and batch.keep[0, 3:].sum() == 0
    assert batch.keep[1:, 0].tolist() == [1, 1, 1]  # padding rows: never fully masked
    assert batch.indices == [0]


def test_batches_without_fill_hold_only_their_texts() -> None:
    texts = [[101, *range(7, 7 + n), 102] for n in (5, 1, 3, 2, 4)]
    groups = list(batches(texts, buckets_for(256), size=2, fill=False))
    assert [group.indices for group in groups] == [[1, 3], [2, 4], [0]]
    assert [group.ids.shape for group in groups] == [(2, 128), (2, 128), (1, 128)]
    (last,) = groups[-1:]
    assert last.ids[0, :7].tolist() == texts[0] and last.keep[0].sum() == 7


def test_buckets_for_max_lengths() -> None:
    assert buckets_for(256) == (128, 192, 256)
    assert buckets_for(300) == (128, 192, 256, 320)
    assert buckets_for(512) == (128, 192, 256, 320, 384, 512)
    with pytest.raises(errors.ModelError, match="largest bucket"):
        buckets_for(513)


def test_encode_refuses_what_sentence_transformers_would_not_take(embedder: Embedder) -> None:
    with pytest.raises(TypeError, match="list of texts"):
        embedder.encode("just one string")
    with pytest.raises(TypeError, match="text 1 is a int"):
        embedder.encode(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        embedder.encode(["ok"], batch_size=0)


def test_embedder_options_are_checked() -> None:
    with pytest.raises(
        errors.ModelError,
        match=r"runtime must be one of coreai, coreml, sim, onnx, direct, coreai-cpu, numpy, "
        r"got 'gpu'",
    ):
        Embedder(runtime="gpu")
    with pytest.raises(errors.ModelError, match="give runtime, not backend too"):
        Embedder(runtime="numpy", backend="numpy")
    with pytest.raises(errors.BackendUnavailableError, match="macOS"):
        Embedder(runtime="coreml")
    with pytest.raises(errors.ModelError, match=r"outside 1\.\.512"):
        Embedder(runtime="numpy", max_length=1024)
    assert Embedder(runtime="numpy", max_length=512).buckets[-1] == 512


def test_backend_is_the_deprecated_name_of_runtime() -> None:
    with pytest.warns(DeprecationWarning, match=r"is now Embedder\(runtime=\.\.\.\)"):
        embedder = Embedder(backend="numpy")
    assert embedder.runtime == embedder.backend == "numpy"
    assert embedder.encoder.device == "CPU (NumPy fp32)"


def test_device_is_the_onnx_runtimes_option() -> None:
    with pytest.raises(errors.ModelError, match="device= applies to runtime='onnx', not 'numpy'"):
        Embedder(runtime="numpy", device="cpu")
    with pytest.raises(errors.ModelError, match="onnx device must be one of auto, cpu, cuda"):
        Embedder(runtime="onnx", device="gpu")
    encoder = Embedder(runtime="onnx", device="cpu").onnx_encoder
    assert encoder is not None and encoder.device_choice == "cpu"
