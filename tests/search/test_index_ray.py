"""``anekit index`` on a Ray cluster (anekit.lanes.cluster): a local Ray instance with two
CPU actors (this machine's two cores) embeds the generated repository.

- The store equals the local CPU lane's: the same files, chunks and text hashes, every
  chunk with one vector, each within int8 batch noise of the local one and nearest to it.
- Every actor killed mid-run (its process exits as with SIGKILL on its second block)
  costs only its in-flight blocks, which Ray retries on the restarted actor: the index
  completes with nothing lost or duplicated.
- Only token ids leave the driver; the summary and ``--verbose`` give each node's rate.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import ray
from click.testing import CliRunner

from anekit.cli import cli
from anekit.lanes import cluster
from anekit.lanes.cluster import RayScheduler
from anekit.search.index import Index, IndexSummary
from generated_repo import FILES, Snapshot, assert_like_clean, checked_store, write_repo


@pytest.fixture(scope="module")
def ray_instance() -> Any:
    """A local Ray instance of two CPUs, shared by the module's runs."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=cluster.LOCAL_OBJECT_STORE,
        log_to_driver=False,
        configure_logging=False,
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("repo")
    write_repo(source)
    return source


@pytest.fixture(scope="module")
def local(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    """The repository indexed by the local CPU lane (no machine cache)."""
    root = tmp_path_factory.mktemp("local")
    shutil.copytree(repo, root, dirs_exist_ok=True)
    with Index(root, lanes=["cpu"], cache=False) as index:
        summary = index.update()
    assert (summary.indexed, summary.failed) == (FILES, {})
    return checked_store(root / ".anekit" / "store.db")


def _copy(repo: Path, tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(repo, root)
    return root


@pytest.fixture(scope="module")
def on_ray(
    ray_instance: Any, repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, IndexSummary, int]:
    """The repository indexed on the Ray instance: its root, the summary, the actors."""
    root = _copy(repo, tmp_path_factory.mktemp("on-ray"))
    with Index(root, lanes=["cpu"], cache=False, ray="local") as index:
        summary = index.update()
        pool = index._pool
        assert isinstance(pool, RayScheduler)
        actors = pool.actors
    return root, summary, actors


def test_a_ray_index_stores_what_the_local_cpu_lane_stores(
    on_ray: tuple[Path, IndexSummary, int], local: Snapshot
) -> None:
    root, summary, actors = on_ray
    assert actors == 2  # the cluster's CPUs, one thread an actor
    assert (summary.indexed, summary.failed, summary.stand_ins) == (FILES, {}, 0)
    assert summary.embedded == summary.chunks == len(local.chunks)
    stored = checked_store(root / ".anekit" / "store.db")
    assert stored.files == local.files and stored.chunks == local.chunks
    assert stored.namespace == local.namespace  # the same model, variant and chunker
    assert_like_clean(stored, local)
    # one node here (a local instance): its lane, its chunks and a rate
    (node,) = summary.nodes
    assert node["lane"] == "cpu" and node["chunks"] == summary.embedded
    assert node["chunks_per_s"] > 0
    assert summary.lane.startswith("cpu@")


def test_an_actor_killed_mid_run_loses_and_duplicates_nothing(
    ray_instance: Any,
    repo: Path,
    local: Snapshot,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster, "BLOCK_ROWS", 16)  # more blocks, so every actor dies mid-run
    monkeypatch.setenv("ANEKIT_FAULT", "cpu:batch:2")  # each actor dies on its 2nd block, once
    root = _copy(repo, tmp_path)
    with Index(root, lanes=["cpu"], cache=False, ray="local") as index:
        summary = index.update()
    assert (summary.indexed, summary.failed) == (FILES, {})
    assert summary.embedded == len(local.chunks)
    restarts = [actor.get("NumRestarts", 0) for actor in _map_actors()]
    assert restarts and max(restarts) >= 1, restarts  # the kills happened, and were survived
    killed = checked_store(root / ".anekit" / "store.db")  # no duplicate, no orphan
    assert killed.chunks == local.chunks
    assert_like_clean(killed, local)


def _map_actors() -> list[dict[str, Any]]:
    """The Ray actors of this instance's embedding runs, as the GCS lists them."""
    from ray._private import state

    return [
        actor
        for actor in state.actors().values()
        if "EmbedActor" in str(actor.get("ActorClassName", ""))
    ]


@pytest.mark.slow  # admission's refusal is the lanes' (tests/lanes/test_lane_faults.py)
def test_an_actor_refused_at_admission_fails_its_chunks_not_the_store(
    ray_instance: Any, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANEKIT_FAULT", "cpu:poison:zero")
    root = _copy(repo, tmp_path)
    with Index(root, lanes=["cpu"], cache=False, ray="local") as index:
        summary = index.update()
    assert summary.indexed == len(summary.failed) == FILES and summary.embedded == 0
    reason = next(iter(summary.failed.values()))
    assert "the Ray run failed" in reason and "refused at admission" in reason, reason
    stored = checked_store(root / ".anekit" / "store.db")  # kept for keyword search
    assert len(stored.files) == FILES and stored.vectors == {} and stored.chunks


def test_the_cli_sends_only_what_changed_and_names_each_nodes_rate(
    on_ray: tuple[Path, IndexSummary, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "indexed"
    shutil.copytree(on_ray[0], root)  # with its store
    (root / "pkg0" / "mod_0.py").write_text("def changed():\n    return 1\n")
    monkeypatch.chdir(root)
    monkeypatch.setenv("ANEKIT_HOME", str(tmp_path / "home"))  # no machine cache to hit
    result = CliRunner().invoke(cli, ["index", "--ray", "--lane", "cpu", "--verbose"])
    assert result.exit_code == 0, result.output
    assert "1 file(s) indexed, 59 unchanged" in result.output
    # only the changed file's one chunk travelled, and the node says so
    assert re.search(r"node \w+ \(cpu\): 1 chunks, [\d.]+ chunks/s", result.output), result.output


def test_bad_addresses_and_lanes_are_named_at_once(tmp_path: Path) -> None:
    """Checked before a Ray instance is joined or started: no fixture here."""
    import socket

    from anekit.errors import LaneError

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(LaneError, match=rf"nothing answered at 127.0.0.1:{port}.*ray start"):
        cluster.connect(f"127.0.0.1:{port}")
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    with pytest.raises(LaneError, match=r"unknown lane 'tpu'; lanes are ane, gpu, cpu"):
        Index(tmp_path, lanes=["tpu"], cache=False, ray="local").update()


def test_without_ray_installed_the_error_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    from anekit.errors import LaneError

    with pytest.raises(LaneError, match=r"pip install 'anekit\[ray\]'"):
        cluster.connect("local")
