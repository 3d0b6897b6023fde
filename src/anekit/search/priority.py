"""The search daemon's process priority: background while idle, normal while it works.

A long-lived server (``anekit serve``, ``anekit mcp``) mostly waits. :class:`Priority` puts
it in the background while nothing runs and takes it out for each piece of work (a watcher
round, a tool call; overlapping work counts), so an idle daemon never competes with the
user's editor or build, and an index run or a search (and the lane workers it starts) gets
the machine's ordinary share. Once work has ended and the daemon has been idle a moment,
memory that can be had again is given back (:attr:`Priority.on_idle`, then :func:`trim_heap`).

Only changes the process can undo without privilege are made:

- **macOS**: ``setpriority(PRIO_DARWIN_PROCESS, 0, PRIO_DARWIN_BG)`` puts the process in
  the background state (lowest scheduling priority, disk and network I/O throttled);
  ``setpriority(PRIO_DARWIN_PROCESS, 0, 0)`` takes it out (getpriority(2), macOS).
  Unverified on hardware: written against the manual page, tested with a stand-in
  that enforces its arguments.
- **Linux**: the I/O class of every thread goes to *idle* and back to what it was
  (ioprio_set(2): the idle and best-effort classes need no privilege). The CPU policy
  goes to ``SCHED_IDLE`` only where ``RLIMIT_NICE`` lets the process come back to
  ``SCHED_OTHER`` (sched(7)); with the usual limit of 0 it is left alone, because a
  lowered CPU priority could not be raised again (raising ``nice`` is one-way too).
- Elsewhere nothing changes, and :meth:`Priority.describe` says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Priority"]

#: Seconds without work before an idle daemon gives memory back. Releasing after every
#: search made the next one fault its pages back in: 12 -> 18 ms a tools/call.
RELEASE_AFTER_SECONDS = 2.0

# <sys/resource.h> on macOS (xnu bsd/sys/resource.h).
PRIO_DARWIN_PROCESS = 4
PRIO_DARWIN_BG = 0x1000

# <linux/ioprio.h>: the class sits above IOPRIO_CLASS_SHIFT bits of level.
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_SHIFT = 13
IOPRIO_CLASS_IDLE = 3
# System call numbers (ioprio_set, ioprio_get) by machine (arch/*/syscall tables).
_IOPRIO_SYSCALLS = {"x86_64": (251, 252), "aarch64": (30, 31), "arm64": (30, 31)}


class Priority:
    """Background while idle, the process's starting priority while :meth:`busy`.

    ``system``: ``"darwin"``, ``"linux"`` or anything else (default: this machine's);
    ``setpriority``: the macOS call (default: :func:`os.setpriority`), replaceable in tests;
    ``release_after``: seconds without work before memory is given back.
    """

    def __init__(
        self,
        *,
        system: str | None = None,
        setpriority: Callable[[int, int, int], None] | None = None,
        release_after: float = RELEASE_AFTER_SECONDS,
    ) -> None:
        self.system = system or sys.platform
        self._setpriority = setpriority or getattr(os, "setpriority", None)
        self._lock = threading.Lock()
        self._working = 0
        self.state = "normal"
        #: Called (from a timer thread) once idle for ``release_after`` seconds: things to
        #: give back while idle, such as :meth:`SearchService.release_memory`.
        self.on_idle: list[Callable[[], None]] = []
        self.release_after = release_after
        self._release: threading.Timer | None = None
        #: Why a side (cpu, io) is left alone, when it is.
        self.unchanged: dict[str, str] = {}
        linux = self.system.startswith("linux")
        self._io = _LinuxIo() if linux else None
        self._cpu_idle = linux and _cpu_can_return()
        if self._io is not None:
            if self._io.unavailable:
                self.unchanged["io"] = self._io.unavailable
            if not self._cpu_idle:
                self.unchanged["cpu"] = (
                    "RLIMIT_NICE does not let the process return from SCHED_IDLE, "
                    "so the CPU priority stays as it is"
                )
        elif self.system != "darwin":
            missing = f"no background state known on {self.system}"
            self.unchanged = {"cpu": missing, "io": missing}

    def background(self) -> None:
        """Enter the background state (if no work is running)."""
        self._finish(0)

    def restore(self) -> None:
        """Back to the starting priority (when the serving is over)."""
        with self._lock:
            self._apply(background=False)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Ordinary priority for the block (nested and concurrent blocks count), the
        background state again when the last one ends."""
        with self._lock:
            self._working += 1
            if self._working == 1:
                self._apply(background=False)
        try:
            yield
        finally:
            self._finish(1)

    def _finish(self, work: int) -> None:
        """``work`` pieces of work ended. When none is left: the background state, and
        memory given back once :attr:`release_after` seconds pass with no new work (not
        after each search: the pages would only come back with the next)."""
        with self._lock:
            self._working -= work
            if self._working:
                return
            self._apply(background=True)
            if self._release is not None:
                self._release.cancel()
            self._release = threading.Timer(self.release_after, self._release_memory)
            self._release.daemon = True
            self._release.start()

    def _release_memory(self) -> None:
        with self._lock:
            if self._working:
                return  # work began meanwhile; its end schedules another
        for hook in self.on_idle:
            hook()
        trim_heap()

    def describe(self) -> dict[str, Any]:
        """The state and what it changes, for the status tool."""
        if self.system == "darwin":
            how = "setpriority(PRIO_DARWIN_PROCESS, PRIO_DARWIN_BG) while idle"
        elif self.system.startswith("linux"):
            changed = ["I/O class idle"] if "io" not in self.unchanged else []
            changed += ["SCHED_IDLE"] if self._cpu_idle else []
            how = " and ".join(changed) + " while idle" if changed else "nothing"
        else:
            how = "nothing"
        return {"state": self.state, "idle_policy": how, "unchanged": dict(self.unchanged)}

    def _apply(self, *, background: bool) -> None:
        state = "background" if background else "normal"
        if state == self.state:
            return
        if self.system == "darwin":
            if self._setpriority is None:
                return
            try:
                self._setpriority(PRIO_DARWIN_PROCESS, 0, PRIO_DARWIN_BG if background else 0)
            except OSError as error:  # never fail a tool call over its priority
                self.unchanged["cpu"] = self.unchanged["io"] = f"setpriority refused: {error}"
                return
        elif self.system.startswith("linux"):
            if self._io is not None and not self._io.unavailable:
                self._io.apply(background)
            if self._cpu_idle:
                _apply_cpu(background)
        self.state = state


def busy(priority: Priority | None) -> contextlib.AbstractContextManager[None]:
    """``priority.busy()``, or nothing when there is no priority to hold."""
    return priority.busy() if priority else contextlib.nullcontext()


# <malloc.h> (glibc): mallopt parameters.
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: Allocations from this size up get their own mapping, returned to the OS when freed.
MMAP_THRESHOLD = 1 << 20
#: The C heap's arenas (glibc's default is 8 per core: one per thread that allocates).
ARENA_MAX = 2


def tune_heap() -> None:
    """For a long-lived process, before it starts threads (glibc; elsewhere nothing): a
    fixed mmap threshold (glibc raises it to the largest block freed, so a rebuilt vector
    matrix of a few MB then comes from the heap and fragments it) and two arenas. The
    HTTP daemon idle after 20 saves: 208 MB without, 178 MB with (bench/daemon.py, one
    run each; their spread between runs is about 15 MB)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_ARENA_MAX, ARENA_MAX)


def _glibc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None  # not glibc
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def trim_heap() -> None:
    """Return the C heap's free pages to the OS (glibc's ``malloc_trim``; elsewhere
    nothing). After an index round or a search the heap keeps freed memory: 20 MB of a
    searching process's 167 MB came back this way."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def _threads() -> list[int]:
    """This process's thread ids (Linux)."""
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


class _LinuxIo:
    """The I/O class of every thread: idle, or back to what each had."""

    def __init__(self) -> None:
        self.unavailable = ""
        calls = _IOPRIO_SYSCALLS.get(platform.machine())
        if calls is None:
            self.unavailable = f"no ioprio system call number known for {platform.machine()}"
            return
        self._set, self._get = calls
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.syscall.restype = ctypes.c_long
        #: The process's I/O priority before the first change (the value threads return to).
        self.original = self.get(0)
        if self.original < 0:
            self.unavailable = f"ioprio_get failed: {os.strerror(ctypes.get_errno())}"

    def get(self, tid: int) -> int:
        return int(self._libc.syscall(self._get, IOPRIO_WHO_PROCESS, tid))

    def apply(self, background: bool) -> None:
        value = IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT if background else self.original
        for tid in _threads():  # a thread that just ended is no loss
            self._libc.syscall(self._set, IOPRIO_WHO_PROCESS, tid, value)


def _cpu_can_return() -> bool:
    """Whether a thread may go back from SCHED_IDLE to SCHED_OTHER: the kernel allows it
    when the nice value is within RLIMIT_NICE (its soft limit ``r`` permits nice
    ``20 - r``; sched(7), setrlimit(2))."""
    import resource

    if not hasattr(os, "SCHED_IDLE"):
        return False
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    return soft == resource.RLIM_INFINITY or 20 - nice <= soft


def _apply_cpu(background: bool) -> None:
    policy = os.SCHED_IDLE if background else os.SCHED_OTHER
    for tid in _threads():
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, policy, os.sched_param(0))
