"""ModernBERT (issue 17): the fp32 NumPy encoders against transformers' ``ModernBertModel``
on a small random-weight model saved as a Hugging Face folder (MiniLM's tokenizer, so
that real code chunks can be its input), the traced fp16 program in the simulator, and
the model through every path a user takes: Embedder, the package, ONNX Runtime and the
CPU lane. The window (8) is shorter than every input, so the band mask is exercised;
layers 0 and 3 attend globally, 1 and 2 locally."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit.analysis import analyze
from anekit.embedder import Embedder
from anekit.errors import ModelError
from anekit.lanes.scheduler import Scheduler
from anekit.models.config import (
    FULL,
    GLOBAL_THETA,
    LOCAL_THETA,
    SLIDING,
    ModernBertConfig,
    load_config,
)
from anekit.models.embeddings import embed, row_inputs
from anekit.models.weights import ModernBertWeights, load_weights
from tinymodernbert import BUCKET_LENGTHS, HIDDEN, ids_of_lengths, tiny_modernbert

LENGTH = 48


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_modernbert(tmp_path_factory.mktemp("modernbert") / "tiny-modernbert")


def _config(folder: Path) -> ModernBertConfig:
    config = load_config(folder)
    assert isinstance(config, ModernBertConfig)
    return config


def _chunks() -> list[str]:
    from minilm import chunks

    return chunks()


@pytest.fixture(scope="module")
def inputs(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Two real code chunks as token ids (B, LENGTH), the second padded after 38 tokens."""
    from anekit.models.batching import load_tokenizer, tokenize

    first, second = tokenize(load_tokenizer(folder, LENGTH), _chunks()[:2])
    ids = np.zeros((2, LENGTH), np.int64)
    keep = np.zeros((2, LENGTH), np.float32)
    for row, tokens in enumerate((first, second[:37] + second[-1:])):
        ids[row, : len(tokens)], keep[row, : len(tokens)] = tokens, 1
    assert keep.sum(1).tolist() == [LENGTH, 38]
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


def _pooled(states: np.ndarray, keep: np.ndarray, pooling: str) -> np.ndarray:
    if pooling == "cls":
        return states[:, 0, :]
    weights = keep[:, :, None]
    return np.asarray((states * weights).sum(1) / weights.sum(1))


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.asarray((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def reference(folder: Path, inputs: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    ids, keep = inputs
    states = _transformers(folder, ids, keep)
    return {pooling: _pooled(states, keep, pooling) for pooling in ("mean", "cls")}


def test_the_config_names_both_layer_kinds_and_a_window_shorter_than_the_input(
    folder: Path,
) -> None:
    config = _config(folder)
    assert config.model_type == "modernbert"
    assert config.layer_types == (FULL, SLIDING, SLIDING, FULL)
    assert config.rope_theta == {FULL: GLOBAL_THETA, SLIDING: LOCAL_THETA}
    assert config.window == 8 < LENGTH
    assert (config.max_length, config.longest, config.pooling) == (512, 512, "mean")


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_fp32_encoders_match_transformers(
    folder: Path,
    inputs: tuple[np.ndarray, np.ndarray],
    reference: dict[str, np.ndarray],
    pooling: str,
) -> None:
    """Both layouts: the ANE layout (what the packages trace) and the row layout (what
    ONNX Runtime runs, its rotary tables and band mask computed from the positions)."""
    from anekit.models.architectures import make_encoder, make_row_encoder

    ids, keep = inputs
    config = dataclasses.replace(load_config(folder), pooling=pooling)
    weights = load_weights(folder, config)
    pooled = make_encoder(config, weights)(embed(weights, config, ids), keep)
    np.testing.assert_allclose(pooled, reference[pooling], rtol=0, atol=1e-4)
    assert _cosines(pooled, reference[pooling]).min() >= 0.99999
    row_encoder, names = make_row_encoder(config, weights)
    given = row_inputs(weights, config, ids, keep)
    assert tuple(given) == names == ("hidden", "keep", "positions")
    rows = row_encoder(*given.values())
    np.testing.assert_allclose(rows, reference[pooling], rtol=0, atol=1e-4)


def test_the_traced_fp16_program_is_all_on_the_ane_and_close_in_the_simulator(
    folder: Path, inputs: tuple[np.ndarray, np.ndarray], reference: dict[str, np.ndarray]
) -> None:
    from anekit.models.architectures import make_encoder

    ids, keep = inputs
    config = load_config(folder)
    weights = load_weights(folder, config)
    hidden = embed(weights, config, ids).astype(np.float16)
    program = anekit.compile(
        make_encoder(config, weights, np.float16), hidden, keep.astype(np.float16)
    )
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
    config = _config(copy)
    assert config.rope_theta == {FULL: 5000.0, SLIDING: 700.0}
    assert config.layer_types == (FULL, SLIDING, FULL, SLIDING)
    scaled = {**data, "rope_parameters": {FULL: {"rope_type": "yarn", "rope_theta": 1.0}}}
    (copy / "config.json").write_text(json.dumps(scaled))
    with pytest.raises(ModelError, match="rope_type 'yarn'"):
        load_config(copy)
    (copy / "config.json").write_text(json.dumps({**data, "hidden_activation": "swish"}))
    with pytest.raises(ModelError, match="hidden_activation 'swish' is not supported"):
        load_config(copy)
    # a checkpoint that does not match its config is named by tensor
    (copy / "config.json").write_text(json.dumps({**data, "intermediate_size": 80}))
    with pytest.raises(ModelError, match=r"layers\.0\.mlp\.Wi\.weight has shape \(192, 64\)"):
        load_weights(copy, load_config(copy))
    (copy / "config.json").write_text(json.dumps({**data, "norm_bias": True}))
    with pytest.raises(ModelError, match=r"missing layers\.0\.mlp_norm\.bias"):
        load_weights(copy, load_config(copy))


def test_biases_where_the_config_asks_for_them(
    tmp_path: Path, inputs: tuple[np.ndarray, np.ndarray]
) -> None:
    from anekit.models.architectures import make_encoder, make_row_encoder

    ids, keep = inputs
    biased = tiny_modernbert(
        tmp_path / "biased", norm_bias=True, attention_bias=True, mlp_bias=True
    )
    config = _config(biased)
    assert (config.norm_bias, config.attention_bias, config.mlp_bias) == (True, True, True)
    weights = load_weights(biased, config)
    expected = _pooled(_transformers(biased, ids, keep), keep, "mean")
    pooled = make_encoder(config, weights)(embed(weights, config, ids), keep)
    assert _cosines(pooled, expected).min() >= 0.99999
    rows = make_row_encoder(config, weights)[0](*row_inputs(weights, config, ids, keep).values())
    assert _cosines(rows, expected).min() >= 0.99999


# The model through the paths a user takes. The fp32 NumPy path (what admits a lane, the
# known answers' reference for a model other than the default) is anchored to transformers
# on the known-answer chunks; every other path is compared with it.


def _normalized(vectors: np.ndarray) -> np.ndarray:
    return np.asarray(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def test_embedder_picks_modernbert_from_the_folder_and_matches_transformers(folder: Path) -> None:
    from anekit.models import known_answers

    embedder = Embedder(folder, runtime="numpy")
    assert embedder.config.model_type == "modernbert" and embedder.dimension == HIDDEN
    texts = known_answers.load().texts[:8]
    vectors = embedder.encode(texts)
    token_ids = embedder.tokenize(texts)
    length = max(len(ids) for ids in token_ids)
    ids = np.zeros((len(texts), length), np.int64)
    keep = np.zeros((len(texts), length), np.float32)
    for row, tokens in enumerate(token_ids):
        ids[row, : len(tokens)], keep[row, : len(tokens)] = tokens, 1
    assert length > 128 and keep.sum(1).min() < length  # more than one bucket, padded rows
    want = _normalized(_pooled(_transformers(folder, ids, keep), keep, "mean"))
    assert _cosines(vectors, want).min() >= 0.99999


def test_models_info_describes_a_modernbert_folder(folder: Path) -> None:
    from click.testing import CliRunner

    from anekit.cli import cli

    outcome = CliRunner().invoke(cli, ["models", "info", str(folder), "--json"])
    assert outcome.exit_code == 0, outcome.output
    info = json.loads(outcome.stdout)
    assert (info["type"], info["layers"], info["hidden_size"], info["heads"]) == (
        "modernbert",
        4,
        HIDDEN,
        2,
    )
    assert (info["max_length"], info["longest"], info["pooling"]) == (512, 512, "mean")


@pytest.fixture(scope="module")
def built(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``anekit build-model FOLDER --variant fp16 --json``: one package, every bucket."""
    from click.testing import CliRunner

    from anekit.cli import cli

    out = tmp_path_factory.mktemp("modernbert-packages")
    outcome = CliRunner().invoke(
        cli, ["build-model", str(folder), "--variant", "fp16", "--out", str(out), "--json"]
    )
    assert outcome.exit_code == 0, outcome.output
    (result,) = json.loads(outcome.stdout)
    return dict(result)


def test_build_model_puts_every_bucket_all_on_the_ane(built: dict[str, Any]) -> None:
    assert built["model"] == "tiny-modernbert" and built["variant"] == "fp16"
    assert [bucket["sequence"] for bucket in built["buckets"]] == [128, 192, 256, 320, 384, 512]
    assert set(built["placement"]) == {f"seq{size}" for size in (128, 192, 256, 320, 384, 512)}
    for function in built["placement"].values():
        for counts in function.values():
            assert counts["ane"] == counts["compute_ops"] > 0
    placement = analyze(Path(built["path"]))
    assert not any(op.op_type == "gather" for f in placement.functions for op in f.compute_ops())


def test_the_package_in_the_simulator_matches_the_fp32_path_at_every_bucket(
    folder: Path, built: dict[str, Any]
) -> None:
    token_ids = ids_of_lengths(folder, BUCKET_LENGTHS)
    want = Embedder(folder, runtime="numpy").embed_ids(token_ids)
    simulated = Embedder(folder, runtime="sim", package=Path(built["path"]))
    got = simulated.embed_ids(token_ids)
    assert simulated.package().buckets == (128, 192, 256, 320, 384, 512)
    assert _cosines(got, want).min() >= 0.999


@pytest.mark.parametrize(("variant", "floor"), [("fp32", 0.99999), ("int8", 0.98)])
def test_onnx_runtime_takes_any_length(folder: Path, variant: str, floor: float) -> None:
    """One ONNX model for every batch and length: the rotary tables and the band come
    from the positions input, so nothing in it is tied to the traced length."""
    token_ids = ids_of_lengths(folder, (9, 40, 100, 333, 512))
    want = Embedder(folder, runtime="numpy").embed_ids(token_ids)
    got = Embedder(folder, runtime="onnx", variant=variant).embed_ids(token_ids)
    assert _cosines(got, want).min() >= floor


def test_the_cpu_lane_is_admitted_on_the_models_own_known_answers(folder: Path) -> None:
    token_ids = ids_of_lengths(folder, (30, 200))
    want = Embedder(folder, runtime="numpy").embed_ids(token_ids)
    with Embedder(folder, lanes=["cpu"]) as embedder:
        got = embedder.embed_ids(token_ids)
        pool = embedder.pool
        assert isinstance(pool, Scheduler)
        lane = pool.lanes["cpu"]
        assert lane.admitted_once and lane.hello["model"] == "tiny-modernbert"
        assert lane.hello["min_cosine"] >= lane.hello["floor"] == 0.98
    assert _cosines(got, want).min() >= 0.98


@pytest.mark.slow  # ~50 s of a worker; the int8 weight path is covered on small programs
def test_the_int8_package_is_all_on_the_ane_and_within_its_bound(
    folder: Path, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from anekit.cli import cli

    outcome = CliRunner().invoke(
        cli, ["build-model", str(folder), "--variant", "int8", "--out", str(tmp_path), "--json"]
    )
    assert outcome.exit_code == 0, outcome.output
    (built,) = json.loads(outcome.stdout)
    assert built["variant"] == "int8" and len(built["placement"]) == 6
    assert all(
        counts["ane"] == counts["compute_ops"]
        for function in built["placement"].values()
        for counts in function.values()
    )
    token_ids = ids_of_lengths(folder, BUCKET_LENGTHS)
    want = Embedder(folder, runtime="numpy").embed_ids(token_ids)
    got = Embedder(folder, runtime="sim", package=Path(built["path"])).embed_ids(token_ids)
    cosines = _cosines(got, want)
    assert cosines.min() >= 0.99, cosines
    assert cosines.min() < 0.9999999  # the weights really are quantized


def test_a_bfloat16_checkpoint_reads_as_float32(folder: Path, tmp_path: Path) -> None:
    """Checkpoints are often stored in bfloat16, which NumPy (and so safetensors' NumPy
    reader) cannot hold: the values must come back exact, as float32."""
    import torch
    from transformers import ModernBertModel

    model: Any = ModernBertModel.from_pretrained(folder)
    model = model.to(torch.bfloat16)
    model.save_pretrained(tmp_path)
    state = {name: value.float().numpy() for name, value in model.state_dict().items()}
    config = _config(folder)
    weights = load_weights(tmp_path, config)
    assert isinstance(weights, ModernBertWeights)
    np.testing.assert_array_equal(weights.word, state["embeddings.tok_embeddings.weight"])
    wqkv = weights.tensors["layers.1.attn.Wqkv.weight"]
    assert wqkv.dtype == np.float32
    np.testing.assert_array_equal(wqkv, state["layers.1.attn.Wqkv.weight"])
    assert weights.digest != load_weights(folder, config).digest


def test_on_a_mac_the_package_runs_through_core_ml(
    folder: Path, built: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """coremltools and Core ML as the contract-enforcing stand-ins, the simulator playing
    the device (tests/standins.py): the package is compiled once, every bucket is loaded
    for the Neural Engine, and each batch runs in its own bucket."""
    from anekit import runtimes
    from standins import CoreMLTools, simulated_device

    monkeypatch.setattr(runtimes, "core_ml_reason", lambda **_: None)  # as on a Mac
    tools = CoreMLTools(compute=simulated_device()).install(monkeypatch)
    token_ids = ids_of_lengths(folder, (100, 300))
    want = Embedder(folder, runtime="numpy").embed_ids(token_ids)
    on_core_ml = Embedder(folder, runtime="coreml", package=Path(built["path"]))
    got = on_core_ml.embed_ids(token_ids)
    assert _cosines(got, want).min() >= 0.999
    assert len(tools.compiles) == 1
    assert sorted(load.function_name for load in tools.loads) == sorted(built["placement"])
    assert {str(load.compute_units) for load in tools.loads} == {"ComputeUnit.CPU_AND_NE"}
