"""The runtime record (anekit.runtimes): every runtime named once, every reference in it
real, and a new runtime picked up everywhere from its one record."""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping

import numpy as np
import pytest

from anekit import runtimes
from anekit.backends import RunReport, available_backends, select_backend
from anekit.embedder import Embedder
from anekit.errors import BackendUnavailableError, ModelError
from anekit.lanes.engines import LANES, unavailable_reason
from anekit.models.batching import Batch
from anekit.models.encoders import EncoderOptions, LoadedModel, ModelEncoder, open_encoder
from anekit.runtimes import RUNTIMES, Runtime, attribute


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_every_reference_in_a_record_names_a_real_object(name: str) -> None:
    record = RUNTIMES[name]
    assert record.name == name
    references = [record.encoder, record.check, record.backend, record.lane_engine]
    for reference in filter(None, references):
        assert callable(attribute(reference)), reference  # imports the module, finds it


def test_a_reference_to_nothing_fails_loudly() -> None:
    with pytest.raises(AttributeError):
        attribute("anekit.runtimes:no_such_thing")
    with pytest.raises(ModuleNotFoundError):
        attribute("anekit.no_such_module:thing")


def test_the_backends_are_the_program_runtimes_in_their_order() -> None:
    names = [record.name for record in runtimes.program_runtimes()]
    assert names == ["coreai", "coreml", "sim", "onnx", "direct", "coreai-cpu"]  # numpy runs none
    assert available_backends() == [name for name in names if RUNTIMES[name].available()]
    with pytest.raises(BackendUnavailableError, match="unknown backend 'numpy'"):
        select_backend("numpy")


@pytest.mark.skipif(platform.system() == "Darwin", reason="Core ML runs on a Mac")
def test_off_a_mac_each_check_says_why_and_everyone_reads_it() -> None:
    assert RUNTIMES["coreml"].unavailable_reason() == "Core ML exists only on macOS"
    assert RUNTIMES["direct"].unavailable_reason() == "the direct ANE path needs macOS"
    assert unavailable_reason("ane") == (
        "coreai: Core AI on the Neural Engine needs macOS 27 (this is Linux); "
        "coreml: Core ML exists only on macOS"
    )
    with pytest.raises(BackendUnavailableError, match="Core ML exists only on macOS"):
        select_backend("coreml")
    with pytest.raises(BackendUnavailableError, match="coreml runtime cannot run here: Core ML"):
        Embedder(runtime="coreml")
    assert select_backend().name == "sim"  # the best that runs here; never direct unasked


def test_the_gpu_lane_names_each_runtime_it_could_not_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtimes, "core_ml_reason", lambda **_: "no Core ML here")
    monkeypatch.setattr(runtimes, "onnx_runtime_reason", lambda device="auto", **_: f"no {device}")
    assert unavailable_reason("gpu") == "coreml: no Core ML here; onnx: no cuda"
    assert unavailable_reason("cpu") == "no cpu"  # one runtime: its reason alone
    assert LANES["gpu"].variant == "fp32"  # the last choice, ONNX Runtime CUDA, when none runs


def test_a_lane_runs_the_first_of_its_runtimes_that_can_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtimes, "core_ml_reason", lambda **_: None)  # as on a Mac
    record, options = LANES["gpu"].choice()
    assert (record.name, options["compute_units"], LANES["gpu"].variant) == (
        "coreml",
        "CPU_AND_GPU",
        "fp16",
    )


def test_every_lane_runs_known_runtimes_in_their_variants() -> None:
    # One test, not one per lane: a test with "gpu" in its id is marked for a CUDA machine.
    for lane in LANES.values():
        for name, options in lane.runs:
            assert options["variant"] in RUNTIMES[name].variants, (lane.name, name)
            assert set(options) <= set(EncoderOptions.__dataclass_fields__), lane.name


# A runtime of the tests' own, added by one record: the pieces a new target brings.


class _DoublingSession:
    last_run: RunReport | None = None

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {name: np.asarray(value) * 2 for name, value in feeds.items()}


class DoublingBackend:
    name = "doubling"

    def load(self, request: object, mode: str | None = None) -> _DoublingSession:
        return _DoublingSession()


class OnesEncoder(ModelEncoder):
    label = "nothing at all"

    def run(self, batch: Batch) -> np.ndarray:
        return np.ones((len(batch.ids), self.dimension), np.float32)


def open_ones(model: LoadedModel, options: EncoderOptions) -> ModelEncoder:
    return OnesEncoder(model)


def refuse_on_sundays(**options: str) -> str | None:
    return "not today" if options.get("device") == "sunday" else None


_NEW = Runtime(
    "doubling",
    "nothing at all",
    "a runtime of the tests' own",
    check=f"{__name__}:refuse_on_sundays",
    backend=f"{__name__}:DoublingBackend",
    encoder=f"{__name__}:open_ones",
    variants=("fp32",),
)


@pytest.fixture
def new_runtime(monkeypatch: pytest.MonkeyPatch) -> Runtime:
    monkeypatch.setitem(RUNTIMES, _NEW.name, _NEW)
    return _NEW


def test_a_new_runtime_is_one_record_everyone_reads(new_runtime: Runtime) -> None:
    assert "doubling" in available_backends()
    assert isinstance(select_backend("doubling"), DoublingBackend)
    encoder = open_encoder("doubling", None, max_length=128)
    assert isinstance(encoder, OnesEncoder) and encoder.device == "nothing at all"
    embedder = Embedder(runtime="doubling", max_length=128)
    vectors = embedder.encode(["a", "bb"])
    assert vectors.shape == (2, embedder.dimension)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert new_runtime.unavailable_reason(device="sunday") == "not today"
    with pytest.raises(BackendUnavailableError, match="doubling runtime cannot run here: not"):
        new_runtime.require(device="sunday")


def test_a_lane_of_a_new_runtime_is_one_lane_kind(
    new_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anekit.lanes.engines import LaneKind, lane_variant, make_engine

    kind = LaneKind(
        "doubling", "a lane of the tests' own", 0.9, (("doubling", {"variant": "fp32"}),)
    )
    monkeypatch.setitem(LANES, "doubling", kind)
    assert unavailable_reason("doubling") is None and lane_variant("doubling") == "fp32"
    engine = make_engine("doubling", None, 128, None)
    assert engine.device == "nothing at all"
    vectors = engine.embed(engine.tokenize(["a", "bb"]))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    monkeypatch.setattr(sys.modules[__name__], "refuse_on_sundays", lambda **_: "closed")
    assert unavailable_reason("doubling") == "closed"


def test_the_older_names_still_work_and_say_the_new_ones() -> None:
    from anekit.models import onnx_models

    with pytest.warns(DeprecationWarning, match="is now OnnxSessions"):
        assert onnx_models.OnnxEncoder is onnx_models.OnnxSessions
    with Embedder(lanes=["numpy"]) as embedder:  # no worker starts before work comes
        assert embedder.scheduler is embedder.pool is embedder.encoder
        assert embedder.runtime == embedder.backend == "lanes"
        assert embedder.variant == "fp32"  # the numpy lane's vectors


def test_an_unavailable_runtime_names_those_that_run_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtimes, "core_ml_reason", lambda **_: "no Core ML here")
    with pytest.raises(BackendUnavailableError) as refused:
        RUNTIMES["coreml"].require()
    here = [name for name in RUNTIMES if RUNTIMES[name].available()]
    assert "numpy" in here and "coreml" not in here
    assert str(refused.value) == (
        f"the coreml runtime cannot run here: no Core ML here; runtimes that run here: "
        f"{', '.join(here)}"
    )


def test_an_unknown_runtime_is_named_with_the_known_ones() -> None:
    with pytest.raises(ModelError, match=r"must be one of coreai, coreml, sim, onnx, direct"):
        open_encoder("tpu")


def test_a_loaded_model_reads_its_weights_once_and_only_when_asked() -> None:
    from anekit.models.encoders import load_model

    model = load_model(None, max_length=128)
    assert "weights" not in vars(model)  # resolved and configured, weights not read yet
    first = model.weights
    assert model.weights is first
    assert load_model(model, 128) is model  # passed down as it is
    again = load_model(model, 256)
    assert again is not model and again.config.max_length == 256 and again.request is None
