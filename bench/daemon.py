"""The search daemon as agents meet it: MCP ``tools/call search`` latency over streamable
HTTP and over stdio, save-to-searchable, and the daemon's idle memory, in one run.

Setup. A tree of about ``--chunks`` chunks (default 10,000) made as in
``search_scale.py``: copies of this Python's standard library files whose vectors were
embedded once through the CPU lane (machine cache on, so a rerun takes them from it) and
written by the indexer into ``TREE/.anekit`` with no lane started. Two daemons then serve
it, each a fresh process with a private ``ANEKIT_HOME`` and ``--lane cpu``:
``anekit serve TREE`` (HTTP on 127.0.0.1, the tree watched) and ``anekit mcp TREE``
(stdio, spawned by the client). Both clients are the official SDK's ``mcp.Client``,
one session each, in this process.

1. **Search latency.** 30 fixed queries (``search_scale.queries()``: questions and
   identifiers), ``k=10``, hybrid mode (the tool's default). One warm-up call of each
   query on each side, then ``--passes`` passes (at least 3), each calling every query
   on one side then the other (the side that goes first alternates between passes).
   Latency = the client's ``call_tool`` round trip: the JSON-RPC request through the
   transport, the server's search (the query embedded in the server), the result's JSON
   back and parsed. Also the server's own ``milliseconds`` (the search alone). p50/p95 per
   side over all warm calls, and the range of the passes' p50s.

2. **Save-to-searchable** (the HTTP daemon, its watcher at the default 500 ms quiet
   time, the CPU lane). ``--saves`` times (at least 3), alternating a new file and an
   edit of the previous one: a small Python file (one function, a fresh identifier) is
   written, then ``search`` for the identifier (hybrid) is called every 25 ms until a
   hit names the file; the time from just before the write to the answer that finds it.
   The first save is reported apart (it starts the lane's worker: cold); p50/p95/range
   over the others. The daemon's log gives each round's own time (indexing alone).

3. **Idle memory.** Each daemon's VmRSS (and VmHWM) from ``/proc``: at start (before any
   search), and idle after the searches and saves (the query model and vector matrix
   loaded), once its lane worker has left (``ANEKIT_LANE_IDLE=15`` for the daemons; the
   default is 300 s) and 10 s more have passed without a request (the watcher drops its
   lanes and the daemon gives memory back, ``anekit.search.priority``); the worker's
   memory while it was up is given apart, and each daemon's VmHWM (its peak).

    .venv/bin/python bench/daemon.py [--chunks 10000] [--passes 3] [--saves 20]
        [--workdir DIR] [--json PATH]

Writes Markdown tables and the targets to stdout, a JSON record (date, command, machine,
versions, source state, every sample) to ``--json`` (default
``bench/results/daemon-<date>.json``). About 5 minutes on a quiet 2-core machine (2 more
the first time, when the base is embedded). Linux only (memory from ``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmachine import machine, redacted, source_state
from search_scale import Trees, make_base, queries

RESULTS = Path(__file__).resolve().parent / "results"
K = 10
LANE_IDLE_SECONDS = 15
POLL_SECONDS = 0.025
#: After the worker left: the watcher's next timeout drops its lanes (within 5 s), and
#: the daemon gives memory back 2 s after that.
SETTLE_SECONDS = 10
#: The issue's targets.
SEARCH_P50_MS = 30.0
SAVE_P50_S = 1.5
IDLE_RSS_MB = 200.0


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _stdio_server_pid() -> int:
    """The ``anekit mcp`` process the stdio client spawned (a child of this process)."""
    for child in _children(os.getpid()):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp" in command and b"anekit" in command:
            return child
    raise SystemExit("the stdio server's process was not found")


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]  # noqa: E731
    median = statistics.median(ordered)
    return {"p50": median, "p95": at(0.95), "max": ordered[-1], "n": len(values)}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _daemon_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANEKIT_STORE", "ANEKIT_LANES")}
    env.update(
        ANEKIT_HOME=str(home),
        ANEKIT_LANE_IDLE=str(LANE_IDLE_SECONDS),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


def build_tree(work: Path, chunks: int) -> Path:
    base = make_base(work, chunks)
    trees = Trees(base, work)
    tree = trees.make("daemon", chunks=chunks)
    built = trees.index(tree, tree / ".anekit")
    _say(f"tree: {built}")
    return tree


def _hits(result: Any) -> list[dict[str, Any]]:
    if result.is_error:
        raise SystemExit(f"a search failed: {result.content}")
    content = result.structured_content or {}
    hits: list[dict[str, Any]] = content.get("hits", [])
    return hits


async def _timed_search(client: Any, query: str) -> tuple[float, float, list[dict[str, Any]]]:
    start = time.perf_counter()
    result = await client.call_tool("search", {"query": query, "k": K})
    elapsed = (time.perf_counter() - start) * 1000
    hits = _hits(result)
    return elapsed, float((result.structured_content or {}).get("milliseconds", 0.0)), hits


async def bench_latency(sides: dict[str, Any], passes: int) -> dict[str, Any]:
    asked = queries()
    for client in sides.values():
        for query in asked:  # warm-up: the query model, the vector matrix, the caches
            await _timed_search(client, query)
    samples: dict[str, list[list[float]]] = {side: [] for side in sides}
    server: dict[str, list[float]] = {side: [] for side in sides}
    for number in range(passes):
        order = list(sides) if number % 2 == 0 else list(reversed(sides))
        for side in order:
            block = []
            for query in asked:
                elapsed, inside, hits = await _timed_search(sides[side], query)
                assert hits, query
                block.append(elapsed)
                server[side].append(inside)
            samples[side].append(block)
        _say(f"pass {number + 1}: " + ", ".join(
            f"{side} p50 {statistics.median(samples[side][-1]):.1f} ms" for side in sides
        ))  # fmt: skip
    return {
        side: {
            **_percentiles([value for block in blocks for value in block]),
            "pass_p50": [statistics.median(block) for block in blocks],
            "server_p50": statistics.median(server[side]),
            "samples": blocks,
        }
        for side, blocks in samples.items()
    }


def _saved_module(number: int) -> tuple[str, str]:
    identifier = f"reconcile_ledger_{number:03}_{os.getpid()}"
    text = (
        f"def {identifier}(rows):\n"
        f'    """Reconcile the ledger rows of batch {number}."""\n'
        f"    return sum(rows) - {number}\n"
    )
    return identifier, text


async def bench_saves(client: Any, tree: Path, saves: int) -> dict[str, Any]:
    folder = tree / "saved"
    folder.mkdir(exist_ok=True)
    times: list[float] = []
    relpath = ""
    for number in range(saves):
        if number % 2 == 0:  # a new file
            relpath = f"saved/new_{number:03}.py"
        identifier, text = _saved_module(number)  # else: an edit of the previous one
        path = tree / relpath
        start = time.perf_counter()
        path.write_text(text)
        deadline = start + 60
        while True:
            result = await client.call_tool("search", {"query": identifier, "k": K})
            hits = _hits(result)  # the file as saved: an edit's old text does not count
            if any(hit["path"] == relpath and identifier in hit["snippet"] for hit in hits):
                break
            if time.perf_counter() > deadline:
                raise SystemExit(f"{relpath} not searchable after 60 s")
            await asyncio.sleep(POLL_SECONDS)
        times.append(time.perf_counter() - start)
        _say(f"save {number + 1} ({'new' if number % 2 == 0 else 'edit'}): {times[-1]:.3f} s")
        await asyncio.sleep(1.0)  # the next save comes in a round of its own
    return {"first_s": times[0], **_percentiles(times[1:]), "samples_s": times}


def _round_seconds(log: Path) -> list[float]:
    """Each watcher round's own time from the daemon's log (after the catch-up)."""
    rounds = re.findall(r"changed path\(s\).*?; ([0-9.]+) s", log.read_text())
    return [float(value) for value in rounds]


async def _idle_memory(pid: int, worker_pids: set[int]) -> dict[str, Any]:
    """Wait for the lane worker to leave, then :data:`SETTLE_SECONDS`; the daemon's memory."""
    deadline = time.monotonic() + LANE_IDLE_SECONDS + 60
    while _children(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    await asyncio.sleep(SETTLE_SECONDS)
    return {**_memory(pid), "children": len(_children(pid)), "workers_seen": len(worker_pids)}


async def run(tree: Path, work: Path, passes: int, saves: int) -> dict[str, Any]:
    import httpx2
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    home_http, home_stdio = work / "home-http", work / "home-stdio"
    for home in (home_http, home_stdio):
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
    port = _free_port()
    log = work / "serve.log"
    command = [sys.executable, "-m", "anekit", "serve", str(tree), "--port", str(port)]
    with log.open("wb") as output:
        daemon = subprocess.Popen(
            [*command, "--lane", "cpu"], env=_daemon_env(home_http), stderr=output
        )
    record: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 120
        while "caught up" not in log.read_text():
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not come up: {log.read_text()[-2000:]}")
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)
        token = (home_http / "serve" / "token").read_text().strip()
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "anekit", "mcp", str(tree), "--lane", "cpu"],
            env=_daemon_env(home_stdio),
        )
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http_client,
            Client(
                streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http_client),
                read_timeout_seconds=120,
            ) as over_http,
            Client(params, read_timeout_seconds=120) as over_stdio,
        ):
            stdio_pid = _stdio_server_pid()
            record["start_memory"] = {"http": _memory(daemon.pid), "stdio": _memory(stdio_pid)}
            _say(f"at start: {record['start_memory']}")
            sides = {"http": over_http, "stdio": over_stdio}
            record["latency"] = await bench_latency(sides, passes)
            workers: set[int] = set(_children(daemon.pid))
            record["saves"] = await bench_saves(over_http, tree, saves)
            workers |= set(_children(daemon.pid))
            alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
            record["worker_memory"] = [_memory(pid) for pid in alive]
            record["saves"]["round_s"] = _percentiles(_round_seconds(log)) if saves > 1 else {}
            idle = await asyncio.gather(
                _idle_memory(daemon.pid, workers), _idle_memory(stdio_pid, set())
            )
            record["idle_memory"] = {"http": idle[0], "stdio": idle[1]}
            _say(f"idle: {record['idle_memory']}")
    finally:
        daemon.terminate()
        daemon.wait(60)
    return record


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for side in ("http", "stdio"):
        p50 = record["latency"][side]["p50"]
        rows.append({
            "target": f"MCP tools/call search p50 over {side} <= {SEARCH_P50_MS:g} ms",
            "measured": f"{p50:.1f} ms",
            "met": p50 <= SEARCH_P50_MS,
        })  # fmt: skip
    save = record["saves"]["p50"]
    rows.append({
        "target": f"save-to-searchable p50 <= {SAVE_P50_S:g} s (CPU lane)",
        "measured": f"{save:.3f} s",
        "met": save <= SAVE_P50_S,
    })  # fmt: skip
    for side in ("http", "stdio"):
        rss = record["idle_memory"][side]["VmRSS"]
        rows.append({
            "target": f"{side} daemon idle RSS <= {IDLE_RSS_MB:g} MB",
            "measured": f"{rss:.0f} MB",
            "met": rss <= IDLE_RSS_MB,
        })  # fmt: skip
    return rows


def print_report(record: dict[str, Any]) -> None:
    print(f"# The search daemon ({record['date']})\n")
    print(f"Machine: {record['machine']}; Python {record['python']}; {record['chunks']} chunks.\n")
    print("| side | tools/call p50 ms | p95 ms | max ms | pass p50s ms | server search p50 ms |")
    print("|---|---|---|---|---|---|")
    for side, row in record["latency"].items():
        passes = ", ".join(f"{value:.1f}" for value in row["pass_p50"])
        print(
            f"| {side} | {row['p50']:.1f} | {row['p95']:.1f} | {row['max']:.1f} | {passes} "
            f"| {row['server_p50']:.1f} |"
        )
    saves = record["saves"]
    rounds = saves.get("round_s") or {}
    print(
        f"\nSave-to-searchable: first {saves['first_s']:.3f} s (cold: the lane's worker "
        f"starts), then p50 {saves['p50']:.3f} s, p95 {saves['p95']:.3f} s, max "
        f"{saves['max']:.3f} s over {saves['n']} saves; the rounds alone p50 "
        f"{rounds.get('p50', float('nan')):.3f} s.\n"
    )
    print("| daemon | RSS at start MB | RSS idle MB | VmHWM MB |")
    print("|---|---|---|---|")
    for side in ("http", "stdio"):
        start, idle = record["start_memory"][side], record["idle_memory"][side]
        print(f"| {side} | {start['VmRSS']:.0f} | {idle['VmRSS']:.0f} | {idle['VmHWM']:.0f} |")
    workers = record.get("worker_memory") or []
    if workers:
        print(f"\nThe CPU lane's worker while up: {max(w['VmRSS'] for w in workers):.0f} MB RSS.")
    print("\n| target | measured | met |\n|---|---|---|")
    for row in record["targets"]:
        print(f"| {row['target']} | {row['measured']} | {'yes' if row['met'] else 'NO'} |")


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("anekit", "mcp", "onnxruntime", "uvicorn")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    if options.passes < 3 or options.saves < 3:
        parser.error("--passes and --saves must be at least 3")
    work = options.workdir or Path(tempfile.mkdtemp(prefix="anekit-daemon-"))
    work.mkdir(parents=True, exist_ok=True)
    tree = build_tree(work, options.chunks)
    record: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "python": platform.python_version(),
        "versions": _versions(),
        "source": source_state(),
        "chunks": options.chunks,
    }
    record.update(asyncio.run(run(tree, work, options.passes, options.saves)))
    record["targets"] = targets(record)
    print_report(record)
    out = options.json or RESULTS / f"daemon-{record['date'][:10]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(redacted(record), indent=1) + "\n")
    _say(f"record: {out}")
    if not options.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
