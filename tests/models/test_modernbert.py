"""ModernBERT in the ANE layout (issue 17, part 1): the fp32 NumPy encoder against
transformers' ``ModernBertModel`` on a small random-weight model saved as a Hugging Face
folder, and the traced fp16 program in the simulator. The window (8) is shorter than
the sequence (48), so the sliding layers' band mask is exercised; layers 0 and 3 attend
globally, 1 and 2 locally."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit.analysis import analyze
from anekit.errors import ModelError
from anekit.models import modernbert as mb

LENGTH = 48


def _tiny_folder(path: Path, **overrides: Any) -> Path:
    """A random-weight ModernBERT saved as a Hugging Face folder."""
    torch = pytest.importorskip("torch")
    from transformers import ModernBertConfig, ModernBertModel

    torch.manual_seed(0)
    settings: dict[str, Any] = {
        "vocab_size": 200,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "max_position_embeddings": 256,
        "local_attention": 16,
        "global_attn_every_n_layers": 3,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "cls_token_id": 1,
        "sep_token_id": 2,
        "attn_implementation": "eager",
    }
    model: Any = ModernBertModel(ModernBertConfig(**{**settings, **overrides}))
    model.eval()
    with torch.no_grad():  # weights far from the tiny init, so every term matters
        for name, parameter in model.named_parameters():
            noise = torch.randn_like(parameter)
            parameter.copy_(1 + 0.1 * noise if "norm" in name else 0.2 * noise)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_folder(tmp_path_factory.mktemp("modernbert") / "tiny-modernbert")


@pytest.fixture(scope="module")
def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    ids = rng.integers(3, 200, (2, LENGTH))
    keep = np.ones((2, LENGTH), np.float32)
    keep[1, 38:] = 0  # the second row is padded
    ids[1, 38:] = 0
    return ids, keep


def _transformers(folder: Path, ids: np.ndarray, keep: np.ndarray) -> np.ndarray:
    import torch
    from transformers import ModernBertModel

    model: Any = ModernBertModel.from_pretrained(folder, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        states = model(
            input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(keep).long()
        ).last_hidden_state.numpy()
    return np.asarray(states, np.float64)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.asarray((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def reference(folder: Path, inputs: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    ids, keep = inputs
    states = _transformers(folder, ids, keep)
    weights = keep[:, :, None]
    return {"mean": (states * weights).sum(1) / weights.sum(1), "cls": states[:, 0, :]}


def test_the_config_names_both_layer_kinds_and_a_window_shorter_than_the_input(
    folder: Path,
) -> None:
    config = mb.read_config(folder)
    assert config.layer_types == (mb.FULL, mb.SLIDING, mb.SLIDING, mb.FULL)
    assert config.rope_theta == {mb.FULL: mb.GLOBAL_THETA, mb.SLIDING: mb.LOCAL_THETA}
    assert config.window == 8 < LENGTH


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_fp32_encoder_matches_transformers(
    folder: Path,
    inputs: tuple[np.ndarray, np.ndarray],
    reference: dict[str, np.ndarray],
    pooling: str,
) -> None:
    ids, keep = inputs
    config = mb.read_config(folder, pooling=pooling)
    weights = mb.read_weights(folder)
    pooled = mb.make_encoder(config, weights, LENGTH)(mb.embed(weights, ids), keep)
    assert _cosines(pooled, reference[pooling]).min() >= 0.99999
    np.testing.assert_allclose(pooled, reference[pooling], rtol=0, atol=1e-4)


def test_the_traced_fp16_program_is_all_on_the_ane_and_close_in_the_simulator(
    folder: Path, inputs: tuple[np.ndarray, np.ndarray], reference: dict[str, np.ndarray]
) -> None:
    ids, keep = inputs
    config = mb.read_config(folder)
    weights = mb.read_weights(folder)
    hidden = mb.embed(weights, ids).astype(np.float16)
    encode = mb.make_encoder(config, weights, LENGTH, np.float16)
    program = anekit.compile(encode, hidden, keep.astype(np.float16))
    function = analyze(program).functions[0]
    assert function.on_ane("a14") == len(function.compute_ops()) > 0
    assert not any(op.op_type == "gather" for op in function.compute_ops())
    simulated = program(hidden, keep.astype(np.float16), backend="sim")
    assert _cosines(simulated, reference["mean"]).min() >= 0.999


def test_old_style_rope_keys_and_bad_configs(folder: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    data: dict[str, Any] = json.loads((copy / "config.json").read_text())
    data.pop("rope_parameters", None)
    data.pop("layer_types", None)
    data.update(global_rope_theta=5000.0, local_rope_theta=700.0, global_attn_every_n_layers=2)
    (copy / "config.json").write_text(json.dumps(data))
    config = mb.read_config(copy)
    assert config.rope_theta == {mb.FULL: 5000.0, mb.SLIDING: 700.0}
    assert config.layer_types == (mb.FULL, mb.SLIDING, mb.FULL, mb.SLIDING)
    (copy / "config.json").write_text(json.dumps({**data, "model_type": "bert"}))
    with pytest.raises(ModelError, match="is not modernbert"):
        mb.read_config(copy)
    scaled = {**data, "rope_parameters": {mb.FULL: {"rope_type": "yarn", "rope_theta": 1.0}}}
    (copy / "config.json").write_text(json.dumps(scaled))
    with pytest.raises(ModelError, match="rope_type 'yarn'"):
        mb.read_config(copy)


def test_biases_where_the_config_asks_for_them(
    tmp_path: Path, inputs: tuple[np.ndarray, np.ndarray]
) -> None:
    ids, keep = inputs
    biased = _tiny_folder(tmp_path / "biased", norm_bias=True, attention_bias=True, mlp_bias=True)
    config = mb.read_config(biased)
    assert (config.norm_bias, config.attention_bias, config.mlp_bias) == (True, True, True)
    weights = mb.read_weights(biased)
    pooled = mb.make_encoder(config, weights, LENGTH)(mb.embed(weights, ids), keep)
    states = _transformers(biased, ids, keep)
    expected = (states * keep[:, :, None]).sum(1) / keep.sum(1, keepdims=True)
    assert _cosines(pooled, expected).min() >= 0.99999
