"""Attention fused into ONNX Runtime's MultiHeadAttention (anekit.package.onnx_attention)
on a tiny BERT's row encoder: the same vectors, padded rows included, and nothing fused
where the mask is not the encoder's."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

import anekit
from anekit.models.architectures import make_row_encoder
from anekit.models.config import load_config
from anekit.models.weights import load_weights
from anekit.package.onnx_attention import fuse_attention
from anekit.package.onnx_emitter import to_onnx
from tinybert import HEADS, HIDDEN, LAYERS, tiny_bert

BATCH, LENGTH = 3, 11


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> onnx.ModelProto:
    folder = tiny_bert(tmp_path_factory.mktemp("tiny") / "bert")
    config = load_config(folder)
    encode, names = make_row_encoder(config, load_weights(folder, config))
    assert names == ("hidden", "keep")
    program = anekit.compile(
        encode,
        anekit.TensorSpec((BATCH, LENGTH, HIDDEN), np.float32, "hidden"),
        anekit.TensorSpec((BATCH, LENGTH), np.float32, "keep"),
        output_names=["embedding"],
        passes=False,
    )
    model: onnx.ModelProto = to_onnx(program)
    return model


def embed(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return np.asarray(session.run(["embedding"], feeds)[0])


def feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    keep = np.ones((BATCH, LENGTH), np.float32)
    keep[1, 6:] = 0  # a padded row: the mask matters
    keep[2, 2:] = 0
    return {"hidden": rng.normal(0, 1, (BATCH, LENGTH, HIDDEN)).astype(np.float32), "keep": keep}


def test_fused_attention_computes_the_same(traced: onnx.ModelProto) -> None:
    fused = onnx.ModelProto()
    fused.CopyFrom(traced)
    assert fuse_attention(fused) == LAYERS
    kinds = collections.Counter(node.op_type for node in fused.graph.node)
    assert kinds["MultiHeadAttention"] == LAYERS and kinds["Softmax"] == 0
    (node,) = {n.op_type: n for n in fused.graph.node if n.op_type == "MultiHeadAttention"}.values()
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["num_heads"] == HEADS and attributes["scale"] == 1.0
    onnx.checker.check_model(fused)
    want, got = embed(traced, feeds()), embed(fused, feeds())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # no initializer left that nothing reads
    read = {name for n in fused.graph.node for name in n.input}
    assert all(item.name in read for item in fused.graph.initializer)


def test_a_mask_that_is_not_the_encoders_is_left_alone(traced: onnx.ModelProto) -> None:
    other = onnx.ModelProto()
    other.CopyFrom(traced)
    (one,) = [n for n in other.graph.node if n.op_type == "Sub"]  # (1 - keep)
    for item in other.graph.initializer:
        if item.name == one.input[0]:  # (2 - keep)
            item.CopyFrom(numpy_helper.from_array(np.array(2.0, np.float32), item.name))
    before = len(other.graph.node)
    assert fuse_attention(other) == 0
    assert len(other.graph.node) == before


def test_a_graph_without_the_keep_input_is_left_alone(traced: onnx.ModelProto) -> None:
    other = onnx.ModelProto()
    other.CopyFrom(traced)
    assert fuse_attention(other, keep="mask") == 0


def test_cached_models_are_fused(tmp_path: Path) -> None:
    """The onnx backend's MiniLM (fp32 and int8) carries one fused attention per layer."""
    from anekit.embedder import Embedder
    from anekit.models.onnx_models import MODEL_FILE, folder_for

    for variant in ("fp32", "int8"):
        embedder = Embedder(runtime="onnx", variant=variant)
        embedder.encode(["x"])
        model = onnx.load(
            str(folder_for(embedder.model_id, embedder.weights, variant) / MODEL_FILE)
        )
        kinds = collections.Counter(node.op_type for node in model.graph.node)
        assert kinds["MultiHeadAttention"] == 6 and kinds["Softmax"] == 0, variant
