"""``anekit models fetch NAME``: a model from the Hugging Face Hub, every file checked.

This machine cannot reach the Hub, so the real client (``huggingface_hub``) talks to a Hub
on 127.0.0.1 that answers as the Hub does (``/api/models/REPO/revision/REV`` with its
files' sizes, git blob ids and LFS SHA-256s; ``/REPO/resolve/COMMIT/FILE`` with the
``X-Repo-Commit``, ``ETag``/``X-Linked-Etag`` and size headers the client reads). The
model is a random-weight ModernBERT folder in granite-embedding-small-english-r2's
layout (its file list, CLS pooling); the slow test uses granite's exact configuration
(12 layers, 384 wide), the fast one a 4-layer one. Unverified against the real Hub.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
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
    one repository at one commit; ``tamper`` serves other bytes than it states."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.tamper: dict[str, bytes] = {}
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
                hub_.requests.append(f"{self.command} {self.path}")
                path = self.path.split("?")[0]
                api = f"/api/models/{re.escape(REPO)}"
                info = re.fullmatch(rf"{api}/revision/([^/]+)", path)
                tree = re.fullmatch(rf"{api}/tree/{COMMIT}", path)
                resolve = re.fullmatch(rf"/{re.escape(REPO)}/resolve/([^/]+)/(.+)", path)
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
                    self._send(200, data, headers, body)
                else:
                    missing = {"X-Error-Code": "EntryNotFound"}
                    self._send(404, b'{"error": "Entry not found"}', missing, body)

            def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

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
        return {"id": REPO, "modelId": REPO, "sha": COMMIT, "private": False, "siblings": siblings}

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


def _serve(folder: Path) -> FakeHub:
    files = {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
    assert set(hub.HUB_MODELS[NAME].files) <= set(files)
    return FakeHub(files)


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
