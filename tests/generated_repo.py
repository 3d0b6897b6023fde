"""A generated repository for indexing tests (48 Python modules and 12 Markdown guides
of distinct, searchable text) and the checks of what a store holds after an index of it:
whole (integrity, no duplicate or orphan chunk, one vector each) and like a clean index."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PYTHON_FILES = 48
MARKDOWN_FILES = 12
FILES = PYTHON_FILES + MARKDOWN_FILES
#: A chunk's vector against the clean index's: int8 activations are quantized per batch, so
#: they differ (>= 0.988 measured here, for one-line chunks); two chunks' vectors here are
#: at most 0.94 alike, and each vector must also be nearest to its own chunk's.
MIN_COSINE = 0.97
DIMENSION = 384
# fmt: off
WORDS = [
    "amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kelp", "lantern", "meadow", "nectar", "onyx", "pepper", "quartz", "raven", "saffron",
    "tundra", "umber", "velvet", "willow", "xenon", "yarrow", "zephyr",
]
NOUNS = [
    "ledger", "invoice", "parcel", "sensor", "ticket", "batch", "voucher", "cursor", "packet",
    "bucket", "tariff", "quota", "shipment", "rota", "beacon",
]
VERBS = ["merge", "split", "rank", "price", "audit", "route", "score", "clamp", "stamp", "tally"]
# fmt: on
QUOTES = '"' * 3

Span = tuple[str, int, int]  # relpath, start line, end line


def python_file(n: int) -> str:
    color, noun = WORDS[n % len(WORDS)], NOUNS[n % len(NOUNS)]
    lines = [f"{QUOTES}The {color} {noun} helpers (module {n}).{QUOTES}", "", ""]
    for k, verb in enumerate(VERBS[n % 3 : n % 3 + 4]):
        lines += [
            f"def {verb}_{color}_{noun}_{n}_{k}(items: list[int], limit: int = {n + k})"
            " -> list[int]:",
            f"    {QUOTES}{verb.capitalize()} each {noun} of the {color} batch {n}.{k}, keeping"
            f" at most limit.{QUOTES}",
            "    kept: list[int] = []",
            "    for item in items:",
            f"        if item % {k + 2} == {n % (k + 2)} and len(kept) < limit:",
            f"            kept.append(item * {n + 1} + {k})",
            f"    return sorted(kept)[: limit // {k + 1} + 1]",
            "",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def markdown_file(n: int) -> str:
    color, noun = WORDS[n * 7 % len(WORDS)], NOUNS[n * 5 % len(NOUNS)]
    lines = [
        f"# The {color} {noun} guide {n}",
        "",
        f"How the {color} {noun} service {n} works.",
        "",
    ]
    for k in range(3):
        lines += [
            f"## {color.capitalize()} step {k} of guide {n}",
            "",
            f"Step {k} of guide {n}: the {noun} is checked against the {color} ledger, then "
            f"every {WORDS[(n + k) % len(WORDS)]} record older than {n + k} days is archived. "
            f"The {color} {noun} pipeline's operators watch the {NOUNS[(n + k) % len(NOUNS)]} "
            "queue.",
            "",
        ]
    return "\n".join(lines)


def write_repo(root: Path) -> None:
    for n in range(PYTHON_FILES):
        package = root / f"pkg{n % 6}"
        package.mkdir(parents=True, exist_ok=True)
        (package / f"mod_{n}.py").write_text(python_file(n))
    (root / "docs").mkdir()
    for n in range(MARKDOWN_FILES):
        (root / "docs" / f"guide_{n}.md").write_text(markdown_file(n))


@dataclass(frozen=True)
class Snapshot:
    """What a store holds: files (relpath -> content hash), chunks (-> text hash), vectors."""

    files: dict[str, str]
    chunks: dict[Span, str]
    vectors: dict[Span, np.ndarray]
    #: The store identity's key (the machine cache's namespace); "" before any.
    namespace: str

    @property
    def waiting(self) -> set[Span]:
        """The chunks still waiting for their vector."""
        return set(self.chunks) - set(self.vectors)

    def file_chunks(self, relpath: str) -> dict[Span, str]:
        return {span: digest for span, digest in self.chunks.items() if span[0] == relpath}


def checked_store(db_path: Path) -> Snapshot:
    """The store's contents, after asserting that it is whole: integrity, no duplicate
    chunk, every chunk with its file and its FTS row, at most one vector per chunk (a
    chunk may still wait for its vector), and nothing else."""
    db = sqlite3.connect(db_path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        duplicates = db.execute(
            "SELECT file_id, start_line, end_line FROM chunks "
            "GROUP BY file_id, start_line, end_line HAVING count(*) > 1"
        ).fetchall()
        assert duplicates == []
        orphans = db.execute(
            "SELECT count(*) FROM chunks WHERE file_id NOT IN (SELECT id FROM files)"
        ).fetchone()[0]
        assert orphans == 0
        chunk_ids = {row[0] for row in db.execute("SELECT id FROM chunks")}
        vector_ids = [row[0] for row in db.execute("SELECT chunk_id FROM vectors")]
        fts_ids = {row[0] for row in db.execute("SELECT id FROM chunks_fts_docsize")}
        assert set(vector_ids) <= chunk_ids == fts_ids
        assert len(vector_ids) == len(set(vector_ids))
        files = dict(db.execute("SELECT relpath, sha256 FROM files").fetchall())
        rows = db.execute(
            "SELECT f.relpath, c.start_line, c.end_line, c.text_hash, v.vector "
            "FROM chunks c JOIN files f ON f.id = c.file_id "
            "LEFT JOIN vectors v ON v.chunk_id = c.id"
        ).fetchall()
        identity = db.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
    finally:
        db.close()
    chunks: dict[Span, str] = {}
    vectors: dict[Span, np.ndarray] = {}
    for relpath, start, end, text_hash, blob in rows:
        chunks[(relpath, start, end)] = text_hash
        if blob is None:
            continue  # waiting for its vector
        vector = np.frombuffer(blob, "<f2").astype(np.float32)
        assert vector.shape == (DIMENSION,) and np.isfinite(vector).all(), relpath
        vectors[(relpath, start, end)] = vector
    return Snapshot(files, chunks, vectors, "" if identity is None else str(identity[0]))


def assert_like_clean(snapshot: Snapshot, clean: Snapshot) -> None:
    """Each file in ``snapshot`` is the clean index's file: same content hash, same chunks
    and text hashes, vectors within batch noise of the clean ones."""
    assert set(snapshot.files) <= set(clean.files)
    for relpath, digest in snapshot.files.items():
        assert digest == clean.files[relpath], relpath
        assert snapshot.file_chunks(relpath) == clean.file_chunks(relpath), relpath
    if not snapshot.vectors:
        return
    spans = list(clean.vectors)
    reference = unit(np.stack([clean.vectors[span] for span in spans]))
    mine = list(snapshot.vectors)
    cosines = unit(np.stack([snapshot.vectors[span] for span in mine])) @ reference.T
    for row, span in enumerate(mine):
        own = spans.index(span)
        assert cosines[row, own] >= MIN_COSINE, (span, cosines[row, own])
        assert int(cosines[row].argmax()) == own, (span, spans[int(cosines[row].argmax())])


def unit(vectors: np.ndarray) -> np.ndarray:
    unit: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit
