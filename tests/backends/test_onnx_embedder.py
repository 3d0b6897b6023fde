"""Embedder(runtime="onnx"): the row-layout encoder on ONNX Runtime against the NumPy
fp32 reference on the known-answer chunks, fp32 and int8 (per-channel) variants.

Each variant's model (one for every length) is built once per test run and cached
under ``ANEKIT_PACKAGES``, which tests/conftest.py points at a shared folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from anekit import errors
from anekit.embedder import Embedder
from anekit.models import calibration, known_answers
from anekit.models.encoders import ModelEncoder
from anekit.models.onnx_models import (
    MODEL_FILE,
    MODEL_FORMAT,
    ONNX_BATCH,
    VARIANTS,
    OnnxSessions,
    folder_for,
)
from anekit.package.int8_kernels import weight_form

F64 = np.float64


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return known_answers.load().texts


@pytest.fixture(scope="module")
def reference(texts: list[str]) -> np.ndarray:
    return Embedder(runtime="numpy").encode(texts)


@pytest.fixture(scope="module")
def fp32() -> Embedder:
    return Embedder(runtime="onnx", variant="fp32")


@pytest.fixture(scope="module")
def int8() -> Embedder:
    return Embedder(runtime="onnx")  # int8 is the onnx backend's default


@pytest.fixture(scope="module")
def fp32_vectors(fp32: Embedder, texts: list[str]) -> np.ndarray:
    return fp32.encode(texts)


@pytest.fixture(scope="module")
def int8_vectors(int8: Embedder, texts: list[str]) -> np.ndarray:
    return int8.encode(texts)


def cosines(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    got, want = np.asarray(got, F64), np.asarray(want, F64)
    norms = np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1)
    result: np.ndarray = (got * want).sum(axis=1) / norms
    return result


def test_the_reference_is_sentence_transformers(reference: np.ndarray, texts: list[str]) -> None:
    """The tests below compare ONNX with the NumPy fp32 path, which wrote the known
    answers; anchor that path to an independent implementation (torch), so that a bug
    in it cannot pass as a reference."""
    minilm = pytest.importorskip("minilm")
    want = minilm.sentence_transformers_encode(texts, max_length=known_answers.load().max_length)
    assert cosines(reference, want).min() >= 0.999999


def test_fp32_variant_matches_the_numpy_reference(
    fp32: Embedder, fp32_vectors: np.ndarray, reference: np.ndarray
) -> None:
    assert fp32.variant == "fp32" and fp32.batch == ONNX_BATCH
    assert fp32_vectors.shape == reference.shape == (32, 384)
    assert fp32_vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(fp32_vectors, axis=1), 1.0, atol=1e-5)
    assert cosines(fp32_vectors, reference).min() >= 0.99999
    assert known_answers.load().cosines(fp32_vectors).min() >= 0.99999


def test_int8_variant_stays_close_to_the_numpy_reference(
    int8: Embedder, int8_vectors: np.ndarray, reference: np.ndarray
) -> None:
    assert int8.variant == "int8"
    assert int8_vectors.shape == reference.shape and int8_vectors.dtype == np.float32
    found = cosines(int8_vectors, reference)
    assert found.min() >= 0.995  # 0.988 with one activation scale per run
    # Quantized, so not the fp32 result: the worst chunk moves measurably.
    assert found.min() < 0.9999


SHORT_TEXTS = Path(__file__).resolve().parents[1] / "fixtures" / "short_texts.json"


def test_int8_keeps_short_texts_close_to_the_reference(int8: Embedder) -> None:
    """One- to three-token texts are where one activation scale per run lost most (min
    cosine 0.966); with calibrated scales none falls under 0.99."""
    texts = json.loads(SHORT_TEXTS.read_text("utf-8"))["texts"]
    found = cosines(int8.encode(texts), Embedder(runtime="numpy").encode(texts))
    assert len(texts) > 100 and found.min() >= 0.99


def test_calibration_texts_are_none_of_the_fidelity_fixtures(texts: list[str]) -> None:
    calibration_texts = set(calibration.load())
    short = json.loads(SHORT_TEXTS.read_text("utf-8"))["texts"]
    assert len(calibration_texts) > 200
    assert not calibration_texts & set(texts)
    # a keyword or a comment sign is in both (``def``, ``#``), no longer text is
    assert all(len(text) <= 3 for text in calibration_texts & set(short))


def test_rows_do_not_depend_on_their_batch(
    fp32: Embedder, texts: list[str], fp32_vectors: np.ndarray
) -> None:
    # Alone, a text runs as a batch of one row (no padding rows).
    picks = [0, 9, 31]
    encoder = fp32.onnx_encoder
    assert encoder is not None
    real_run = encoder.run
    rows: list[int] = []

    def run(inputs: dict[str, np.ndarray]) -> np.ndarray:
        rows.append(inputs["keep"].shape[0])
        return real_run(inputs)

    encoder.run = run  # type: ignore[method-assign]
    try:
        alone = np.concatenate([fp32.encode([texts[index]]) for index in picks])
        three = fp32.encode([texts[index] for index in picks])
    finally:
        del encoder.run
    assert rows == [1, 1, 1, 3]
    np.testing.assert_allclose(alone, fp32_vectors[picks], atol=2e-5)
    np.testing.assert_allclose(three, fp32_vectors[picks], atol=2e-5)
    assert fp32.encode([]).shape == (0, 384)


def test_an_int8_vector_is_the_same_whatever_its_batch(
    int8: Embedder, texts: list[str], int8_vectors: np.ndarray
) -> None:
    """Dynamic quantization scales each run's activations as a whole: int8 rows run alone,
    at their own length, so a text embeds to the same bits beside any batch mates (beside a
    long and a short text, alone, and in the known answers' batch)."""
    assert int8.batch == 1
    shortest = min(range(len(texts)), key=lambda i: len(texts[i]))
    longest = max(range(len(texts)), key=lambda i: len(texts[i]))
    target = next(i for i in range(len(texts)) if i not in (shortest, longest))
    alone = int8.encode([texts[target]])[0]
    beside_long = int8.encode([texts[longest], texts[target]])[1]
    beside_short = int8.encode([texts[target], texts[shortest], texts[shortest]])[0]
    assert np.array_equal(alone, beside_long)
    assert np.array_equal(alone, beside_short)
    assert np.array_equal(alone, int8_vectors[target])


def _cached_model(embedder: Embedder, variant: str) -> onnx.ModelProto:
    folder = folder_for(embedder.model_id, embedder.weights, variant)
    assert (folder / MODEL_FILE).is_file(), f"nothing cached in {folder}"
    assert not list(folder.glob("*partial*"))
    return onnx.load(str(folder / MODEL_FILE))


def test_cached_models_take_any_length(
    fp32: Embedder, int8: Embedder, fp32_vectors: np.ndarray, int8_vectors: np.ndarray
) -> None:
    plain = _cached_model(fp32, "fp32")
    plain_types = {node.op_type for node in plain.graph.node}
    assert {"LayerNormalization", "MultiHeadAttention", "Gelu", "MatMul"} <= plain_types
    assert "MatMulInteger" not in plain_types
    assert [value.name for value in plain.graph.input] == ["hidden", "keep"]
    for value in plain.graph.input:
        batch, length = value.type.tensor_type.shape.dim[:2]
        assert batch.dim_param == "batch" and length.dim_param == "sequence"
    (output,) = plain.graph.output
    assert [dim.dim_param or dim.dim_value for dim in output.type.tensor_type.shape.dim] == [
        "batch",
        384,
    ]

    quantized = _cached_model(int8, "int8")
    types = [node.op_type for node in quantized.graph.node]
    # MiniLM: 6 layers of Q, K, V, attention output and the first FFN matmul, quantized
    # per run; the second FFN matmul (a down projection) too, except in the first three
    # layers, whose rows are uneven (ROW_SPREAD): per row, by MatMulIntegerToFloat.
    assert types.count("MatMulInteger") == 33
    assert types.count("MatMulIntegerToFloat") == 3
    assert types.count("MultiHeadAttention") == 6  # attention stays float32
    values = {init.name: init for init in quantized.graph.initializer}
    for node in quantized.graph.node:
        if node.op_type == "MatMulInteger":
            stored = numpy_helper.to_array(values[node.input[1]])
            scale = numpy_helper.to_array(
                values[node.input[1].removesuffix("_quantized") + "_scale"]
            )
        elif node.op_type == "MatMulIntegerToFloat":
            stored = numpy_helper.to_array(values[node.input[1]])
            scale = numpy_helper.to_array(values[node.input[3]])
        else:
            continue
        assert stored.dtype == (np.int8 if weight_form() == "s8" else np.uint8)
        assert scale.shape == (stored.shape[1],), "one scale per output channel"
    # LayerNorm-fed inputs (Q, K, V share one; the first FFN matmul's) are smoothed: a Mul
    # by a per-channel factor before them
    producers = {out: node for node in quantized.graph.node for out in node.output}
    smoothed = {
        node.input[0]
        for node in quantized.graph.node
        if node.op_type == "DynamicQuantizeLinear"
        and producers[node.input[0]].op_type == "Mul"
        and producers[producers[node.input[0]].input[0]].op_type == "LayerNormalization"
    }
    assert len(smoothed) == 12


def test_rows_are_padded_to_their_group_not_to_a_bucket(
    fp32: Embedder, texts: list[str], reference: np.ndarray
) -> None:
    """One model runs every length: padded to 16, 32, ... tokens, the same vectors."""
    assert isinstance(fp32.encoder, ModelEncoder)
    assert fp32.encoder.lengths == (*range(16, 256, 16), 256)
    ran: list[int] = []
    encoder = fp32.onnx_encoder
    assert encoder is not None
    real_run = encoder.run

    def run(inputs: dict[str, np.ndarray]) -> np.ndarray:
        ran.append(inputs["keep"].shape[1])
        return real_run(inputs)

    encoder.run = run  # type: ignore[method-assign]
    try:
        token_ids = fp32.tokenize(texts)
        vectors = fp32.embed_ids(token_ids)
    finally:
        del encoder.run
    longest = sorted(len(ids) for ids in token_ids)
    # Sorted groups of 8, each padded to its longest rounded up to 16 tokens.
    assert ran == [-(-max(longest[start : start + 8]) // 16) * 16 for start in range(0, 32, 8)]
    assert cosines(vectors, reference).min() >= 0.99999


def test_a_model_whose_constants_hold_the_traced_length_is_refused() -> None:
    from onnx import TensorProto, helper

    from anekit.models.onnx_models import symbolic_length

    graph = helper.make_graph(
        [helper.make_node("Add", ["hidden", "bias"], ["embedding"])],
        "tied",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [8, 97])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [8, 97])],
        [numpy_helper.from_array(np.zeros((8, 97), np.float32), "bias")],
    )
    with pytest.raises(
        errors.ModelError, match="constant bias of shape \\(8, 97\\) has the traced"
    ):
        symbolic_length(helper.make_model(graph), 97)


def _reshape_model(target: list[int], traced: list[int]) -> onnx.ModelProto:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["hidden", "shape"], ["embedding"])],
        "reshape",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, traced)],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, target)],
        [numpy_helper.from_array(np.array(target, np.int64), "shape")],
    )
    return helper.make_model(graph)


def test_the_batch_is_made_symbolic_where_reshapes_keep_it_first() -> None:
    from anekit.models.onnx_models import symbolic_batch

    model = _reshape_model([5, 4, 3], [5, 12])
    symbolic_batch(model, 5)
    (shape,) = model.graph.initializer
    assert numpy_helper.to_array(shape).tolist() == [0, 4, 3]
    for value in (*model.graph.input, *model.graph.output):
        assert value.type.tensor_type.shape.dim[0].dim_param == "batch"


@pytest.mark.parametrize(
    ("target", "traced", "message"),
    [
        ([4, 5, 3], [12, 5], "cannot tell that its axis 0 is the batch"),  # batch not first
        ([5, 5, 3], [5, 15], "cannot tell that its axis 0 is the batch"),  # twice
        ([5, 12], [12, 5], "cannot tell that its axis 0 is the batch"),  # a transpose
    ],
)
def test_a_batch_that_reshapes_move_is_refused(
    target: list[int], traced: list[int], message: str
) -> None:
    from anekit.models.onnx_models import symbolic_batch

    with pytest.raises(errors.ModelError, match=message):
        symbolic_batch(_reshape_model(target, traced), 5)


def test_a_model_whose_constants_hold_the_traced_batch_is_refused() -> None:
    from onnx import TensorProto, helper

    from anekit.models.onnx_models import symbolic_batch

    graph = helper.make_graph(
        [helper.make_node("Add", ["hidden", "bias"], ["embedding"])],
        "tied",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [5, 97])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [5, 97])],
        [numpy_helper.from_array(np.zeros((5, 97), np.float32), "bias")],
    )
    with pytest.raises(
        errors.ModelError, match="constant bias of shape \\(5, 97\\) has the traced"
    ):
        symbolic_batch(helper.make_model(graph), 5)


def test_unknown_variant_is_refused(fp32: Embedder) -> None:
    assert VARIANTS == ("fp32", "int8")
    with pytest.raises(errors.ModelError, match="onnx variant must be one of fp32, int8"):
        OnnxSessions(fp32.model_id, fp32.config, fp32.weights, variant="fp16")


def test_a_missing_model_is_built_in_a_child_process_one_builder_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build runs in a fresh process (a daemon keeps none of its memory), under the
    folder's lock; what it builds is what an in-process build makes."""
    from anekit.models import onnx_models
    from tinybert import tiny_bert

    source = tiny_bert(tmp_path / "tiny-bert")
    monkeypatch.setenv("ANEKIT_PACKAGES", str(tmp_path / "packages"))
    here = tmp_path / "built-here"
    first = Embedder(source, runtime="onnx", variant="fp32", isolated_build=True)
    onnx_models.build_model(first.config, first.weights, "fp32", here)  # no source: here

    def refuse(*args: object) -> None:
        raise AssertionError("the model was built in this process")

    monkeypatch.setattr(onnx_models, "_build", refuse)
    texts = ["def parse(text):\n    return text.split()", "the ledger's totals"]
    vectors = first.encode(texts)  # builds, in a child process
    folder = folder_for(first.model_id, first.weights, "fp32")
    assert (folder / MODEL_FILE).read_bytes() == (here / MODEL_FILE).read_bytes()
    assert not list(folder.glob("*partial*"))
    np.testing.assert_allclose(vectors, Embedder(source, runtime="numpy").encode(texts), atol=1e-5)

    # A second builder waits for the lock, then finds the model built by the first.
    import fcntl
    import threading

    waiting = tmp_path / "waiting"
    waiting.mkdir()
    with (waiting / onnx_models.BUILD_LOCK).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        built: list[Path] = []
        thread = threading.Thread(
            target=lambda: built.append(
                onnx_models.build_model(first.config, first.weights, "fp32", waiting, source)
            )
        )
        thread.start()
        thread.join(0.5)
        assert thread.is_alive() and not built  # it waits for the holder
        (waiting / MODEL_FILE).write_bytes((here / MODEL_FILE).read_bytes())  # "its" build
        fcntl.flock(held, fcntl.LOCK_UN)
    thread.join(30)
    assert built == [waiting / MODEL_FILE]


def test_a_failed_child_build_names_the_model_and_why(tmp_path: Path) -> None:
    from anekit.models import onnx_models
    from tinybert import tiny_bert

    source = tiny_bert(tmp_path / "tiny-bert")
    embedder = Embedder(source, runtime="numpy")
    with pytest.raises(errors.ModelError, match="weights changed") as raised:
        onnx_models._build_in_child(source, "0" * 64, "int8", tmp_path / "out")
    assert str(source) in str(raised.value) and "int8" in str(raised.value)
    assert embedder.weights.digest != "0" * 64


def test_each_int8_weight_form_has_its_own_cache_folder_and_numerics(
    fp32: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model folder (or a store) moved to a machine that takes the other weight form
    is not reused: the u8 form has a folder and a store numerics of its own."""
    from anekit.models.onnx_models import int8_numerics
    from anekit.package import int8_kernels

    found = {}
    for form in int8_kernels.WEIGHT_FORMS:
        monkeypatch.setattr(int8_kernels, "weight_form", lambda form=form: form)
        found[form] = (folder_for(fp32.model_id, fp32.weights, "int8"), int8_numerics())
    (s8_folder, s8_numerics), (u8_folder, u8_numerics) = found["s8"], found["u8"]
    stem = f"-onnx{MODEL_FORMAT}-int8"
    assert s8_folder.name.endswith(stem) and u8_folder.name.endswith(f"{stem}-u8")
    assert (s8_numerics, u8_numerics) == (2, 3)
    assert folder_for(fp32.model_id, fp32.weights, "fp32").name.endswith(
        f"-onnx{MODEL_FORMAT}-fp32"
    )
