"""One writer per store: a second writer is refused (or waits) with a message naming the
first; a killed writer leaves no stale lock; readers take no lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from anekit.cli import cli
from anekit.search.index import Index
from anekit.search.lock import LOCK_FILE, StoreBusy, WriterLock
from anekit.search.store import store_dir

HOLDER = """
import sys, time
from pathlib import Path
from anekit.search.lock import WriterLock
lock = WriterLock(Path(sys.argv[1]))
lock.acquire()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
print("released", flush=True)
time.sleep(60)
"""


def _holder(directory: Path, hold: float = 60.0) -> subprocess.Popen[str]:
    """Another process holding the lock (``hold`` seconds), named ``holder-of-the-lock``."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), str(hold), "holder-of-the-lock"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "held"
    return process


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    directory = store_dir(tmp_path)
    process = _holder(directory)
    yield directory, process
    process.kill()
    process.wait()


def test_a_second_writer_is_refused_with_the_first_named(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    directory, process = held
    lock = WriterLock(directory)
    started = time.monotonic()
    with pytest.raises(StoreBusy) as caught:
        lock.acquire(wait=0.3)
    assert time.monotonic() - started >= 0.3
    message = str(caught.value)
    assert f"process {process.pid} " in message
    assert "holder-of-the-lock" in message  # its command line
    assert "after waiting 0.3 s" in message and "--wait SECONDS" in message
    assert caught.value.holder["pid"] == process.pid
    assert not lock.held


def test_a_waiting_writer_gets_the_lock_when_the_first_lets_go(tmp_path: Path) -> None:
    directory = store_dir(tmp_path)
    process = _holder(directory, hold=0.5)
    try:
        with WriterLock(directory) as lock:
            lock.acquire(wait=30)
            assert lock.held
            assert lock.holder()["pid"] == os.getpid()
            assert not os.get_inheritable(lock._fd or -1)  # lane workers do not inherit it
        assert lock._fd is None and lock.holder() == {}  # released, the file emptied
    finally:
        process.kill()
        process.wait()


def test_a_killed_writer_leaves_no_stale_lock(held: tuple[Path, subprocess.Popen[str]]) -> None:
    directory, process = held
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (directory / LOCK_FILE).read_text()  # its note is still there...
    lock = WriterLock(directory)
    lock.acquire(wait=0)  # ...but the kernel dropped its lock
    assert lock.holder()["pid"] == os.getpid()
    lock.release()


def test_index_runs_and_forget_are_refused_while_another_writer_runs(
    held: tuple[Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    _, process = held
    (tmp_path / "a.py").write_text("def a():\n    return 1\n")
    with Index(tmp_path, lanes=["cpu"], cache=False) as index:
        with pytest.raises(StoreBusy, match=f"process {process.pid} "):
            index.update()
        with pytest.raises(StoreBusy):
            index.forget(tmp_path / "a.py")
    result = CliRunner().invoke(cli, ["index", str(tmp_path), "--wait", "0.2"])
    assert result.exit_code != 0
    assert "being written by process" in result.output
    assert "holder-of-the-lock" in result.output


def test_the_cli_waits_for_the_writer_before_it(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def a():\n    return 1\n")
    process = _holder(store_dir(tmp_path), hold=0.5)
    try:
        result = CliRunner().invoke(
            cli, ["index", str(tmp_path), "--lane", "cpu", "--wait", "30", "--json"]
        )
    finally:
        process.kill()
        process.wait()
    assert result.exit_code == 0, result.output
    assert '"indexed": 1' in result.output
