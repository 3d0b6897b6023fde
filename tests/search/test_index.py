"""Indexing a repository and searching it, through the real CPU lane (worker processes).

One small repository is indexed once per module; tests that change files work on
copies, sharing one machine-wide vector cache so that only new texts are embedded.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anekit.errors import SearchError
from anekit.models.onnx_models import INT8_NUMERICS
from anekit.package.int8_kernels import weight_form
from anekit.search import index as index_module
from anekit.search import indexer as indexer_module
from anekit.search.cache import VectorCache
from anekit.search.index import Index, find_root

SESSION = '''"""HTTP sessions."""


class Session:
    """Keeps cookies and a connection pool across requests."""

    def __init__(self, retries: int = 3) -> None:
        self.retries = retries
        self.cookies: dict[str, str] = {}

    def request(self, method: str, url: str) -> bytes:
        """Send one request, retrying on a dropped connection."""
        for attempt in range(self.retries):
            try:
                return self._send(method, url)
            except ConnectionError:
                continue
        raise ConnectionError(url)

    def _send(self, method: str, url: str) -> bytes:
        return f"{method} {url}".encode()


def getUserName(session: Session) -> str:
    """The user the session's cookie names."""
    return session.cookies.get("user", "anonymous")
'''

PARSE = '''"""Parsing durations."""


def parse_duration(text: str) -> float:
    """Seconds in a duration such as 1h30m or 45s."""
    units = {"h": 3600, "m": 60, "s": 1}
    total, number = 0.0, ""
    for char in text:
        if char.isdigit():
            number += char
        else:
            total += float(number) * units[char]
            number = ""
    return total
'''

TESTS = '''from app.session import Session


def test_session_retries_requests() -> None:
    """A session retries a request on a dropped connection."""
    assert Session(retries=2).retries == 2
'''

README = """# app

Sessions retry requests on a dropped connection, and parse_duration reads 1h30m.

## Changelog

- Session retries requests on a dropped connection (#12).
"""


def _write_repo(root: Path) -> None:
    (root / "app").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "app" / "session.py").write_text(SESSION)
    (root / "app" / "parse.py").write_text(PARSE)
    (root / "tests" / "test_session.py").write_text(TESTS)
    (root / "README.md").write_text(README)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir()
    (root / "build" / "generated.py").write_text("def generated():\n    pass\n")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VectorCache]:
    shared = VectorCache(tmp_path_factory.mktemp("cache") / "vectors.db")
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def indexed(
    tmp_path_factory: pytest.TempPathFactory, cache: VectorCache
) -> Iterator[tuple[Index, index_module.IndexSummary]]:
    root = tmp_path_factory.mktemp("repo")
    _write_repo(root)
    built = Index(root, lanes=["cpu"], cache=cache)
    summary = built.update()
    yield built, summary
    built.close()


def _copy(source: Index, destination: Path, cache: VectorCache) -> Index:
    shutil.copytree(source.root, destination, ignore=shutil.ignore_patterns(".anekit"))
    return Index(destination, lanes=["cpu"], cache=cache)


def _text(built: Index, hit: index_module.SearchHit) -> str:
    lines = (built.root / hit.path).read_text().splitlines()
    return "\n".join(lines[hit.start_line - 1 : hit.end_line])


def _contents(built: Index) -> set[tuple[str, int, int, str]]:
    db = sqlite3.connect(built.directory / "store.db")
    try:
        rows = db.execute(
            "SELECT f.relpath, c.start_line, c.end_line, c.text_hash "
            "FROM chunks c JOIN files f ON f.id = c.file_id"
        ).fetchall()
    finally:
        db.close()
    return {tuple(row) for row in rows}


def test_a_first_index_embeds_every_file_it_should(indexed: tuple[Index, object]) -> None:
    built, summary = indexed
    assert isinstance(summary, index_module.IndexSummary)
    assert summary.indexed == 4  # .gitignore is hidden, build/ ignored, logo.png binary
    assert sorted(built.store.files()) == [
        "README.md",
        "app/parse.py",
        "app/session.py",
        "tests/test_session.py",
    ]
    assert summary.skipped_by_reason() == {"binary": 1}
    assert summary.embedded == summary.chunks > 0
    assert summary.lane == "cpu"
    assert (built.root / ".anekit" / "store.db").exists()


def test_an_identifier_finds_its_definition_first(indexed: tuple[Index, object]) -> None:
    """The first hit holds the definition (its own chunk, or the small class or the
    pack of small functions it shares a chunk with)."""
    built, _ = indexed
    for query, path, definition in [
        ("getUserName", "app/session.py", "def getUserName("),
        ("Session.request", "app/session.py", "    def request("),
        ("parse_duration", "app/parse.py", "def parse_duration("),
    ]:
        (first, *_) = built.search(query, k=5)
        lines = (built.root / path).read_text().splitlines()
        line = next(number for number, text in enumerate(lines, 1) if text.startswith(definition))
        assert first.path == path and first.start_line <= line <= first.end_line, query


def test_a_store_and_a_query_give_the_same_ranking_every_time(
    indexed: tuple[Index, object],
) -> None:
    """Asked again, in this index and in another reader of the same store (its own
    vector matrix, query model and keyword connection), a query gets the same hits in
    the same order with the same scores, in every mode."""
    built, _ = indexed
    queries = ["getUserName", "how are retries counted", "session", "parse a duration"]
    other = Index(built.root, lanes=["cpu"], cache=False)
    try:
        for mode in ("hybrid", "vector", "keyword"):
            for query in queries:
                first = built.search(query, k=10, mode=mode)
                assert first, (mode, query)
                assert built.search(query, k=10, mode=mode) == first, (mode, query)
                assert other.search(query, k=10, mode=mode) == first, (mode, query)
    finally:
        other.close()


def test_behaviour_questions_find_the_code_before_its_docs_and_tests(
    indexed: tuple[Index, object],
) -> None:
    """README and the test repeat the words "retries requests on a dropped
    connection"; the code that does it comes first."""
    built, _ = indexed
    hits = built.search("where are requests retried when the connection drops", k=10)
    assert (hits[0].path, hits[0].kind) == ("app/session.py", "code")
    kinds = [hit.kind for hit in hits]
    assert "docs" in kinds and "tests" in kinds  # found, and ranked below the code


def test_modes_and_filters_apply_before_ranking(indexed: tuple[Index, object]) -> None:
    built, _ = indexed
    for mode in ("hybrid", "vector", "keyword"):
        hits = built.search("session retries", k=3, mode=mode, paths=["!app/"])
        assert hits and all(not hit.path.startswith("app/") for hit in hits), mode
    only_md = built.search("retry", k=10, exts=["md"])
    assert only_md and {hit.path for hit in only_md} == {"README.md"}
    only_python = built.search("retry", k=10, langs=["python"], paths=["tests"])
    assert {hit.path for hit in only_python} == {"tests/test_session.py"}
    with pytest.raises(SearchError, match="mode"):
        built.search("x", mode="fuzzy")


def test_a_large_stores_query_is_embedded_while_its_keyword_half_runs(
    indexed: tuple[Index, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From OVERLAP_MIN_VECTORS vectors on (here: any), a hybrid query is embedded and the
    vector index's first pass made on an embedding thread (neither touches the store's
    connection, owned by the search's thread) while the keyword half runs, with the same
    hits; below it, and in vector mode, on the search's own thread."""
    import threading

    from anekit.search import searcher
    from anekit.search.vectors import VectorIndex

    built, _ = indexed
    encoded_on: list[str] = []
    real_encode = searcher.Searcher._encode
    real_first_pass = VectorIndex.first_pass

    def encode(self: Any, held: Any, query: str) -> Any:
        encoded_on.append(threading.current_thread().name)
        return real_encode(self, held, query)

    def first_pass(self: Any, *args: Any) -> Any:
        encoded_on.append("first pass: " + threading.current_thread().name)
        return real_first_pass(self, *args)

    monkeypatch.setattr(searcher.Searcher, "_encode", encode)
    monkeypatch.setattr(VectorIndex, "first_pass", first_pass)
    query = "how are failed requests retried"
    in_turn = built.search(query, k=5)  # loads the query model and the vector index first
    encoded_on.clear()
    assert built.search(query, k=5) == in_turn
    assert encoded_on == [threading.current_thread().name]
    monkeypatch.setattr(searcher, "OVERLAP_MIN_VECTORS", 1)
    encoded_on.clear()
    assert built.search(query, k=5) == in_turn
    assert [name.split("_")[0] for name in encoded_on] == [
        "anekit-query-embedding",
        "first pass: anekit-query-embedding",
    ]
    encoded_on.clear()
    built.search(query, k=5, mode="vector")
    assert encoded_on == [threading.current_thread().name]
    # A large store's keyword half splits in two (store_keyword.SPLIT_MIN_CHUNKS), but not
    # while the vector half has the other core.
    from anekit.search import store_keyword

    halves: list[str] = []
    real_rows = store_keyword._rows

    def rows(*args: Any) -> Any:
        halves.append(threading.current_thread().name)
        return real_rows(*args)

    monkeypatch.setattr(store_keyword, "_rows", rows)
    monkeypatch.setattr(store_keyword, "SPLIT_MIN_CHUNKS", 1)
    assert built.search(query, k=5) == in_turn
    assert not halves
    keyword = built.search(query, k=5, mode="keyword")
    assert [name.split("_")[0] for name in halves] == ["anekit-keyword-half"]
    monkeypatch.setattr(store_keyword, "SPLIT_MIN_CHUNKS", 10**9)
    assert built.search(query, k=5, mode="keyword") == keyword


def test_an_unchanged_repository_is_not_read_again_nor_embedded(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    copy.update()
    copy.close()
    again = Index(copy.root, lanes=["cpu"], cache=cache)
    summary = again.update()
    assert (summary.indexed, summary.unchanged, summary.embedded) == (0, 4, 0)
    assert again._pool is None  # no lane was started
    again.close()


def test_a_second_worktree_takes_every_vector_from_the_machine_cache(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    built, first = indexed
    copy = _copy(built, tmp_path / "worktree", cache)
    summary = copy.update()
    assert (summary.embedded, summary.cached) == (0, first.chunks)  # type: ignore[attr-defined]
    assert _contents(copy) == _contents(built)
    copy.close()


def test_edits_deletes_and_renames_are_incremental(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    copy.update()
    before = _contents(copy)
    session = copy.root / "app" / "session.py"
    logout = 'def logout(session: Session) -> None:\n    """Forget the user."""\n'
    session.write_text(SESSION + "\n\n" + logout + "    session.cookies.clear()\n")
    (copy.root / "tests" / "test_session.py").unlink()
    (copy.root / "app" / "parse.py").rename(copy.root / "app" / "durations.py")
    summary = copy.update()
    assert summary.removed == 2  # the test file, and parse.py under its old name
    assert summary.indexed == 2  # session.py edited, durations.py new
    assert summary.embedded >= 1  # logout's chunk is new text
    files = copy.store.files()
    assert "app/durations.py" in files and "app/parse.py" not in files
    assert "tests/test_session.py" not in files
    after = _contents(copy)
    assert not any(path == "tests/test_session.py" for path, *_ in after)
    assert {row for row in before if row[0] == "README.md"} <= after
    (first, *_) = copy.search("logout", k=3)
    assert first.path == "app/session.py" and "def logout(" in first.snippet + _text(copy, first)
    copy.close()


def test_a_new_chunker_version_re_embeds_the_store(
    indexed: tuple[Index, object],
    cache: VectorCache,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    copy.update()
    monkeypatch.setattr(indexer_module, "CHUNKER_VERSION", "test-next")
    summary = copy.update()
    assert summary.reset and summary.indexed == 4
    assert summary.embedded == summary.chunks  # the cache is keyed on the chunker too
    assert copy.store.identity is not None and copy.store.identity.chunker == "test-next"
    copy.close()


def test_files_are_searchable_by_their_words_before_any_vector_is_written(
    tmp_path: Path,
) -> None:
    """Searchable at once: by the first vector, every file is in the store and keyword
    search (and hybrid, from its keyword half) finds it, while status says how much is
    embedded; at the end every chunk has its vector."""
    from click.testing import CliRunner

    from anekit.cli import cli

    root = tmp_path / "repo"
    _write_repo(root)
    seen: list[tuple[list[str], list[str], tuple[int, int], dict[str, Any]]] = []

    def first_vector(step: index_module.Progress) -> None:
        if seen:
            return
        with Index(root, lanes=["cpu"], cache=False) as reader:
            keyword = reader.search("parse_duration", k=3, mode="keyword")
            hybrid = reader.search("parse_duration", k=3)
            counts = reader.store.embedded_counts()
        status = CliRunner().invoke(cli, ["status", "--store", str(root / ".anekit"), "--json"])
        seen.append(
            (
                [hit.path for hit in keyword],
                [hit.path for hit in hybrid],
                counts,
                json.loads(status.output),
            )
        )

    with Index(root, lanes=["cpu"], cache=False) as index:
        summary = index.update(progress=first_vector)
        final = index.store.embedded_counts()
    (keyword, hybrid, (embedded, chunks), status) = seen[0]
    assert keyword[0] == hybrid[0] == "app/parse.py"
    assert embedded < chunks == summary.chunks  # the vectors come at the checkpoint after
    assert (status["embedded"], status["chunks"]) == (embedded, chunks)
    assert status["embedded_fraction"] == round(embedded / chunks, 4) < 1
    assert final == (chunks, chunks) and summary.embedded > 0


def test_a_shim_lists_the_file_it_forwards_to_beside_it(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    """A question about a shim's name is answered by what it forwards to: app/compat.py
    only re-exports app/session.py, whose words do not match the query at all."""
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    (copy.root / "app" / "compat.py").write_text('"""Old import path."""\nfrom .session import *\n')
    try:
        copy.update()
        for mode in ("keyword", "hybrid"):
            paths = [hit.path for hit in copy.search("compat", k=5, mode=mode)]
            assert paths[:2] == ["app/compat.py", "app/session.py"], mode
        # a module that only imports what it uses is no shim
        (copy.root / "app" / "compat.py").write_text(
            "from .session import Session\n\nDEFAULT = Session()\n"
        )
        copy.update()
        paths = [hit.path for hit in copy.search("compat", k=5, mode="keyword")]
        assert paths == ["app/compat.py"]
    finally:
        copy.close()


def test_hits_behind_a_link_make_room_for_the_next_ones(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    """The ranked hits are checked for links after ranking: when the best ones now run
    through a link, the search ranks again and still returns k visible hits."""
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    (copy.root / "etc").mkdir()
    for name in ("a", "b", "c"):
        (copy.root / "etc" / f"{name}.py").write_text(f"ZEBRA_TOKEN = ZEBRA_TOKEN_{name}\n")
    (copy.root / "app" / "zebra.py").write_text("# mentions ZEBRA_TOKEN once\nx = 1\n")
    try:
        copy.update()
        found = [hit.path for hit in copy.search("ZEBRA_TOKEN", k=4, mode="keyword")]
        assert set(found) == {"etc/a.py", "etc/b.py", "etc/c.py", "app/zebra.py"}
        outside = tmp_path / "outside"
        (copy.root / "etc").rename(outside)
        (copy.root / "etc").symlink_to(outside)
        for k in (1, 2):
            hits = copy.search("ZEBRA_TOKEN", k=k, mode="keyword")
            assert [hit.path for hit in hits] == ["app/zebra.py"], k
    finally:
        copy.close()


def test_files_named_after_a_topic_word_join_the_candidates(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    """A question that names no identifier: the first chunk of each file named after one
    of its words (singular or plural) or two in a row joins the candidates; a word that
    names more than NAMED_FILES files names none in particular, and a query that names an
    identifier looks files up by that name instead."""
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    files = {
        "utils/tasks.ts": "export function getTasks() {\n  return []\n}\n",
        "node/test-run.ts": "export class TestRun {\n}\n",
        "node/state.ts": "export class StateManager {\n}\n",
        "node/tasker.ts": "export const x = 1\n",
    }
    files |= {f"pkg{i}/index.ts": f"export const n{i} = {i}\n" for i in range(9)}
    for relpath, text in files.items():
        (copy.root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (copy.root / relpath).write_text(text)
    try:
        copy.update()
        store = copy.store

        def proposed(query: str, allowed: object = None) -> set[str]:
            ids = index_module._topic_file_chunks(store, query, allowed)  # type: ignore[arg-type]
            return {chunk.relpath for chunk in store.chunks(ids)}

        assert proposed("task state and test run tracking") == {
            "utils/tasks.ts",
            "node/test-run.ts",
            "node/state.ts",
        }
        assert proposed("how is the index of a task kept") == {"utils/tasks.ts"}
        assert proposed("task state", store.filter_ids(["node"])) == {"node/state.ts"}
        assert proposed("how getTasks reads task state") == set()
        ids = index_module._topic_file_chunks(store, "task state", None)
        assert len(ids) == 2  # one chunk per file
    finally:
        copy.close()


def test_files_named_after_a_name_join_the_candidates(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    """The chunks of files named after a name the query names (any case, snake or kebab
    case, plural) join a search's candidates, filters applied: the definition is most likely
    there though neither half proposed it; a file whose name only begins so does not."""
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    for relpath in ("lib/FlatMap.py", "lib/flat_map.py", "lib/flat-maps.py", "lib/flatmapper.py"):
        (copy.root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (copy.root / relpath).write_text("def flatMap(f):\n    return f\n")
    (copy.root / "lib" / "a_b.py").write_text("x = 1\n")  # '_' is no LIKE wildcard here
    try:
        copy.update()
        store = copy.store
        assert store.files_named(["flatmap", "flat_map", "flat-maps"]) == [
            "lib/FlatMap.py",
            "lib/flat-maps.py",
            "lib/flat_map.py",
        ]
        assert store.files_named(["a%b", "axb"]) == [] and store.files_named(["a_b"]) == [
            "lib/a_b.py"
        ]
        ids = index_module._named_file_chunks(store, "how does flatMap compose", None)
        paths = {chunk.relpath for chunk in store.chunks(ids)}
        assert paths == {"lib/FlatMap.py", "lib/flat_map.py", "lib/flat-maps.py"}
        allowed = store.filter_ids(["lib/flat_map.py"])
        kept = index_module._named_file_chunks(store, "how does flatMap compose", allowed)
        assert {chunk.relpath for chunk in store.chunks(kept)} == {"lib/flat_map.py"}
        assert index_module._named_file_chunks(store, "how do maps compose", None) == []
        # a pasted list of names: the first NAMED_NAMES are looked up, in statements SQLite
        # takes (one OR of 2,000 LIKE terms is too deep an expression for it)
        assert store.files_named([f"name{i}" for i in range(1000)] + ["flatmap"]) == [
            "lib/FlatMap.py"
        ]
        names = " ".join(f"fooBar{i}Baz" for i in range(120))[:1000]
        for mode in ("keyword", "hybrid"):
            copy.search(names, k=5, mode=mode)  # raised sqlite3.OperationalError before
        listed = "flatMap " + " ".join(f"fooBar{i}Baz" for i in range(index_module.NAMED_NAMES))
        assert index_module._named_file_chunks(store, listed, None)
        late = " ".join(f"fooBar{i}Baz" for i in range(index_module.NAMED_NAMES)) + " flatMap"
        assert index_module._named_file_chunks(store, late, None) == []
        # the map of stems is kept for a generation only: a file added or removed since shows
        (copy.root / "lib" / "FlatMap.py").unlink()
        (copy.root / "lib" / "flatMaps.py").write_text("def flatMap(f):\n    return f\n")
        copy.update()
        assert copy.store.files_named(["flatmap", "flatmaps"]) == ["lib/flatMaps.py"]
    finally:
        copy.close()


def test_a_one_shot_search_prints_without_rich_tree_sitter_or_pathspec(
    indexed: tuple[Index, object],
) -> None:
    """``anekit search`` in a fresh process, its output a pipe: the hits as plain lines
    (path:lines, symbol, kind and score), and none of rich, tree-sitter or pathspec
    imported (about 70 ms of a one-shot search's start)."""
    import subprocess
    import sys

    built = indexed[0]
    probe = (
        "import sys\n"
        "from anekit.cli import cli\n"
        "try:\n"
        f"    cli(['search', '--store', {str(built.directory)!r}, 'session retries', '-k', '2'],"
        " prog_name='anekit')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "heavy = ('rich', 'tree_sitter', 'tree_sitter_language_pack', 'pathspec')\n"
        "print('LOADED', sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    lines = done.stdout.splitlines()
    assert lines[-1] == "LOADED []"
    assert lines[0].startswith("app/session.py:") and "code" in lines[0]
    assert "\x1b[" not in done.stdout  # not a terminal: no colours


def test_the_store_is_found_from_inside_the_tree(indexed: tuple[Index, object]) -> None:
    built, _ = indexed
    assert find_root(built.root / "app") == built.root
    with pytest.raises(SearchError, match="anekit index"):
        find_root(built.root.parent)


def test_the_cli_prints_the_documented_json(
    indexed: tuple[Index, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`anekit search --json` and `anekit status --json`, run inside the indexed tree
    (the store is found by walking up), print the schema docs/search.md documents."""
    import json

    from click.testing import CliRunner

    from anekit.cli import cli

    built, _ = indexed
    monkeypatch.chdir(built.root / "app")
    result = CliRunner().invoke(cli, ["search", "parse_duration", "-k", "2", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert set(payload) == {"query", "mode", "k", "milliseconds", "embedded_fraction", "hits"}
    assert payload["embedded_fraction"] == 1.0
    (first, *_) = payload["hits"]
    assert set(first) == {
        "path", "start_line", "end_line", "symbol", "kind", "language", "score", "snippet",
    }  # fmt: skip
    assert (first["path"], first["symbol"], first["kind"]) == (
        "app/parse.py",
        "parse_duration",
        "code",
    )
    status = json.loads(CliRunner().invoke(cli, ["status", "--json"]).output)
    assert (status["files"], status["identity"]["variant"]) == (4, "int8")
    # calibrated activation scales, weights in this machine's form (int8: 2, uint8: 3)
    assert status["identity"]["numerics"] == INT8_NUMERICS[weight_form()]
    assert status["embedded"] == status["chunks"] > 0 and status["embedded_fraction"] == 1.0
    monkeypatch.chdir(built.root.parent)
    missing = CliRunner().invoke(cli, ["search", "x", "--json"])
    assert missing.exit_code == 2 and json.loads(missing.output)["error"] == "SearchError"


def test_vectors_a_fallback_lane_made_are_marked_then_replaced(
    indexed: tuple[Index, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk embedded by a lane of other numerics than the store's (the ANE's fp16
    standing in for an int8 store's CPU lane) is kept, marked, cached as what it is,
    and embedded again by the next update; the rest of its file is not."""
    from dataclasses import replace

    from anekit.search.cache import cache_key

    private = VectorCache(tmp_path / "private.db")
    copy = _copy(indexed[0], tmp_path / "repo", private)
    real_lanes = Index._lanes

    def lanes_with_a_stand_in(self: Index) -> object:
        pool = real_lanes(self)
        stream = pool.stream
        if not getattr(stream, "patched", False):

            def relabelled(token_ids: Any) -> Any:
                for index, vector, why, lane in stream(token_ids):
                    yield index, vector, why, "ane" if index == 0 and why is None else lane

            relabelled.patched = True  # type: ignore[attr-defined]
            pool.stream = relabelled  # type: ignore[method-assign]
        return pool

    monkeypatch.setattr(Index, "_lanes", lanes_with_a_stand_in)
    first = copy.update()
    assert first.stand_ins == 1 and first.as_dict()["stand_ins"] == 1
    assert copy.store.stats()["stand_ins"] == {"fp16": 1}
    (marked,) = copy.store.stand_in_files()
    identity = copy.store.identity
    assert identity is not None and identity.variant == "int8"
    db = sqlite3.connect(copy.directory / "store.db")
    (text_hash,) = db.execute(
        "SELECT c.text_hash FROM vectors v JOIN chunks c ON c.id = v.chunk_id "
        "WHERE v.variant = 'fp16'"
    ).fetchone()
    db.close()
    as_fp16 = cache_key(replace(identity, variant="fp16").key(), text_hash)
    as_int8 = cache_key(identity.key(), text_hash)
    assert set(private.get([as_fp16, as_int8], identity.dimension)) == {as_fp16}
    copy.close()

    monkeypatch.setattr(Index, "_lanes", real_lanes)
    again = Index(copy.root, lanes=["cpu"], cache=private)
    second = again.update()
    assert (second.indexed, second.embedded, second.stand_ins) == (1, 1, 0)
    assert second.unchanged == 3  # the other files; only `marked` was read again
    assert again.store.stand_in_files() == [] and again.store.stats()["stand_ins"] == {}
    assert set(private.get([as_fp16, as_int8], identity.dimension)) == {as_fp16, as_int8}
    third = again.update()
    assert (third.indexed, third.embedded) == (0, 0)
    assert marked in again.store.files()
    again.close()
    private.close()


def test_a_reader_follows_a_store_made_anew_under_it(
    indexed: tuple[Index, object], cache: VectorCache, tmp_path: Path
) -> None:
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    copy.update()
    copy.close()
    reader = Index(copy.root, cache=False)
    assert [hit.path for hit in reader.search("parse_duration", k=1, mode="keyword")] == [
        "app/parse.py"
    ]
    shutil.rmtree(copy.root / ".anekit")  # deleted and indexed again by someone else
    (copy.root / "app" / "parse.py").rename(copy.root / "app" / "durations.py")
    with Index(copy.root, lanes=["cpu"], cache=cache) as again:
        again.update()
    for mode in ("keyword", "hybrid"):
        (hit,) = reader.search("parse_duration", k=1, mode=mode)
        assert hit.path == "app/durations.py", mode
    reader.close()


def test_a_file_with_a_few_bytes_that_are_not_utf8_is_indexed_with_a_note(
    tmp_path: Path,
) -> None:
    """Mixed encodings never fail a run nor drop a file: the stray bytes read as U+FFFD,
    the file is searchable, and the summary (and --json) names it."""
    from click.testing import CliRunner

    from anekit.cli import cli

    root = tmp_path / "repo"
    root.mkdir()
    legacy = "# Caf\u00e9 ledger\ndef open_ledger(rows):\n    return rows\n\n\n"
    legacy += "def settle(rows):\n    total = 0\n    for row in rows:\n        total += row\n" * 20
    (root / "legacy.py").write_bytes(legacy.encode().replace("\u00e9".encode(), b"\xe9", 1))
    (root / "clean.py").write_text("def other():\n    return 1\n")
    result = CliRunner().invoke(
        cli, ["index", str(root), "--lane", "cpu", "--json", "--store", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["replaced"] == [
        {"path": "legacy.py", "detail": "not UTF-8 at byte 5: 1 byte sequence(s) read as U+FFFD"}
    ]
    assert (summary["indexed"], summary["skipped"]) == (2, {})
    with Index(root, store=tmp_path / "s", cache=False) as index:
        (hit,) = index.search("open_ledger", k=1, mode="keyword")
    assert hit.path == "legacy.py" and hit.snippet.startswith("# Caf\ufffd ledger")


def test_a_store_over_the_size_searches_through_the_graph_and_a_save_is_found_at_once(
    indexed: tuple[Index, object],
    cache: VectorCache,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anekit.search import ann

    monkeypatch.setattr(ann, "MIN_ROWS", 5)  # this small repository counts as large
    copy = _copy(indexed[0], tmp_path / "repo", cache)
    summary = copy.update()
    assert summary.vector_index.startswith("built (none yet)")
    assert summary.as_dict()["vector_index"] == summary.vector_index
    reader = Index(copy.root, cache=False)
    (hit,) = reader.search("retry a request session", k=1, mode="vector")
    assert isinstance(reader._shared.vectors, ann.AnnIndex)
    assert hit.path == "app/session.py"
    stamp = ann.AnnStamp.read(copy.directory)
    (copy.root / "app" / "zipping.py").write_text(
        "def unzip_archive(path):\n    '''Extract every member of a zip archive.'''\n"
        "    import zipfile\n    zipfile.ZipFile(path).extractall()\n"
    )
    assert copy.update().vector_index == ""  # a few changes: no new graph
    assert ann.AnnStamp.read(copy.directory) == stamp
    hits = reader.search("extract a zip archive", k=3, mode="vector")
    assert hits[0].path == "app/zipping.py"  # the change, scored exactly
    assert isinstance(reader._shared.vectors, ann.AnnIndex) and reader._shared.vectors.changed
    # hybrid, the vector half aside: the graph asked on the other thread, the candidates'
    # vectors read from the store on the search's own
    import threading

    from anekit.search import searcher

    read_on: list[str] = []
    real_vectors_of = type(reader.store).vectors_of

    def vectors_of(self: Any, *args: Any) -> Any:
        read_on.append(threading.current_thread().name)
        return real_vectors_of(self, *args)

    in_turn = reader.search("extract a zip archive", k=3)
    monkeypatch.setattr(type(reader.store), "vectors_of", vectors_of)
    monkeypatch.setattr(searcher, "OVERLAP_MIN_VECTORS", 1)
    assert reader.search("extract a zip archive", k=3) == in_turn
    assert read_on and set(read_on) == {threading.current_thread().name}
    assert copy.forget(copy.root / "app" / "zipping.py") == ["app/zipping.py"]
    hits = reader.search("extract a zip archive", k=3, mode="vector")
    assert "app/zipping.py" not in [hit.path for hit in hits]
    reader.close()
    copy.close()


def test_a_store_indexed_with_a_model_folder_is_searched_with_that_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``anekit index --model PATH`` records the folder in the store; a later search or
    index run that names no model embeds with it, not the default model. A store without the
    record (made before it was kept) is refused with the reason, not searched with the
    default model's vectors against another model's."""
    from anekit.search.store import Store
    from tinybert import tiny_bert

    folder = tiny_bert(tmp_path / "tiny")
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def parse_duration(text):\n    return float(text)\n")
    with Index(root, lanes=["cpu"], cache=False, model=str(folder)) as index:
        index.update()
    with Index(root, cache=False) as reader:  # no model named
        assert reader.store.model_folder == folder.resolve()
        assert reader.search("parse duration", k=1, mode="vector")[0].path == "a.py"
    (root / "b.py").write_text("def retry(send):\n    return send()\n")
    with Index(root, lanes=["cpu"], cache=False) as again:  # `anekit index` once more
        summary = again.update()
    assert not summary.reset and (summary.indexed, summary.unchanged) == (1, 1)
    with Store(root / ".anekit") as store:
        store.set_model_folder(None)
    with Index(root, cache=False) as reader, pytest.raises(SearchError) as refused:
        reader.search("parse duration", k=1, mode="vector")
    assert "the index was made with the model 'tiny'" in str(refused.value)
    assert "embeds queries with 'all-MiniLM-L6-v2'" in str(refused.value)
    from anekit.search import searcher
    from anekit.search.ann import open_vectors

    with Index(root, cache=False) as reader, monkeypatch.context() as patched:
        patched.setattr(searcher, "OVERLAP_MIN_VECTORS", 1)  # hybrid: the vector half aside
        with pytest.raises(SearchError, match="the index was made with the model 'tiny'"):
            reader.search("parse duration", k=1)  # loads the query model on this thread
        # the vector index already read (as when the store was re-indexed with another
        # model under a running server): the vector half goes aside, and is refused first
        reader._shared.vectors = open_vectors(reader.store)
        with pytest.raises(SearchError, match="the index was made with the model 'tiny'"):
            reader.search("parse duration", k=1)
    with Index(root, cache=False, model=str(folder)) as reader:  # named: searched with it
        assert reader.search("parse duration", k=1)[0].path == "a.py"
