"""The embedding models and the Whisper encoder through Core AI (issue 36): each package
written as one ``.aimodel`` (every bucket a function), verified, run by Core AI's own CPU
runtime on Linux (real, not a stand-in: Apple's reference executor, never an ANE figure)
and compared with anekit's fp32 reference; and the commands that write the assets."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import anekit
from anekit.cli import cli
from anekit.embedder import Embedder

coreai = pytest.importorskip("coreai.authoring", reason="the coreai extra")

from anekit.models.package import asset_path, build_asset  # noqa: E402
from anekit.package.coreai import LoadedFunction  # noqa: E402

BUCKETS = ("seq128", "seq192", "seq256", "seq320", "seq384", "seq512")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.asarray((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1))


def _bytecode(asset: Path) -> str:
    """The asset's program as MLIR text, read back by Core AI's builder."""
    return str(coreai.AIModelAsset.load(asset).program)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Four real code chunks: one batch of the 128 bucket (Core AI's CPU runtime takes
    about 15 s per MiniLM batch on a 2-core machine)."""
    from minilm import chunks, tokenizer

    short = [text[:300] for text in chunks()[:4]]
    assert all(sum(tokenizer().encode(text).attention_mask) <= 128 for text in short)
    return short


@pytest.fixture(scope="module")
def reference(texts: list[str]) -> np.ndarray:
    return Embedder(runtime="numpy", max_length=512).encode(texts)


# The int8 bucket package takes ~3 minutes of a CI worker to build (see
# test_model_package_int8.py): `make test-slow` runs that case; Core AI's per-channel
# dequantize is checked on small programs in tests/package/test_coreai.py.
@pytest.mark.parametrize(
    ("variant", "floor"), [("fp16", 0.9999), pytest.param("int8", 0.99, marks=pytest.mark.slow)]
)
def test_minilm_buckets_run_on_core_ai_as_the_fp32_reference(
    variant: str, floor: float, texts: list[str], reference: np.ndarray, request: Any
) -> None:
    """The bucket package (the package tests' own, shared) as one asset: six functions,
    the weights stored once, int8 weights as Core AI's per-channel dequantize."""
    package = request.getfixturevalue(variant).package()  # conftest's fp16 / int8 embedders
    embedder = Embedder(runtime="coreai-cpu", max_length=512, variant=variant)
    got = embedder.encode(texts)
    assert embedder.encoder.device == "CPU (Core AI reference runtime; not an ANE)"
    cosines = _cosines(got, reference)
    assert cosines.min() >= floor, cosines
    asset = asset_path(package.path)
    assert coreai.AIModelAsset.is_valid(asset)
    program = _bytecode(asset)
    from_asset = anekit.load(asset, function="seq256")  # the package inside it
    from_package = anekit.load(package.path, function="seq256")
    assert from_asset.input_specs == from_package.input_specs
    for name in BUCKETS:
        assert f"coreai.graph @{name}(" in program
    weights = sum(item.stat().st_size for item in package.path.rglob("*.bin"))
    bytecode = (asset / "main.mlirb").stat().st_size
    assert bytecode < 1.2 * weights  # six functions, one copy of the weights
    if variant == "int8":
        assert "coreai.dequantize" in program
    else:
        assert "dequantize" not in program


def test_an_asset_from_other_weights_is_written_again(fp16: Any, tmp_path: Path) -> None:
    """The cached asset is trusted only while the package inside it is the package
    beside it (same weights, variant and buckets)."""
    from anekit.models.package import asset_matches, ensure_asset, read_package

    info = read_package(fp16.package().path)
    asset = ensure_asset(info)  # written now, or the one the first test wrote
    assert asset == asset_path(info.path) and asset_matches(asset, info)
    stamp = (asset / "main.mlirb").stat().st_mtime_ns
    assert ensure_asset(info) == asset and (asset / "main.mlirb").stat().st_mtime_ns == stamp
    other = read_package(info.path)
    assert not asset_matches(asset, type(other)(**{**vars(other), "weights_sha256": "0" * 64}))
    assert not asset_matches(asset, type(other)(**{**vars(other), "buckets": (128, 1024)}))
    assert not asset_matches(tmp_path / "missing.aimodel", info)
    copy = tmp_path / asset.name
    shutil.copytree(asset, copy)
    (copy / "metadata.json").write_text("{ not json")  # Core AI would refuse to load it
    assert not asset_matches(copy, info)


def test_modernbert_runs_on_core_ai_as_the_fp32_reference(tmp_path: Path) -> None:
    from tinymodernbert import ids_of_lengths, tiny_modernbert

    folder = tiny_modernbert(tmp_path / "tiny-modernbert")
    token_ids = ids_of_lengths(folder, (30, 100))  # the window (8) shorter than both
    want = Embedder(folder, runtime="numpy", max_length=128).embed_ids(token_ids)
    got = Embedder(folder, runtime="coreai-cpu", max_length=128).embed_ids(token_ids)
    assert _cosines(got, want).min() >= 0.999


@pytest.mark.slow
def test_the_whisper_encoder_runs_on_core_ai_as_transformers(tmp_path: Path) -> None:
    """The 30-second encoder (1500 positions, attention split in query chunks) as an
    asset, against transformers' WhisperEncoder."""
    pytest.importorskip("torch")
    from anekit.models import whisper
    from tinywhisper import tiny_whisper, whisper_reference

    folder = tiny_whisper(tmp_path / "tiny-whisper")
    features = (0.5 * np.random.default_rng(0).standard_normal((1, 80, 3000))).astype(np.float32)
    package = whisper.build_package(folder, tmp_path / "encoder.mlpackage")
    asset = build_asset(package)
    loaded = LoadedFunction(asset)
    try:
        (states,) = loaded({"features": features[:, :, None, :].astype(np.float16)}).values()
    finally:
        loaded.close()
    rows = np.asarray(states, np.float64)[:, :, 0, :].transpose(0, 2, 1)  # (1, 1500, 64)
    assert _cosines(rows, whisper_reference(folder, features)).min() >= 0.999


def test_build_model_writes_the_asset_alone_or_beside_the_package(tmp_path: Path) -> None:
    """--format coreai writes only the asset (the package lives inside it); --format both
    writes both; the JSON names each with its size and emit time (the Whisper encoder:
    one function, quick to build)."""
    pytest.importorskip("torch")
    from tinywhisper import tiny_whisper

    folder = tiny_whisper(tmp_path / "tiny-whisper")
    runner = CliRunner()
    for format_name, out in (("coreai", tmp_path / "ai"), ("both", tmp_path / "both")):
        outcome = runner.invoke(
            cli,
            ["build-model", str(folder), "--variant", "fp16", "--format", format_name,
             "--out", str(out), "--json"],
        )  # fmt: skip
        assert outcome.exit_code == 0, outcome.output
        (result,) = json.loads(outcome.stdout)
        asset = result["coreai"]
        assert asset["path"] == str(out / "tiny-whisper-fp16.aimodel")
        assert asset["functions"] == ["main"]
        assert 0 < asset["bytecode_bytes"] < asset["bytes"] and asset["emit_seconds"] > 0
        listed = sorted(item.name for item in out.iterdir())
        if format_name == "coreai":
            assert listed == ["tiny-whisper-fp16.aimodel"]
            assert result["path"] == asset["path"]
        else:
            assert listed == ["tiny-whisper-fp16.aimodel", "tiny-whisper-fp16.mlpackage"]
            assert result["path"] == str(out / "tiny-whisper-fp16.mlpackage")
        program = anekit.load(asset["path"])
        assert program.input_specs[0].shape == (1, 80, 1, 3000)


def test_convert_writes_an_asset_of_the_same_program(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")

    class Tiny(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x: Any) -> Any:
            return torch.relu(self.linear(x))

    model = tmp_path / "tiny.pt"
    torch.jit.trace(Tiny().eval(), torch.zeros(2, 4)).save(str(model))
    runner = CliRunner()
    asset = tmp_path / "tiny.aimodel"
    outcome = runner.invoke(
        cli,
        ["convert", str(model), "--input", "2,4", "--to", "coreai", "--out", str(asset), "--json"],
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["package"]["path"] == str(asset)
    assert sorted(item.name for item in tmp_path.iterdir()) == ["tiny.aimodel", "tiny.pt"]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    program = anekit.load(asset)
    on_core_ai = np.asarray(program(x, backend="coreai-cpu"), np.float32)
    np.testing.assert_allclose(
        on_core_ai, np.asarray(program(x, backend="sim"), np.float32), atol=2e-3
    )
    both = runner.invoke(
        cli, ["convert", str(model), "--input", "2,4", "--to", "both", "--out",
              str(tmp_path / "b.mlpackage"), "--json"],
    )  # fmt: skip
    assert both.exit_code == 0, both.output
    assert json.loads(both.stdout)["coreai"]["path"] == str(tmp_path / "b.aimodel")
    wrong = runner.invoke(
        cli, ["convert", str(model), "--input", "2,4", "--to", "coreai", "--out",
              str(tmp_path / "x.mlpackage")],
    )  # fmt: skip
    assert wrong.exit_code == 2
    assert "a package path must end in .aimodel" in wrong.output


# -- macOS 27 (stand-ins: tests/standins_coreai.py) ---------------------------------------


@pytest.fixture
def mac27(monkeypatch: pytest.MonkeyPatch) -> Any:
    """macOS 27 with the OS's Core AI; loads run on Core AI's real CPU runtime."""
    from standins_coreai import CoreAIOnMac

    return CoreAIOnMac().install(monkeypatch)


def test_on_macos_27_the_embedder_loads_the_asset_with_the_neural_engine_preferred(
    fp16: Any, mac27: Any
) -> None:
    """The default runtime there is Core AI; its encoder loads the bucket asset once, at
    open, preferring the Neural Engine, and says so."""
    from anekit.runtimes import default_runtime

    assert default_runtime() == "coreai"
    embedder = Embedder(max_length=512)
    assert embedder.runtime == "coreai"
    assert embedder.encoder.device == "ANE (Core AI)"
    assert mac27.preferred == ["neural_engine"]  # loaded at open, not at the first request
    assert mac27.loads[0][0] == asset_path(fp16.package().path)


def test_the_ane_lane_runs_core_ai_first_and_core_ml_when_core_ai_refuses_the_model(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A lane's runtimes are tried in order: Core AI (which hands Core ML what it
    cannot take), then Core ML; a refusal of a runtime without a fallback is the lane's."""
    from anekit.backends import ProgramRefused
    from anekit.errors import ProgramError
    from anekit.lanes import engines
    from anekit.models import encoders
    from anekit.runtimes import RUNTIMES

    assert [name for name, _ in engines.LANES["ane"].runs] == ["coreai", "coreml"]
    for name in ("coreai", "coreml"):  # both can run on this pretend Mac
        monkeypatch.setitem(RUNTIMES, name, dataclasses.replace(RUNTIMES[name], check=None))
    opened: list[str] = []

    def open_encoder(kind: str, *args: Any, **kwargs: Any) -> str:
        opened.append(kind)
        if kind == "coreai" and refuse:
            raise refuse("no Core AI lowering for these ops: topk (1)")
        return f"{kind} encoder"

    monkeypatch.setattr(encoders, "open_encoder", open_encoder)
    monkeypatch.setattr(engines, "EncoderEngine", lambda encoder: encoder)
    refuse: Any = None
    assert str(engines.make_engine("ane", None, 512, None)) == "coreai encoder"
    assert opened == ["coreai"]
    refuse, opened[:] = ProgramRefused, []
    with caplog.at_level("WARNING"):
        assert str(engines.make_engine("ane", None, 512, None)) == "coreml encoder"
    assert opened == ["coreai", "coreml"]
    assert "coreai refused the model (no Core AI lowering for these ops: topk (1))" in caplog.text
    refuse, opened[:] = ProgramError, []  # not a refusal (a package that failed to build)
    with pytest.raises(ProgramError, match="topk"):
        engines.make_engine("ane", None, 512, None)
    assert opened == ["coreai"]
    refuse = ProgramRefused
    monkeypatch.setitem(RUNTIMES, "coreai", dataclasses.replace(RUNTIMES["coreai"], fallback=None))
    with pytest.raises(ProgramRefused, match="topk"):
        engines.make_engine("ane", None, 512, None)


def test_the_default_embedder_hands_core_ml_a_model_core_ai_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Embedder() on macOS 27 picks Core AI; a model Core AI refuses at open goes to Core
    ML (here a stand-in: the simulator's encoder), with a warning; named, Core AI refuses."""
    from anekit.backends import ProgramRefused
    from anekit.models import encoders
    from anekit.runtimes import RUNTIMES

    monkeypatch.setitem(RUNTIMES, "coreai", dataclasses.replace(RUNTIMES["coreai"], check=None))
    stand_in = dataclasses.replace(
        RUNTIMES["coreml"], check=None, encoder="anekit.models.encoders:open_sim"
    )
    monkeypatch.setitem(RUNTIMES, "coreml", stand_in)

    def refused(*args: Any) -> Any:
        raise ProgramRefused("Core AI cannot run all-MiniLM-L6-v2: no Core AI lowering for topk")

    monkeypatch.setattr(encoders, "open_coreai", refused)
    with pytest.warns(RuntimeWarning, match="no Core AI lowering for topk; embedding on coreml"):
        embedder = Embedder(max_length=128)
    assert embedder.runtime == "coreml"
    with pytest.raises(ProgramRefused, match="topk"):
        Embedder(runtime="coreai", max_length=128)
