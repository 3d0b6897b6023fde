"""Time to first result: how soon a cold ``anekit index`` makes a repository searchable.

A copy of the repository (no ``.anekit``) is indexed by ``anekit index --lane cpu`` in a
child process with a fresh ``$ANEKIT_HOME`` (an empty machine-wide vector cache; the
built ONNX models are shared from ``$ANEKIT_PACKAGES`` as a user's would be after first
use). Meanwhile this process asks, every 50 ms, a keyword search for ``--query`` (an
identifier defined in ``--expect``) and reads the store's counts, and records from the
child's start:

* ``first_keyword_s``: the first keyword search whose hits include ``--expect``;
* ``first_vector_s``: the first vector committed to the store;
* ``all_files_s``: every file the walk finds is in the store (keyword-searchable);
* ``done_s``: the child's exit (not waited for with ``--stop-after first-vector``,
  which kills the child then: for 100k-chunk corpora whose embedding takes many minutes).

    .venv/bin/python bench/first_result.py REPO --query NAME --expect RELPATH
        [--source CHECKOUT] [--stop-after done|first-vector] [--runs 3] [--json PATH]

``--source CHECKOUT`` runs the child with ``CHECKOUT/src`` (another commit) to compare;
searches always use this checkout's reader. ``--corpus DIR ...`` instead of REPO copies
several folders side by side into one root (a large corpus).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))

from anekit import config  # noqa: E402
from anekit.search.index import Index  # noqa: E402
from anekit.search.walk import Skipped, minified_line, read_file, walk  # noqa: E402

POLL_S = 0.05


def _counts(db: Path) -> tuple[int, int, int]:
    """(files, chunks, vectors) committed, or -1s before the store has its tables."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return -1, -1, -1
    try:
        found = [
            int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            for table in ("files", "chunks", "vectors")
        ]
        return found[0], found[1], found[2]
    except sqlite3.Error:
        return -1, -1, -1
    finally:
        conn.close()


def _found(root: Path, store: Path, query: str, expect: str) -> bool:
    try:
        with Index(root, store=store, cache=False) as reader:
            hits = reader.search(query, k=10, mode="keyword")
    except Exception:  # no store yet, or no identity yet
        return False
    return expect in {hit.path for hit in hits}


def one_run(sources: list[Path], args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="anekit-first-") as temp:
        root, home = Path(temp) / "root", Path(temp) / "home"
        if len(sources) == 1:
            shutil.copytree(sources[0], root, ignore=shutil.ignore_patterns(".anekit"))
        else:
            for source in sources:
                shutil.copytree(
                    source, root / source.name, ignore=shutil.ignore_patterns(".anekit")
                )
        home.mkdir()
        store = Path(temp) / "store"
        env = dict(os.environ)
        env.update(
            ANEKIT_HOME=str(home),
            ANEKIT_PACKAGES=str(config.packages()),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        env.pop("ANEKIT_STORE", None)
        if args.source:
            env["PYTHONPATH"] = str(Path(args.source) / "src")
        command = [sys.executable, "-m", "anekit", "index", str(root), "--store", str(store)]
        command += ["--lane", "cpu", "--json"]
        db = store / "store.db"
        limit = minified_line()  # the files the indexer keeps: walked, and read as text
        expected_files = sum(
            not isinstance(read_file(entry, limit), Skipped) for entry in walk(root).files
        )
        marks: dict[str, float | None] = {
            "first_keyword_s": None,
            "first_vector_s": None,
            "all_files_s": None,
        }
        started = time.monotonic()
        child = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        counts = (-1, -1, -1)
        try:
            while True:
                now = time.monotonic() - started
                counts = _counts(db)
                if marks["first_vector_s"] is None and counts[2] > 0:
                    marks["first_vector_s"] = now
                if marks["all_files_s"] is None and counts[0] >= expected_files:
                    marks["all_files_s"] = now
                waiting = marks["first_keyword_s"] is None and counts[0] > 0
                if waiting and _found(root, store, args.query, args.expect):
                    marks["first_keyword_s"] = time.monotonic() - started
                if child.poll() is not None:
                    break
                if args.stop_after == "first-vector" and None not in marks.values():
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                    break
                if now > args.timeout:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()
                    raise SystemExit(f"timed out after {args.timeout} s: {marks}")
                time.sleep(POLL_S)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        done = time.monotonic() - started if child.returncode == 0 else None
        if marks["first_keyword_s"] is None and child.returncode == 0:
            marks["first_keyword_s"] = (
                time.monotonic() - started if _found(root, store, args.query, args.expect) else None
            )
        final = _counts(db)
        return {
            **marks,
            "done_s": done,
            "files": final[0],
            "walked_files": expected_files,
            "chunks": final[1],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", nargs="?", type=Path)
    parser.add_argument("--corpus", nargs="+", type=Path, help="folders side by side")
    parser.add_argument("--query", required=True)
    parser.add_argument("--expect", required=True, help="the file the query must find")
    parser.add_argument("--source", help="run the indexer of this checkout")
    parser.add_argument("--stop-after", choices=("done", "first-vector"), default="done")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    sources = args.corpus or ([args.repo] if args.repo else [])
    if not sources:
        parser.error("give REPO or --corpus")
    runs = []
    for n in range(args.runs):
        result = one_run(sources, args)
        runs.append(result)
        print(f"run {n + 1}: {json.dumps(result)}", file=sys.stderr)
    summary: dict[str, Any] = {}
    for key in ("first_keyword_s", "first_vector_s", "all_files_s", "done_s"):
        values = [run[key] for run in runs if run[key] is not None]
        if values:
            summary[key] = {
                "median": round(statistics.median(values), 2),
                "min": round(min(values), 2),
                "max": round(max(values), 2),
            }
    commit = subprocess.run(
        ["git", "-C", str(args.source or REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    record = {
        "script": "bench/first_result.py",
        "command": " ".join(sys.argv),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "indexer_commit": commit,
        "sources": [str(source) for source in sources],
        "runs": runs,
        "summary": summary,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
