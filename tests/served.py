"""An ``anekit serve`` process for tests: a free port, and waiting until it answers."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx2 as httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_up(process: subprocess.Popen[bytes], port: int, seconds: float = 60) -> None:
    """Until ``GET /health`` answers 200; the server's stderr if it exits first."""
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not come up"
        time.sleep(0.1)
