"""anekit.search on semble's public code-search benchmark, scored as semble scores.

semble (github.com/MinishLab/semble, MIT) publishes ~1,250 queries over 63 repositories
pinned by commit in 19 languages (``bench/semble/``: its annotations, ``repos.json`` and
the per-tool results this runner compares with; ``bench/semble/README.md`` names the
commit). Each query has ``relevant`` and ``secondary`` targets, each worth 1: a file, or
a file and a line span (most symbol queries).

Each repository is read from ``<cache>/<name>-<rev12>/`` (default cache
``$ANEKIT_HOME/semble-bench``): the files of its ``benchmark_root`` at the pinned
revision, laid out as in the repository. ``--mirrors DIR`` writes them from git mirrors
under ``DIR`` (``<owner>+<name>/repo``, ``<owner>+<name>``, ``<name>.git`` or ``<name>``;
``--mirror NAME=GITDIR`` for a fork or a renamed repository that holds the commit); a
repository that is missing is named with the commands that make it (``--skip-missing``
runs without it, and the record names it). Only the
``benchmark_root`` is indexed, as semble does (``Index(root, store=..., lanes=["cpu"])``,
the store outside the corpus: a temporary folder, or ``--store``), every query is asked
once with ``k=10`` and scored with semble's code (``benchmarks/metrics.py`` and
``data.py``, transcribed below) in two views:

* chunk-scored, as semble scores itself and CodeRankEmbed: each of the 10 hits is a rank
  slot (a second chunk of a file takes one); a target's rank is the first hit in its file
  whose lines overlap its span (any hit of the file when it has no span);
* file-scored, as semble scores ColGREP, grepai, probe and ripgrep: the hits' files,
  deduplicated in order, and a target's rank is its file's first place (spans ignored).

NDCG@10 is binary with ideal DCG over ``min(10, targets)``. As in semble's summaries, a
repository's figure is the mean over its queries, a language's the mean over its
repositories, the overall figure the mean over repositories, and a category's the mean
over the repositories that have it of their mean for it. Query means are printed too.

The held-out split (alamofire, chi, ecto, gson, libuv, rack, serde, tokio, trpc) is never
used to choose a ranking rule; ``dev`` is the other 54.

    .venv/bin/python bench/semble_bench.py [--split dev|heldout|all] [--repos NAME ...]
        [--mode hybrid|vector|keyword] [--cache DIR] [--store DIR] [--lanes cpu]
        [--skip-missing] [--source CHECKOUT] [--json PATH]
    .venv/bin/python bench/semble_bench.py --materialise --mirrors DIR [--mirror NAME=GITDIR]
        [--split all]

``--source CHECKOUT`` imports anekit from ``CHECKOUT/src`` (its lane workers too), to
measure another commit with this runner. Writes Markdown tables to stdout and a JSON record
(date, command, machine, anekit commit, every query's hits and ranks) to ``--json``
(default ``bench/results/semble-<split>-<date>-<commit>.json``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "semble"
ANNOTATIONS = DATA / "annotations"
RESULTS = HERE / "results"
#: Where bench/semble/ comes from (see its README.md).
BENCHMARK = {
    "repository": "MinishLab/semble",
    "commit": "8d737aba127b76f3c729ef6925b2b17fd769d646",
    "path": "benchmarks/",
    "licence": "MIT",
}
K = 10
MODES = ("hybrid", "vector", "keyword")
HELDOUT = frozenset({"alamofire", "chi", "ecto", "gson", "libuv", "rack", "serde", "tokio", "trpc"})
#: semble's published results (bench/semble/results/): label -> (file, mode or None, view).
PUBLISHED: dict[str, tuple[str, str | None, str]] = {
    "semble": ("semble-hybrid-0332378809c5.json", None, "chunk"),
    "CRE hybrid": ("coderankembed-0332378809c5.json", "hybrid", "chunk"),
    "CRE": ("coderankembed-0332378809c5.json", "semantic", "chunk"),
    "ColGREP": ("colgrep-c8a40fab2235.json", None, "file"),
    "grepai": ("grepai-715563a812c3.json", None, "file"),
    "probe": ("probe-715563a812c3.json", None, "file"),
    "ripgrep": ("ripgrep-fixed-strings-0332378809c5.json", None, "file"),
}
#: Columns of the per-repository table (the rest are in the language table and the JSON).
REPO_COLUMNS = ("semble", "CRE hybrid", "ColGREP")
VIEWS = ("file", "chunk")


# --- semble's data model and scoring (benchmarks/data.py, benchmarks/metrics.py) ----------


@dataclass(frozen=True)
class Target:
    """A relevant file, with a line span (1-based, inclusive) or without."""

    path: str
    start_line: int | None = None
    end_line: int | None = None

    @property
    def has_span(self) -> bool:
        return self.start_line is not None and self.end_line is not None

    def as_text(self) -> str:
        return self.path if not self.has_span else f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True)
class RepoSpec:
    """One pinned repository of ``repos.json``."""

    name: str
    language: str
    url: str
    revision: str
    benchmark_root: str | None = None

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.revision[:12]}"

    @property
    def slug(self) -> str:
        """``owner/name`` of its GitHub URL."""
        return self.url.split("github.com/", 1)[-1].removesuffix(".git")

    def benchmark_dir(self, cache: Path) -> Path:
        checkout = cache / self.folder
        return checkout if not self.benchmark_root else checkout / self.benchmark_root


@dataclass(frozen=True)
class Task:
    """One query and its targets."""

    repo: str
    language: str
    query: str
    relevant: tuple[Target, ...]
    secondary: tuple[Target, ...]
    category: str

    @property
    def all_relevant(self) -> tuple[Target, ...]:
        return self.relevant + self.secondary


def infer_category(query: str) -> str:
    """semble's category for an annotation without one."""
    if " " not in query.strip():
        return "symbol"
    lowered = query.lower()
    if (
        lowered.startswith("how ")
        or lowered.startswith("how does")
        or lowered.startswith("how are")
    ):
        return "architecture"
    return "semantic"


def parse_target(raw: str | dict[str, Any]) -> Target:
    if isinstance(raw, str):
        return Target(path=raw)
    start, end = raw.get("start_line"), raw.get("end_line")
    return Target(
        path=str(raw["path"]),
        start_line=int(start) if start is not None else None,
        end_line=int(end) if end is not None else None,
    )


def load_specs(path: Path = DATA / "repos.json") -> dict[str, RepoSpec]:
    return {item["name"]: RepoSpec(**item) for item in json.loads(path.read_text())}


def load_tasks(specs: dict[str, RepoSpec], folder: Path = ANNOTATIONS) -> list[Task]:
    """Every query of the repositories in ``specs``, in semble's order."""
    tasks: list[Task] = []
    for annotation in sorted(folder.glob("*.json")):
        if annotation.stem not in specs:
            continue
        for item in json.loads(annotation.read_text(encoding="utf-8")):
            repo = item.get("repo", annotation.stem)
            if repo not in specs:
                continue
            category = item.get("category")
            tasks.append(
                Task(
                    repo=repo,
                    language=specs[repo].language,
                    query=item["query"],
                    relevant=tuple(parse_target(t) for t in item.get("relevant", [])),
                    secondary=tuple(parse_target(t) for t in item.get("secondary", [])),
                    category=category
                    if isinstance(category, str)
                    else infer_category(item["query"]),
                )
            )
    return tasks


def path_matches(file_path: str, target_path: str) -> bool:
    """Either path is a suffix of the other (semble compares absolute with relative)."""
    file, target = file_path.replace("\\", "/"), target_path.replace("\\", "/")
    return file == target or file.endswith(f"/{target}") or target.endswith(f"/{file}")


def target_matches_location(file_path: str, start_line: int, end_line: int, target: Target) -> bool:
    if not path_matches(file_path, target.path):
        return False
    if not target.has_span:
        return True
    assert target.start_line is not None and target.end_line is not None
    return not (end_line < target.start_line or start_line > target.end_line)


def dcg(relevances: Sequence[int]) -> float:
    return sum(rel / math.log2(i + 2) for i, rel in enumerate(relevances))


def ndcg_at_k(relevant_ranks: Iterable[int], n_relevant: int, k: int = K) -> float:
    """NDCG@k from the 1-based ranks of relevant results and how many there are."""
    if n_relevant == 0:
        return 0.0
    relevances = [0] * k
    for rank in relevant_ranks:
        if 1 <= rank <= k:
            relevances[rank - 1] = 1
    ideal = dcg([1] * min(k, n_relevant))
    return dcg(relevances) / ideal if ideal > 0 else 0.0


@dataclass(frozen=True)
class Located:
    """A hit as semble's scoring sees it: a file path and a line span."""

    file_path: str
    start_line: int
    end_line: int


def target_rank(hits: Sequence[Located], target: Target) -> int | None:
    """1-based rank of the first hit covering ``target`` (semble's chunk view)."""
    for rank, hit in enumerate(hits, 1):
        if target_matches_location(hit.file_path, hit.start_line, hit.end_line, target):
            return rank
    return None


def file_rank(file_paths: Sequence[str], target_path: str) -> int | None:
    """1-based rank of the first file matching ``target_path`` (semble's file view)."""
    for rank, path in enumerate(file_paths, 1):
        if path_matches(path, target_path):
            return rank
    return None


def chunk_scored(hits: Sequence[Located], task: Task) -> tuple[float, list[int | None]]:
    """NDCG@10 and each target's rank, as semble's run_benchmark scores semble."""
    ranks = [target_rank(hits, target) for target in task.all_relevant]
    found = [rank for rank in ranks if rank is not None]
    return ndcg_at_k(found, len(task.all_relevant)), ranks


def file_scored(hits: Sequence[Located], task: Task) -> tuple[float, list[int | None]]:
    """NDCG@10 and each target's rank, as semble's baselines score ColGREP and the rest."""
    files = list(dict.fromkeys(hit.file_path for hit in hits))
    ranks = [file_rank(files, target.path) for target in task.all_relevant]
    found = [rank for rank in ranks if rank is not None]
    return ndcg_at_k(found, len(task.all_relevant)), ranks


# --- the repositories ----------------------------------------------------------------------


def complete_marker(cache: Path, spec: RepoSpec) -> Path:
    return cache / f"{spec.folder}.complete"


def is_materialised(cache: Path, spec: RepoSpec) -> bool:
    return complete_marker(cache, spec).exists() and spec.benchmark_dir(cache).is_dir()


def find_mirror(mirrors: Path, spec: RepoSpec) -> Path | None:
    """The git directory of ``spec``'s repository under ``mirrors``, or None."""
    owner, name = spec.slug.split("/", 1)
    for candidate in (
        mirrors / f"{owner}+{name}" / "repo",
        mirrors / f"{owner}+{name}",
        mirrors / f"{name}.git",
        mirrors / name,
    ):
        if (candidate / "HEAD").exists() or (candidate / ".git" / "HEAD").exists():
            return candidate if (candidate / "HEAD").exists() else candidate / ".git"
    return None


def materialise(cache: Path, spec: RepoSpec, git_dir: Path) -> None:
    """Write the ``benchmark_root`` files of ``spec`` at its revision from ``git_dir`` into
    ``<cache>/<name>-<rev12>/`` (blob by blob: ``export-ignore`` attributes do not apply);
    a marker next to the folder says it is complete."""
    git = ["git", "--git-dir", str(git_dir)]
    probe = [*git, "cat-file", "-e", f"{spec.revision}^{{commit}}"]
    if subprocess.run(probe, capture_output=True).returncode:
        raise SystemExit(f"{spec.name}: {git_dir} lacks the pinned commit {spec.revision}")
    scope = [spec.benchmark_root] if spec.benchmark_root else []
    listing = subprocess.run(
        [*git, "ls-tree", "-r", "-z", spec.revision, "--", *scope],
        capture_output=True,
        check=True,
    ).stdout
    entries: list[tuple[str, str, str]] = []
    for record in listing.split(b"\0"):
        if record:
            meta, name = record.split(b"\t", 1)
            mode, kind, sha = meta.decode().split()
            if kind == "blob":  # submodules (commit) have no files here
                entries.append((mode, sha, os.fsdecode(name)))
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.folder}-", dir=cache))
    with subprocess.Popen(
        [*git, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as batch:
        assert batch.stdin is not None and batch.stdout is not None
        for mode, sha, path in entries:
            batch.stdin.write(f"{sha}\n".encode())
            batch.stdin.flush()
            size = int(batch.stdout.readline().split()[2])
            content = batch.stdout.read(size)
            batch.stdout.read(1)  # the newline after each object
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                os.symlink(os.fsdecode(content), target)
            else:
                target.write_bytes(content)
                if mode == "100755":
                    target.chmod(0o755)
        batch.stdin.close()
    destination = cache / spec.folder
    if destination.exists():
        shutil.rmtree(destination)
    staging.rename(destination)
    complete_marker(cache, spec).write_text(f"{spec.url} {spec.revision} {len(entries)} files\n")


def missing_help(cache: Path, missing: Sequence[RepoSpec]) -> str:
    """How to make the repositories that are not in ``cache``."""
    lines = [
        f"{len(missing)} repositories are not materialised under {cache}:",
        *(f"  {spec.name} ({spec.url} @ {spec.revision})" for spec in missing),
        "From git mirrors (a clone of each, `git clone --mirror URL DIR/<owner>+<name>`):",
        f"  {Path(sys.executable).name} bench/semble_bench.py --materialise --mirrors DIR "
        f"--cache {cache} --repos " + " ".join(spec.name for spec in missing),
        "or by hand, for each: git --git-dir=MIRROR archive REV BENCHMARK_ROOT | tar -x -C "
        f"{cache}/<name>-<rev12> && touch {cache}/<name>-<rev12>.complete",
    ]
    return "\n".join(lines)


# --- asking ------------------------------------------------------------------------------


def ask(
    index: Any, tasks: Sequence[Task], spec: RepoSpec, cache: Path, mode: str
) -> list[dict[str, Any]]:
    """Ask ``index`` every task of one repository; a row per task with its hits (paths
    relative to the repository) and both views' ranks and NDCG@10."""
    root = spec.benchmark_dir(cache)
    prefix = f"{spec.benchmark_root.strip('/')}/" if spec.benchmark_root else ""
    rows = []
    for task in tasks:
        start = time.perf_counter()
        results = list(index.search(task.query, k=K, mode=mode))[:K]
        seconds = time.perf_counter() - start
        hits = [
            {
                "path": prefix + Path(result.path).as_posix(),
                "start_line": int(result.start_line),
                "end_line": int(result.end_line),
                "symbol": result.symbol,
                "score": round(float(result.score), 6),
            }
            for result in results
        ]
        # semble matches its chunks' absolute paths against the targets by suffix.
        located = [
            Located(str(root / Path(result.path)), int(result.start_line), int(result.end_line))
            for result in results
        ]
        chunk_ndcg, chunk_ranks = chunk_scored(located, task)
        file_ndcg, file_ranks = file_scored(located, task)
        rows.append(
            {
                "repo": task.repo,
                "language": task.language,
                "category": task.category,
                "query": task.query,
                "targets": [target.as_text() for target in task.all_relevant],
                "relevant": len(task.relevant),
                "ndcg10": {"file": file_ndcg, "chunk": chunk_ndcg},
                "ranks": {"file": file_ranks, "chunk": chunk_ranks},
                "seconds": round(seconds, 5),
                "hits": hits,
            }
        )
    return rows


# --- aggregation as semble's summaries do ------------------------------------------------


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else float("nan")


def repo_figures(rows: Sequence[dict[str, Any]], view: str) -> dict[str, Any]:
    """A repository's mean NDCG@10 in ``view`` and its mean per category."""
    categories: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        categories[row["category"]].append(row["ndcg10"][view])
    return {
        "ndcg10": mean(row["ndcg10"][view] for row in rows),
        "by_category": {name: mean(values) for name, values in sorted(categories.items())},
    }


def load_published(specs: dict[str, RepoSpec]) -> dict[str, dict[str, dict[str, Any]]]:
    """semble's published per-repository figures: label -> repo -> {ndcg10, by_category}."""
    published: dict[str, dict[str, dict[str, Any]]] = {}
    for label, (name, mode, _view) in PUBLISHED.items():
        path = DATA / "results" / name
        if not path.exists():
            continue
        entries = json.loads(path.read_text())["repos"]
        published[label] = {
            entry["repo"]: {
                "ndcg10": float(entry["ndcg10"]),
                "by_category": entry.get("by_category", {}),
            }
            for entry in entries
            if entry["repo"] in specs and (mode is None or entry.get("mode") == mode)
        }
    return published


def summarise(
    figures: dict[str, dict[str, Any]], specs: dict[str, RepoSpec], repos: Sequence[str]
) -> dict[str, Any]:
    """Overall (mean over repositories), per language and per category figures of one tool
    (``figures``: repo -> {ndcg10, by_category}) over ``repos``; None where it lacks one."""
    if any(repo not in figures for repo in repos):
        return {"ndcg10": None, "by_language": {}, "by_category": {}}
    languages: dict[str, list[float]] = defaultdict(list)
    categories: dict[str, list[float]] = defaultdict(list)
    for repo in repos:
        languages[specs[repo].language].append(figures[repo]["ndcg10"])
        for name, value in figures[repo].get("by_category", {}).items():
            categories[name].append(value)
    return {
        "ndcg10": mean(figures[repo]["ndcg10"] for repo in repos),
        "by_language": {name: mean(values) for name, values in sorted(languages.items())},
        "by_category": {name: mean(values) for name, values in sorted(categories.items())},
    }


# --- tables ------------------------------------------------------------------------------


def _cell(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.3f}"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], numeric_from: int = 1) -> list[str]:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append(
        "|" + "|".join("---" if i < numeric_from else "--:" for i in range(len(header))) + "|"
    )
    for row in rows:
        lines.append(
            "| " + " | ".join(_cell(c) if not isinstance(c, str) else c for c in row) + " |"
        )
    return lines


def report(
    record: dict[str, Any],
    specs: dict[str, RepoSpec],
    print_line: Callable[[str], None] = print,
) -> None:
    """The Markdown tables of a run's ``record``."""
    repos: list[str] = record["repos_run"]
    ours = record["anekit"]
    theirs = record["published"]
    labels = [label for label in PUBLISHED if theirs.get(label, {}).get("ndcg10") is not None]
    per_repo = record["per_repo"]
    print_line("\nper repository (NDCG@10; semble and CRE chunk-scored, the others file-scored)\n")
    header = ["repo", "language", "queries", "index s", "anekit file", "anekit chunk"]
    header += [label for label in REPO_COLUMNS if label in labels]
    print_line(
        "\n".join(
            table(
                header,
                (
                    [
                        repo,
                        specs[repo].language,
                        str(per_repo[repo]["queries"]),
                        f"{per_repo[repo]['index_seconds']:.0f}",
                        per_repo[repo]["file"]["ndcg10"],
                        per_repo[repo]["chunk"]["ndcg10"],
                        *(
                            record["published_per_repo"][label].get(repo)
                            for label in REPO_COLUMNS
                            if label in labels
                        ),
                    ]
                    for repo in repos
                ),
                numeric_from=2,
            )
        )
    )
    languages = sorted({specs[repo].language for repo in repos})
    print_line("\nper language (mean over its repositories)\n")
    header = ["language", "repos", "anekit file", "anekit chunk", *labels]
    rows: list[list[Any]] = [
        [
            language,
            str(sum(specs[repo].language == language for repo in repos)),
            ours["file"]["by_language"].get(language),
            ours["chunk"]["by_language"].get(language),
            *(theirs[label]["by_language"].get(language) for label in labels),
        ]
        for language in languages
    ]
    rows.append(
        [
            "**overall** (mean over repos)",
            str(len(repos)),
            ours["file"]["ndcg10"],
            ours["chunk"]["ndcg10"],
            *(theirs[label]["ndcg10"] for label in labels),
        ]
    )
    print_line("\n".join(table(header, rows, numeric_from=1)))
    categories = sorted(ours["chunk"]["by_category"])
    with_categories = [label for label in labels if theirs[label]["by_category"]]
    print_line("\nper category (mean over the repositories that have it)\n")
    header = ["category", "queries", "anekit file", "anekit chunk", *with_categories]
    counts = record["queries_by_category"]
    print_line(
        "\n".join(
            table(
                header,
                (
                    [
                        category,
                        str(counts.get(category, 0)),
                        ours["file"]["by_category"].get(category),
                        ours["chunk"]["by_category"].get(category),
                        *(theirs[label]["by_category"].get(category) for label in with_categories),
                    ]
                    for category in categories
                ),
            )
        )
    )
    query_means = record["query_means"]
    print_line(
        f"\nmean over the {record['queries']} queries: file {query_means['file']:.3f}, "
        f"chunk {query_means['chunk']:.3f}"
    )


# --- main --------------------------------------------------------------------------------


def select(specs: dict[str, RepoSpec], split: str, names: Sequence[str] | None) -> list[str]:
    if names:
        unknown = sorted(set(names) - set(specs))
        if unknown:
            raise SystemExit(f"unknown repositories: {', '.join(unknown)}")
        return [name for name in specs if name in names]
    if split == "dev":
        return [name for name in specs if name not in HELDOUT]
    if split == "heldout":
        return [name for name in specs if name in HELDOUT]
    return list(specs)


def use_source(checkout: Path) -> None:
    """Import anekit from ``checkout/src`` here and in the lane workers."""
    src = (checkout / "src").resolve()
    if not (src / "anekit" / "__init__.py").is_file():
        raise SystemExit(f"{checkout}: no src/anekit")
    sys.path.insert(0, str(src))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(src), *filter(None, [os.environ.get("PYTHONPATH")])]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="dev")
    parser.add_argument("--repos", nargs="+", metavar="NAME", help="only these repositories")
    parser.add_argument("--mode", choices=MODES, default="hybrid")
    parser.add_argument(
        "--cache",
        type=Path,
        help="the materialised repositories (default $ANEKIT_HOME/semble-bench)",
    )
    parser.add_argument("--mirrors", type=Path, help="git mirrors to materialise missing ones from")
    parser.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="NAME=GITDIR",
        help="the git directory to materialise NAME from (a fork or a renamed repository)",
    )
    parser.add_argument(
        "--materialise", action="store_true", help="only materialise the repositories"
    )
    parser.add_argument(
        "--skip-missing", action="store_true", help="run without the unmaterialised repositories"
    )
    parser.add_argument("--store", type=Path, help="keep the indexes under this folder")
    parser.add_argument("--source", type=Path, help="import anekit from CHECKOUT/src")
    parser.add_argument("--lanes", default="cpu", help="embedding lanes, comma-separated")
    parser.add_argument("--json", type=Path, help="where to write the JSON record")
    args = parser.parse_args()
    if args.source:
        use_source(args.source)

    from benchmachine import machine, redacted, source_state

    from anekit.config import home

    specs = load_specs()
    names = select(specs, args.split, args.repos)
    if not args.repos and args.split != "heldout":
        print(f"{len(names)} repositories ({args.split})", file=sys.stderr)
    cache = (args.cache or home() / "semble-bench").expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    missing = [specs[name] for name in names if not is_materialised(cache, specs[name])]
    given = dict(item.split("=", 1) for item in args.mirror)
    if missing and (args.mirrors or given):
        for spec in list(missing):
            if spec.name in given:
                mirror: Path | None = Path(given[spec.name]).expanduser()
            else:
                mirror = find_mirror(args.mirrors, spec) if args.mirrors else None
            if mirror is None:
                print(
                    f"{spec.name}: no mirror of {spec.slug} under {args.mirrors}", file=sys.stderr
                )
                continue
            try:
                materialise(cache, spec, mirror)
            except SystemExit as error:
                print(error, file=sys.stderr)
                continue
            print(f"{spec.name}: materialised {spec.folder}", file=sys.stderr)
            missing.remove(spec)
    if args.materialise:
        if missing:
            print(missing_help(cache, missing), file=sys.stderr)
            raise SystemExit(1)
        return
    if missing and not args.skip_missing:
        raise SystemExit(missing_help(cache, missing))
    if missing:
        print(missing_help(cache, missing) + "\n(skipped)", file=sys.stderr)
        names = [name for name in names if specs[name] not in missing]

    import anekit
    from anekit.search import Index

    tasks = load_tasks(specs)
    by_repo: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_repo[task.repo].append(task)
    names = [name for name in names if by_repo.get(name)]
    lanes = [lane.strip() for lane in args.lanes.split(",") if lane.strip()]
    source_before = source_state()
    rows: dict[str, list[dict[str, Any]]] = {}
    indexing: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="anekit-semble-") as scratch:
        stores = (args.store or Path(scratch)).expanduser().resolve()
        for number, name in enumerate(names, 1):
            spec = specs[name]
            print(
                f"[{number}/{len(names)}] {name} ({spec.language}): indexing...",
                file=sys.stderr,
                flush=True,
            )
            start = time.perf_counter()
            with Index(spec.benchmark_dir(cache), store=stores / spec.folder, lanes=lanes) as index:
                summary = index.update()
                seconds = time.perf_counter() - start
                rows[name] = ask(index, by_repo[name], spec, cache, args.mode)
            indexing[name] = {
                "seconds": round(seconds, 2),
                "files": summary.files,
                "chunks": summary.chunks,
                "embedded": summary.embedded,
                "cached": summary.cached,
                "skipped": summary.skipped_by_reason(),
            }
            figure = (
                repo_figures(rows[name], "file")["ndcg10"],
                repo_figures(rows[name], "chunk")["ndcg10"],
            )
            print(
                f"  {seconds:.1f} s, {summary.chunks} chunks; {len(rows[name])} queries: "
                f"NDCG@10 file {figure[0]:.3f}, chunk {figure[1]:.3f}",
                file=sys.stderr,
                flush=True,
            )

    per_view = {view: {name: repo_figures(rows[name], view) for name in names} for view in VIEWS}
    published = load_published(specs)
    every = [row for name in names for row in rows[name]]
    category_counts: dict[str, int] = defaultdict(int)
    for row in every:
        category_counts[row["category"]] += 1
    source = source_state()
    # The modules are loaded at the start: the source then is the one measured.
    commit = (source_before.get("commit") or "unknown")[:7]
    commit += "-edited" if source_before.get("src_changed") else ""
    moved = (source.get("commit"), source.get("src_changed")) != (
        source_before.get("commit"),
        source_before.get("src_changed"),
    )
    today = datetime.date.today().isoformat()
    label = args.split if not args.repos else "repos"
    record: dict[str, Any] = {
        "script": "bench/semble_bench.py",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "date": today,
        "machine": machine(),
        "versions": {"anekit": anekit.__version__, "python": platform.python_version()},
        "source": {"before": source_before, "after": source, "moved": moved},
        "benchmark": BENCHMARK,
        "settings": {"k": K, "mode": args.mode, "lanes": lanes, "split": args.split},
        "repos_run": names,
        "repos_missing": [spec.name for spec in missing],
        "queries": len(every),
        "queries_by_category": dict(sorted(category_counts.items())),
        "seconds": round(time.perf_counter() - started, 1),
        "anekit": {view: summarise(per_view[view], specs, names) for view in VIEWS},
        "query_means": {view: mean(row["ndcg10"][view] for row in every) for view in VIEWS},
        "published": {label_: summarise(published[label_], specs, names) for label_ in published},
        "published_per_repo": {
            label_: {
                name: published[label_][name]["ndcg10"]
                for name in names
                if name in published[label_]
            }
            for label_ in published
        },
        "per_repo": {
            name: {
                "language": specs[name].language,
                "revision": specs[name].revision,
                "queries": len(rows[name]),
                "index_seconds": indexing[name]["seconds"],
                "index": indexing[name],
                **{view: per_view[view][name] for view in VIEWS},
            }
            for name in names
        },
        "runs": rows,
    }
    output = args.json or RESULTS / f"semble-{label}-{today}-{commit}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(redacted(record), indent=1) + "\n")

    print(f"{today}; machine: {record['machine']}")
    print(f"command: {record['command']}")
    print(
        f"anekit {anekit.__version__} at {source_before.get('commit')}"
        + (" (src edited)" if source_before.get("src_changed") else "")
        + (" (the checkout changed during the run)" if moved else "")
        + f"; mode {args.mode}, k={K}, lanes {','.join(lanes)}; {len(names)} repositories, "
        f"{len(every)} queries, {record['seconds']:.0f} s"
    )
    report(record, specs)
    print(f"\nJSON: {output}")


if __name__ == "__main__":
    main()
