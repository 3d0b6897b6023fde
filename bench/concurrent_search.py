"""Search latency of ``anekit serve`` under concurrent clients, for two checkouts in one run.

Setup as ``daemon.py``: a tree of about ``--chunks`` chunks (copies of this Python's
standard library, vectors embedded once through the CPU lane and kept in the machine
cache) indexed into ``TREE/.anekit``. For each side (``--base DIR``, a checkout of an
earlier commit, and this checkout) a fresh ``anekit serve TREE --no-watch --lane cpu`` is
started with ``PYTHONPATH=SIDE/src`` and a private ``ANEKIT_HOME``; its clients are the MCP
SDK's ``Client`` over streamable HTTP, one session each.

Each pass, for each side (the side that goes first alternates between passes, after one
warm-up pass of every query on each side):

1. **one client**: the 30 queries of ``search_scale.queries()`` (``k=10``, hybrid), one
   after another: the latency of each ``tools/call search`` round trip;
2. **``--clients`` clients at once** (default 20): each asks the 30 queries in its own
   order, all started together: every call's latency, and the wall time of the whole.

Reported per side: p50/p95 over all calls (and the range of the passes' p50s), and the
servers' peak memory (VmHWM). The ratio ``concurrent p50 / single p50`` says how much a
crowd slows one caller; on 2 cores it cannot reach 1 when the searches need the CPU.

    .venv/bin/python bench/concurrent_search.py --base /tmp/anekit-base [--chunks 10000]
        [--clients 20] [--passes 3] [--workdir DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmachine import machine, redacted, source_state
from daemon import _daemon_env, _free_port, _memory, _percentiles, _say, build_tree
from search_scale import queries

RESULTS = Path(__file__).resolve().parent / "results"
HERE = Path(__file__).resolve().parent.parent


async def _search(client: Any, query: str) -> float:
    started = time.perf_counter()
    result = await client.call_tool("search", {"query": query, "k": 10})
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error or not (result.structured_content or {}).get("hits"):
        raise SystemExit(f"search {query!r} failed: {result.content}")
    return elapsed


class Side:
    """One ``anekit serve`` of one checkout, and how to open clients on it."""

    def __init__(self, name: str, source: Path, tree: Path, work: Path) -> None:
        self.name, self.source = name, source
        self.home = work / f"home-{name}"
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        env = {**_daemon_env(self.home), "PYTHONPATH": str(source / "src")}
        command = [sys.executable, "-m", "anekit", "serve", str(tree), "--port", str(self.port)]
        self.log = work / f"serve-{name}.log"
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                [*command, "--no-watch", "--lane", "cpu"], env=env, stderr=output
            )

    async def wait(self) -> None:
        import httpx2

        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{self.name}: no server: {self.log.read_text()[-2000:]}")
            try:
                async with httpx2.AsyncClient(timeout=1) as http:
                    if (await http.get(f"http://127.0.0.1:{self.port}/health")).status_code == 200:
                        return
            except httpx2.TransportError:
                pass
            await asyncio.sleep(0.2)

    async def clients(self, count: int, work: Any) -> Any:
        """Run ``work(clients)`` with ``count`` open SDK sessions."""
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        token = (self.home / "serve" / "token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        url = f"http://127.0.0.1:{self.port}/mcp"
        async with httpx2.AsyncClient(headers=headers, timeout=300) as http:
            sessions = [
                Client(streamable_http_client(url, http_client=http), read_timeout_seconds=300)
                for _ in range(count)
            ]
            opened = [await session.__aenter__() for session in sessions]
            try:
                return await work(opened)
            finally:
                for session in reversed(sessions):
                    await session.__aexit__(None, None, None)

    def stop(self) -> dict[str, float]:
        memory = _memory(self.process.pid)
        self.process.terminate()
        self.process.wait(60)
        return memory


async def _one_pass(side: Side, asked: list[str], clients: int, seed: int) -> dict[str, Any]:
    async def single(opened: list[Any]) -> list[float]:
        return [await _search(opened[0], query) for query in asked]

    async def crowd(opened: list[Any]) -> tuple[list[float], float]:
        async def one(client: Any, order: list[str]) -> list[float]:
            return [await _search(client, query) for query in order]

        rng = random.Random(seed)
        orders = [rng.sample(asked, len(asked)) for _ in opened]
        started = time.perf_counter()
        results = await asyncio.gather(*(one(c, o) for c, o in zip(opened, orders, strict=True)))
        return [v for r in results for v in r], time.perf_counter() - started

    alone = await side.clients(1, single)
    together, wall = await side.clients(clients, crowd)
    return {"single": alone, "concurrent": together, "concurrent_wall_s": wall}


async def _warm(client: Any, asked: list[str]) -> None:
    """One call of every query: the query model, the vector matrix, SQLite's pages."""
    for query in asked:
        await _search(client, query)


async def run(sides: list[Side], clients: int, passes: int) -> dict[str, Any]:
    asked = queries()
    for side in sides:
        await side.wait()
        await side.clients(
            1, lambda opened: asyncio.gather(*(_search(opened[0], q) for q in asked))
        )
    samples: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
    for number in range(passes):
        order = sides if number % 2 == 0 else list(reversed(sides))
        for side in order:
            done = await _one_pass(side, asked, clients, seed=number)
            samples[side.name].append(done)
            _say(
                f"pass {number + 1} {side.name}: single p50 "
                f"{statistics.median(done['single']):.1f} ms, {clients} clients p50 "
                f"{statistics.median(done['concurrent']):.1f} ms"
            )
    report: dict[str, Any] = {}
    for side in sides:
        passes_of = samples[side.name]
        single = [v for p in passes_of for v in p["single"]]
        crowd = [v for p in passes_of for v in p["concurrent"]]
        report[side.name] = {
            "single": {
                **_percentiles(single),
                "pass_p50": [statistics.median(p["single"]) for p in passes_of],
            },
            "concurrent": {
                **_percentiles(crowd),
                "pass_p50": [statistics.median(p["concurrent"]) for p in passes_of],
                "wall_s": [p["concurrent_wall_s"] for p in passes_of],
            },
            "samples": passes_of,
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="a checkout of another commit")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.passes < 3:
        parser.error("--passes must be at least 3")
    work = args.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / "anekit-concurrent"
    work.mkdir(parents=True, exist_ok=True)
    tree = build_tree(work, args.chunks)
    sides = [Side("base", args.base.resolve(), tree, work), Side("this", HERE, tree, work)]
    try:
        report = asyncio.run(run(sides, args.clients, args.passes))
    finally:
        memory = {side.name: side.stop() for side in sides}
    for side in sides:
        report[side.name]["memory"] = memory[side.name]
    record = {
        "date": datetime.date.today().isoformat(),
        "command": redacted(shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])),
        "machine": machine(),
        "source": source_state(),
        "base": redacted(str(args.base)),
        "chunks": args.chunks,
        "clients": args.clients,
        "report": report,
    }
    header = f"| side | 1 client p50 (p95) | {args.clients} clients p50 (p95) | ratio | wall (s) |"
    print(header + " peak MB |")
    print("|---|--:|--:|--:|--:|--:|")
    for side in sides:
        row = report[side.name]
        single, crowd = row["single"], row["concurrent"]
        print(
            f"| {side.name} | {single['p50']:.1f} ({single['p95']:.1f}) | "
            f"{crowd['p50']:.1f} ({crowd['p95']:.1f}) | {crowd['p50'] / single['p50']:.1f}x | "
            f"{statistics.median(crowd['wall_s']):.2f} | {row['memory'].get('VmHWM', 0):.0f} |"
        )
    path = args.json or RESULTS / f"concurrent-search-{record['date']}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    _say(f"wrote {path}")


if __name__ == "__main__":
    main()
