"""The Whisper encoder in the ANE layout (issue 17, part 2): the fp32 NumPy encoder
against transformers' ``WhisperEncoder`` on a small random-weight model with the real
30-second window (3000 mel frames, 1500 positions), the traced fp16 program (all on the
ANE, no score tensor at the ANE's 2^20-element limit) in the simulator, and the log-mel
front end against ``WhisperFeatureExtractor``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit.analysis import analyze
from anekit.errors import ModelError
from anekit.models import whisper
from anekit.ops.limits import ATTENTION_SCORE_LIMIT
from tinywhisper import tiny_whisper, whisper_reference


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    return tiny_whisper(tmp_path_factory.mktemp("whisper") / "tiny-whisper")


@pytest.fixture(scope="module")
def features() -> np.ndarray:
    rng = np.random.default_rng(0)
    return (0.5 * rng.standard_normal((1, 80, 3000))).astype(np.float32)


@pytest.fixture(scope="module")
def reference(folder: Path, features: np.ndarray) -> np.ndarray:
    return np.asarray(whisper_reference(folder, features))  # (1, 1500, 64)


def _rows(states: Any) -> np.ndarray:
    """(B, C, 1, S) -> (B, S, C), float64."""
    return np.asarray(states, np.float64)[:, :, 0, :].transpose(0, 2, 1)


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    cosines = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    return float(cosines.min())


def test_the_fp32_encoder_matches_transformers(
    folder: Path, features: np.ndarray, reference: np.ndarray
) -> None:
    config = whisper.read_config(folder)
    assert (config.frames, config.positions) == (3000, 1500)
    encode = whisper.make_encoder(config, whisper.read_weights(folder))
    states = _rows(encode(features[:, :, None, :]))
    assert states.shape == reference.shape
    assert _min_cosine(states, reference) >= 0.99999
    np.testing.assert_allclose(states, reference, rtol=0, atol=1e-4)


def test_the_fp16_program_is_all_on_the_ane_with_split_attention(
    folder: Path, features: np.ndarray, reference: np.ndarray
) -> None:
    config = whisper.read_config(folder)
    encode = whisper.make_encoder(config, whisper.read_weights(folder), np.float16)
    x = features[:, :, None, :].astype(np.float16)
    program = anekit.compile(encode, x)
    function = analyze(program).functions[0]
    assert function.on_ane("a14") == len(function.compute_ops()) > 0
    ops = program.program.functions["main"].operations
    assert [op.op_type for op in ops if op.op_type == "conv"][:2] == ["conv", "conv"]
    scores = [op for op in ops if op.op_type == "matmul"]
    largest = max(int(np.prod(op.outputs[0].shape)) for op in scores)
    assert largest == 1500 * 500 < ATTENTION_SCORE_LIMIT  # keys x a third of the queries
    assert _min_cosine(_rows(program(x, backend="sim")), reference) >= 0.999


def test_query_chunks_keep_every_score_tensor_under_the_limit() -> None:
    assert whisper.query_chunks(1500) == [(0, 500), (500, 1000), (1000, 1500)]
    assert whisper.query_chunks(1024) == [(0, 512), (512, 1024)]  # 1024^2 is the limit
    assert whisper.query_chunks(100) == [(0, 100)]
    for positions in (1, 333, 1023, 1500, 3000):
        chunks = whisper.query_chunks(positions)
        assert chunks[0][0] == 0 and chunks[-1][1] == positions
        assert all(positions * (stop - start) < ATTENTION_SCORE_LIMIT for start, stop in chunks)


@pytest.mark.parametrize("seconds", [7.0, 31.5])  # padded to 30 s; cut to 30 s
def test_log_mel_matches_whispers_feature_extractor(seconds: float) -> None:
    from transformers import WhisperFeatureExtractor

    rng = np.random.default_rng(2)
    times = np.arange(int(16_000 * seconds)) / 16_000
    audio = 0.3 * np.sin(2 * np.pi * 440 * times) + 0.05 * rng.standard_normal(times.size)
    audio = audio.astype(np.float32)
    extractor: Any = WhisperFeatureExtractor()
    want = extractor(audio, sampling_rate=16_000, return_tensors="np").input_features[0]
    got = whisper.log_mel(audio)
    assert got.shape == want.shape == (80, 3000)
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-5)


def test_bad_inputs_are_refused_by_name(folder: Path, tmp_path: Path) -> None:
    config = whisper.read_config(folder)
    encode = whisper.make_encoder(config, whisper.read_weights(folder))
    with pytest.raises(ModelError, match=r"takes \(B, 80, 1, 3000\) features"):
        encode(np.zeros((1, 80, 1, 2000), np.float32))
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ModelError, match="is not whisper"):
        whisper.read_config(tmp_path)


def test_the_example_builds_reports_and_saves_the_package(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import runpy

    example = Path(__file__).resolve().parents[2] / "examples" / "whisper_encoder.py"
    main = runpy.run_path(str(example))["main"]
    out = tmp_path / "encoder.mlpackage"
    result = main([str(folder), "--out", str(out)])
    printed = capsys.readouterr().out
    assert result["on_ane"] == result["compute_ops"] and float(result["min_cosine"]) >= 0.999
    assert f"placement: {result['on_ane']} of {result['compute_ops']} compute ops" in printed
    assert "not on the ANE" not in printed and "(not a device figure)" in printed
    assert (out / "Manifest.json").is_file() and result["package"] == str(out)
    loaded = anekit.load(out)
    assert loaded.input_specs[0].shape == (1, 80, 1, 3000)
    assert loaded.output_specs[0].shape == (1, 64, 1, 1500)


def test_build_model_writes_the_encoder_package(folder: Path, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from anekit.cli import cli

    outcome = CliRunner().invoke(
        cli, ["build-model", str(folder), "--variant", "both", "--out", str(tmp_path), "--json"]
    )
    assert outcome.exit_code == 0, outcome.output
    built = json.loads(outcome.stdout)  # coremltools draws its int8 progress on stderr
    assert [item["variant"] for item in built] == ["fp16", "int8"]
    for item in built:
        assert item["ane"] == item["compute_ops"] > 0
        assert item["path"] == str(tmp_path / f"tiny-whisper-{item['variant']}.mlpackage")
    fp16, int8 = (Path(item["path"]) for item in built)
    sizes = [sum(f.stat().st_size for f in path.rglob("*.bin")) for path in (fp16, int8)]
    assert sizes[1] < 0.7 * sizes[0]  # int8 weights stored as int8
    program = anekit.load(fp16)
    assert [spec.name for spec in program.input_specs] == ["features"]
    assert program.output_specs[0].shape == (1, 64, 1, 1500)
