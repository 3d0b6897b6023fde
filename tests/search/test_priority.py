"""``Priority``: the daemon in the background while idle, back to normal while it works.

On Linux the real system calls run (the I/O class of every thread, read back with
ioprio_get); macOS runs against a stand-in for setpriority(2) that refuses what its
manual page does not allow.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from anekit.search import priority as priority_module
from anekit.search.index import Index
from anekit.search.priority import Priority
from anekit.search.server import SearchService
from anekit.search.watch import Watcher

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux system calls")
IDLE_CLASS = priority_module.IOPRIO_CLASS_IDLE << priority_module.IOPRIO_CLASS_SHIFT


def _io_classes() -> set[int]:
    """The I/O priority of every thread of this process (a thread that ended while they
    were read, such as a test runner's, is left out)."""
    io = priority_module._LinuxIo()
    classes = set()
    for tid in os.listdir("/proc/self/task"):
        value = io.get(int(tid))
        if value == -1 and not os.path.exists(f"/proc/self/task/{tid}"):
            continue
        classes.add(value)
    return classes


class _Thread:
    """A thread that waits until released (so it is alive through the changes)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.thread = threading.Thread(target=self.release.wait, daemon=True)
        self.thread.start()

    def end(self) -> None:
        self.release.set()
        self.thread.join()


@linux
def test_every_thread_goes_to_the_idle_io_class_and_back() -> None:
    before = _io_classes()
    assert IDLE_CLASS not in before
    early = _Thread()
    priority = Priority()
    try:
        priority.background()
        assert priority.state == "background"
        late = _Thread()  # started in the background: it inherits it, and is brought back
        assert _io_classes() == {IDLE_CLASS}
        with priority.busy():
            assert priority.state == "normal"
            assert _io_classes() == before
        assert _io_classes() == {IDLE_CLASS}
        late.end()
    finally:
        priority.restore()
        early.end()
    assert _io_classes() == before
    assert "io" not in priority.describe()["unchanged"]


@linux
def test_the_cpu_is_left_alone_when_it_could_not_come_back() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    if soft == resource.RLIM_INFINITY or 20 - nice <= soft:
        pytest.skip("this machine's RLIMIT_NICE lets SCHED_IDLE be undone")
    priority = Priority()
    try:
        priority.background()
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, 0) == nice
        assert "RLIMIT_NICE" in priority.describe()["unchanged"]["cpu"]
    finally:
        priority.restore()


def test_overlapping_work_keeps_normal_priority_until_the_last_ends() -> None:
    priority = Priority(system="plan9")
    priority.background()
    first, second = priority.busy(), priority.busy()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert priority.state == "normal"  # the other piece of work still runs
    second.__exit__(None, None, None)
    assert priority.state == "background"
    assert priority.describe()["unchanged"]["cpu"] == "no background state known on plan9"


class DarwinSetpriority:
    """setpriority(2) as macOS documents it: ``which`` one of PRIO_PROCESS, PRIO_PGRP,
    PRIO_USER, PRIO_DARWIN_THREAD (3), PRIO_DARWIN_PROCESS (4); for the last two only
    ``who`` 0 and ``prio`` 0 or PRIO_DARWIN_BG; otherwise ``prio`` in -20..20, and only
    the super-user may lower it (EACCES)."""

    def __init__(self) -> None:
        self.background = False
        self.nice = 0
        self.calls: list[tuple[int, int, int]] = []

    def __call__(self, which: int, who: int, prio: int) -> None:
        self.calls.append((which, who, prio))
        if which in (3, 4):
            if who != 0 or prio not in (0, priority_module.PRIO_DARWIN_BG):
                raise OSError(errno.EINVAL, "Invalid argument")
            self.background = prio == priority_module.PRIO_DARWIN_BG
        elif which in (0, 1, 2):
            if not -20 <= prio <= 20:
                raise OSError(errno.EINVAL, "Invalid argument")
            if prio < self.nice:
                raise OSError(errno.EACCES, "Permission denied")
            self.nice = prio
        else:
            raise OSError(errno.EINVAL, "Invalid argument")


def test_macos_enters_and_leaves_the_background_state() -> None:
    call = DarwinSetpriority()
    priority = Priority(system="darwin", setpriority=call)
    seen = []
    priority.background()
    seen.append(call.background)
    with priority.busy():
        seen.append(call.background)
        with priority.busy():  # nested: no call
            pass
        seen.append(call.background)
    seen.append(call.background)
    assert seen == [True, False, False, True]
    bg = priority_module.PRIO_DARWIN_BG
    assert call.calls == [(4, 0, bg), (4, 0, 0), (4, 0, bg)]
    assert call.nice == 0
    assert priority.describe()["unchanged"] == {}


def test_each_tool_call_runs_at_normal_priority(tmp_path: Path) -> None:
    priority = Priority(system="plan9")
    service = SearchService([tmp_path], priority=priority)
    try:
        priority.background()
        seen = asyncio.run(service.call(lambda: priority.state))
        assert seen == "normal"
        assert priority.state == "background"
        assert service.status()["priority"]["state"] == "background"
    finally:
        service.close()


class _RecordingIndex(Index):
    """An index that notes the priority each update ran at, and does nothing else."""

    def __init__(self, root: Path, priority: Priority) -> None:
        super().__init__(root, cache=None)
        self.priority = priority
        self.seen: list[str] = []

    def update(self, paths=None, progress=None):  # type: ignore[no-untyped-def]
        from anekit.search.index import IndexSummary

        self.seen.append(self.priority.state)
        return IndexSummary()


def test_a_watcher_round_runs_at_normal_priority(tmp_path: Path) -> None:
    priority = Priority(system="plan9")
    priority.background()
    index = _RecordingIndex(tmp_path, priority)
    states: list[str] = []
    watcher = Watcher(index, on_round=lambda done: states.append(priority.state), priority=priority)
    watcher.stop()  # the catch-up round only
    watcher.run()
    assert index.seen == ["normal"]
    assert states == ["background"]


def test_memory_is_given_back_once_idle_for_a_moment() -> None:
    priority = Priority(system="plan9", release_after=0.2)
    released = threading.Event()
    states: list[str] = []

    def hook() -> None:
        states.append(priority.state)
        released.set()

    priority.on_idle.append(hook)
    with priority.busy():
        pass
    with priority.busy():  # work again before the moment passed: nothing given back
        time.sleep(0.4)
        assert not released.is_set()
    assert released.wait(5)
    time.sleep(0.3)
    assert states == ["background"]  # once, after the last work
