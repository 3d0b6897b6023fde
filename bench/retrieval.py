"""Retrieval quality of anekit.search on a development question set, keyword-only,
vector-only and hybrid, in one run.

The questions (``retrieval_questions.json``) are about three pinned PyPI sdists, attrs,
httpx and rich (``retrieval_corpora.py`` fetches them into ``<ANEKIT_HOME>/retrieval``).
Each has a category (``behaviour``: how or where something happens, asked without the
identifier's words; ``identifier``: names it; ``architecture``: which module or class is
responsible for something) and a gold definition: its path relative to the unpacked
sdist's top folder, its symbol (``Class.method`` or ``function``) and its line span,
1-based and inclusive, decorators included.

``retrieval_heldout.json`` holds 36 more questions (12 a corpus) on other definitions,
written from the sources without running a search; no ranking rule is chosen on them, so
their figures say how the rules chosen on the development set carry over.

First, :func:`check`: every gold's file exists, its symbol is defined there exactly once
(found with ``ast``) with the recorded span, no question repeats 5 words in a row of its
gold's docstring, and no behaviour question spells out its gold's name. Then each corpus
is indexed (``Index(root, store=...)``, the store outside the corpus: a temporary
directory, or ``--store``), every question is asked in each mode (``k=10``) and the
rankings are scored with :mod:`anekit.search.evaluate`: hit@1/3/10, MRR@10 and NDCG@10 on
the gold's file (its first rank), symbol-hit@10 on the gold's lines.

    .venv/bin/python bench/retrieval.py [--corpus NAME ...] [--mode MODE ...] [--json PATH]
        [--store DIR] [--lanes cpu,...]
    .venv/bin/python bench/retrieval.py --questions bench/retrieval_heldout.json
    .venv/bin/python bench/retrieval.py --check          # the question set only
    .venv/bin/python bench/retrieval.py --fix-spans      # rewrite the gold spans from ast

Writes Markdown tables (per corpus and overall) to stdout and a JSON record (date,
command, machine, versions, every question's ranks and top hits in each mode) to
``--json`` (default ``bench/results/retrieval-<date>.json``).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmachine import machine, redacted, source_state
from retrieval_corpora import SDISTS, corpus_root

from anekit.search.evaluate import Gold, Hit, K, file_rank, metrics, symbol_rank

QUESTIONS = Path(__file__).resolve().parent / "retrieval_questions.json"
RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("keyword", "vector", "hybrid")
CATEGORIES = ("behaviour", "identifier", "architecture")
#: Table columns: metric key -> header.
COLUMNS = {
    "hit@1": "hit@1",
    "hit@3": "hit@3",
    "hit@10": "hit@10",
    "mrr@10": "MRR@10",
    "ndcg@10": "NDCG@10",
    "symbol_hit@10": "symbol-hit@10",
}
#: A question sharing this many words in a row with its gold's docstring copies it.
COPIED_WORDS = 5

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


# --- the question set ----------------------------------------------------------------------


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    questions: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return questions


def gold_of(question: dict[str, Any]) -> Gold:
    gold = question["gold"]
    return Gold(gold["path"], gold["symbol"], gold["start_line"], gold["end_line"])


def _definitions(body: Sequence[ast.stmt]) -> Iterator[Definition]:
    """The functions and classes defined in a block, looking into if/try/with blocks
    (a definition under ``if TYPE_CHECKING:`` or ``try:`` is still the block's)."""
    for node in body:
        if isinstance(node, Definition):
            yield node
        elif isinstance(node, ast.With | ast.AsyncWith):
            yield from _definitions(node.body)
        elif isinstance(node, ast.If | ast.For | ast.AsyncFor | ast.While):
            yield from _definitions(node.body)
            yield from _definitions(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _definitions(block)
            for handler in node.handlers:
                yield from _definitions(handler.body)


def find(tree: ast.Module, symbol: str) -> list[Definition]:
    """Every definition of a dotted ``symbol`` (``Class.method``, ``function``)."""
    scopes: list[Sequence[ast.stmt]] = [tree.body]
    found: list[Definition] = []
    for part in symbol.split("."):
        found = [node for body in scopes for node in _definitions(body) if node.name == part]
        scopes = [node.body for node in found]
    return found


def span(node: Definition) -> tuple[int, int]:
    """A definition's lines, 1-based and inclusive, from its first decorator."""
    start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    assert node.end_lineno is not None
    return start, node.end_lineno


def locate(source: str, symbol: str) -> list[tuple[int, int]]:
    """The spans of every definition of ``symbol`` in ``source`` (one when unambiguous)."""
    return [span(node) for node in find(ast.parse(source), symbol)]


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _name_words(name: str) -> set[str]:
    """``_redirect_headers`` -> {redirect, header}; ``URLPattern`` -> {url, pattern}."""
    spaced = re.sub(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])", r"\1\3 \2\4", name)
    return {_stem(word) for word in _words(spaced.replace("_", " "))}


def check(questions: list[dict[str, Any]], roots: dict[str, Path]) -> list[str]:
    """What is wrong with the questions about the corpora in ``roots`` (empty: nothing)."""
    problems: list[str] = []
    ids = Counter(question.get("id") for question in questions)
    problems += [f"{name}: id used {count} times" for name, count in ids.items() if count > 1]
    trees: dict[Path, ast.Module] = {}
    for question in questions:
        name = question.get("id", "?")
        try:
            gold = gold_of(question)
            corpus, category, text = question["corpus"], question["category"], question["question"]
        except (KeyError, TypeError) as error:
            problems.append(f"{name}: malformed ({error!r})")
            continue
        if category not in CATEGORIES:
            problems.append(f"{name}: unknown category {category!r}")
        if corpus not in SDISTS:
            problems.append(f"{name}: unknown corpus {corpus!r}")
            continue
        if corpus not in roots:
            continue
        path = roots[corpus] / gold.path
        if not path.is_file():
            problems.append(f"{name}: no file {gold.path} in {SDISTS[corpus].folder}")
            continue
        if path not in trees:
            trees[path] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        nodes = find(trees[path], gold.symbol)
        if len(nodes) != 1:
            problems.append(f"{name}: {gold.symbol} defined {len(nodes)} times in {gold.path}")
            continue
        actual = span(nodes[0])
        if actual != (gold.start_line, gold.end_line):
            problems.append(
                f"{name}: {gold.symbol} spans {actual[0]}-{actual[1]}, "
                f"recorded {gold.start_line}-{gold.end_line}"
            )
        asked = _words(text)
        docstring = " ".join(_words(ast.get_docstring(nodes[0]) or ""))
        for start in range(len(asked) - COPIED_WORDS + 1):
            run = " ".join(asked[start : start + COPIED_WORDS])
            if f" {run} " in f" {docstring} ":
                problems.append(f"{name}: copies its gold's docstring ({run!r})")
                break
        own = _name_words(gold.symbol.rsplit(".", 1)[-1])
        if category == "behaviour" and own <= {_stem(word) for word in asked}:
            problems.append(f"{name}: a behaviour question spells out {gold.symbol}")
    return problems


def fix_spans(questions: list[dict[str, Any]], roots: dict[str, Path]) -> int:
    """Set each gold's span to its definition's, where it is unambiguous; how many changed."""
    changed = 0
    for question in questions:
        gold = question["gold"]
        path = roots[question["corpus"]] / gold["path"]
        spans = locate(path.read_text(encoding="utf-8"), gold["symbol"])
        if len(spans) == 1 and spans[0] != (gold.get("start_line"), gold.get("end_line")):
            gold["start_line"], gold["end_line"] = spans[0]
            changed += 1
    return changed


def counts_table(questions: list[dict[str, Any]]) -> list[str]:
    counts = Counter((question["corpus"], question["category"]) for question in questions)
    corpora = sorted({question["corpus"] for question in questions})
    lines = ["| corpus | " + " | ".join(CATEGORIES) + " | all |", "|---|" + "--:|" * 4]
    for corpus in [*corpora, "all"]:
        row = [
            sum(n for (c, k), n in counts.items() if k == category and corpus in (c, "all"))
            for category in CATEGORIES
        ]
        lines.append(f"| {corpus} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    return lines


# --- asking and scoring ---------------------------------------------------------------------


def _relative(path: Any, root: Path | None) -> str:
    text = os.fspath(path)
    if root is not None and os.path.isabs(text):
        text = os.path.relpath(text, root)
    return Path(text).as_posix()


def run_questions(
    index: Any, questions: list[dict[str, Any]], modes: Sequence[str], root: Path | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Ask ``index`` every question in each mode; per mode, a row per question: its id,
    category, gold, the top hits (``path``, lines, symbol, score), the gold file's and the
    gold's first ranks (None: not in the top 10) and the search's seconds."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for mode in modes:
        rows = runs[mode] = []
        for question in questions:
            gold = gold_of(question)
            start = time.perf_counter()
            results = list(index.search(question["question"], k=K, mode=mode))[:K]
            seconds = time.perf_counter() - start
            hits = [
                {
                    "path": _relative(result.path, root),
                    "start_line": int(result.start_line),
                    "end_line": int(result.end_line),
                    "symbol": getattr(result, "symbol", None),
                    "score": float(getattr(result, "score", float("nan"))),
                }
                for result in results
            ]
            ranked = [_hit(hit) for hit in hits]
            rows.append(
                {
                    "id": question["id"],
                    "corpus": question["corpus"],
                    "category": question["category"],
                    "gold": question["gold"],
                    "file_rank": file_rank(ranked, gold),
                    "symbol_rank": symbol_rank(ranked, gold),
                    "seconds": seconds,
                    "hits": hits,
                }
            )
    return runs


def _hit(hit: dict[str, Any]) -> Hit:
    return Hit(hit["path"], hit["start_line"], hit["end_line"])


def score(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The metrics of :mod:`anekit.search.evaluate` over some rows of :func:`run_questions`."""
    golds = [gold_of(row) for row in rows]
    return metrics([[_hit(hit) for hit in row["hits"]] for row in rows], golds)


def metrics_table(scores: dict[str, dict[str, float]], label: str = "mode") -> list[str]:
    lines = [f"| {label} | " + " | ".join(COLUMNS.values()) + " |"]
    lines.append("|---|" + "--:|" * len(COLUMNS))
    for name, values in scores.items():
        lines.append(f"| {name} | " + " | ".join(f"{values[key]:.3f}" for key in COLUMNS) + " |")
    return lines


# --- main ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=list(SDISTS), help="(repeatable)")
    parser.add_argument("--mode", action="append", choices=MODES, help="(repeatable)")
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    parser.add_argument(
        "--questions",
        type=Path,
        default=QUESTIONS,
        help="the question set (default: the development set; retrieval_heldout.json: the "
        "held-out set, never used to choose a ranking rule)",
    )
    parser.add_argument(
        "--store", type=Path, help="keep the indexes under this folder (default: a temporary one)"
    )
    parser.add_argument("--lanes", help="embedding lanes for Index, comma-separated")
    parser.add_argument("--check", action="store_true", help="only check the question set")
    parser.add_argument(
        "--fix-spans", action="store_true", help="rewrite the gold spans from the sources"
    )
    args = parser.parse_args()
    corpora = args.corpus or list(SDISTS)
    modes = [mode for mode in MODES if mode in (args.mode or MODES)]
    everything = load_questions(args.questions)
    roots = {corpus: corpus_root(corpus) for corpus in corpora}
    if args.fix_spans:
        changed = fix_spans([q for q in everything if q["corpus"] in roots], roots)
        args.questions.write_text(json.dumps(everything, indent=2, ensure_ascii=False) + "\n")
        print(f"{changed} spans rewritten in {args.questions.name}")
    questions = [question for question in everything if question["corpus"] in roots]
    problems = check(questions, roots)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(f"{len(problems)} problems in {args.questions.name}")
    if args.check or args.fix_spans:
        print(f"{len(questions)} questions, every gold found in its sdist:")
        print("\n".join(counts_table(questions)))
        return

    import anekit
    from anekit.search import Index

    source_before = source_state()
    lanes = [lane.strip() for lane in args.lanes.split(",")] if args.lanes else None
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    indexing: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="anekit-retrieval-") as scratch:
        stores = args.store or Path(scratch)
        stores.mkdir(parents=True, exist_ok=True)
        for corpus in corpora:
            asked = [question for question in questions if question["corpus"] == corpus]
            print(f"indexing {SDISTS[corpus].folder}...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            index = Index(roots[corpus], store=stores / SDISTS[corpus].folder, lanes=lanes)
            index.update()
            indexing[corpus] = time.perf_counter() - start
            print(f"  {indexing[corpus]:.1f} s; asking {len(asked)} questions", file=sys.stderr)
            runs[corpus] = run_questions(index, asked, modes, roots[corpus])
            close = getattr(index, "close", None)
            if callable(close):
                close()

    tables: dict[str, dict[str, dict[str, float]]] = {
        corpus: {mode: score(runs[corpus][mode]) for mode in modes} for corpus in corpora
    }
    every = {mode: [row for corpus in corpora for row in runs[corpus][mode]] for mode in modes}
    tables["overall"] = {mode: score(every[mode]) for mode in modes}
    by_category = {
        f"{mode}, {category}": score([row for row in every[mode] if row["category"] == category])
        for mode in modes
        for category in CATEGORIES
        if any(row["category"] == category for row in every[mode])
    }
    latency = {
        mode: {
            "median_ms": 1000 * statistics.median(row["seconds"] for row in every[mode]),
            "max_ms": 1000 * max(row["seconds"] for row in every[mode]),
        }
        for mode in modes
    }
    today = datetime.date.today().isoformat()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    versions = {"anekit": anekit.__version__, "python": platform.python_version()}
    versions |= {corpus: SDISTS[corpus].version for corpus in corpora}
    record = {
        "script": "bench/retrieval.py",
        "command": command,
        "date": today,
        "machine": machine(),
        "versions": versions,
        "source": {"before": source_before, "after": source_state()},
        "settings": {
            "k": K,
            "modes": modes,
            "lanes": lanes,
            "store": args.store and str(args.store),
        },
        "corpora": {
            corpus: {"sdist": SDISTS[corpus].folder, "sha256": SDISTS[corpus].sha256}
            for corpus in corpora
        },
        "questions": len(questions),
        "index_seconds": indexing,
        "search_latency": latency,
        "metrics": tables,
        "metrics_by_category": by_category,
        "runs": runs,
    }
    output = args.json or RESULTS / f"retrieval-{today}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(redacted(record), indent=2) + "\n")

    print(f"{today}; machine: {machine()}")
    print(f"command: {command}")
    print("versions: " + ", ".join(f"{name} {value}" for name, value in versions.items()))
    print(
        f"file-level hit@k, MRR@{K}, NDCG@{K} (the gold's file at its first rank); "
        f"symbol-hit@{K}: a hit overlapping the gold's lines"
    )
    for name, table in tables.items():
        count = len(questions) if name == "overall" else len(runs[name][modes[0]])
        index_note = "" if name == "overall" else f", indexed in {indexing[name]:.1f} s"
        print(f"\n{name} ({count} questions{index_note})\n")
        print("\n".join(metrics_table(table)))
    print("\noverall, by category\n")
    print("\n".join(metrics_table(by_category, "mode, category")))
    print(
        "\nsearch latency: "
        + "; ".join(
            f"{mode} median {value['median_ms']:.0f} ms, max {value['max_ms']:.0f} ms"
            for mode, value in latency.items()
        )
    )
    print(f"\nJSON: {output}")


if __name__ == "__main__":
    main()
