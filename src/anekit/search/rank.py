"""Ranking: vector and keyword candidates fused by reciprocal rank, knowing code from prose.

- **Reciprocal rank fusion** (Cormack et al. 2009; semlith's hybrid search,
  shared/docs/prior-art.md §3.6): a chunk's score is the sum over the two lists of
  ``1 / (RRF_K + rank)``. Scores compare hits of one query only.
- **Code before prose**: a question about behaviour is answered by the code that does it,
  not by the changelog, docs and tests that repeat its words (:data:`KIND_WEIGHTS`), unless
  the query asks for that kind (``test``, ``docs``, ``config`` ...).
- **Many files**: a file's further hits are weighted down (:data:`SAME_FILE_DECAY`).
- **Definitions first**: a chunk whose symbol is, or whose text defines, an identifier of the
  query (:func:`identifiers`) goes above every other hit. Not a docs chunk: a README's example
  or a docstring's prose names the definition without being it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: The constant of reciprocal rank fusion (the usual 60).
RRF_K = 60
#: Score weights per chunk kind (code 1). Chosen on the development questions
#: (bench/retrieval.py; docs/search.md has the figures): docs and tests repeat the
#: words of the code they describe and test.
KIND_WEIGHTS = {"code": 1.0, "tests": 0.5, "docs": 0.4, "config": 0.5}
#: Query words that ask for a kind: its weight is then 1.
KIND_WORDS = {
    "tests": {"test", "tests", "testing", "unittest", "pytest", "spec", "specs", "fixture"},
    "docs": {"doc", "docs", "documentation", "readme", "changelog", "guide", "tutorial"},
    "config": {"config", "configuration", "settings", "yaml", "toml", "json", "setup"},
}
#: What a definition named by the query gets on top of its fused score.
DEFINITION_BONUS = 1.0
#: Each further hit from a file already listed is weighted by this once more, so that
#: one file's many chunks do not push every other file out of the first hits.
SAME_FILE_DECAY = 0.8

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|#)[A-Za-z_][A-Za-z0-9_]*)*")
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Candidate:
    """A chunk proposed by the vector or the keyword search."""

    id: int
    symbol: str
    kind: str
    text: str = ""
    path: str = ""


def identifiers(query: str) -> list[list[str]]:
    """The query's words that look like identifiers, each as its dotted parts (``Client.send``
    -> ``["Client", "send"]``): with ``_``, ``.``/``::``/``#``, an inner capital and a small
    letter (``getUserName``, ``HTTPClient``; not an acronym such as ``HTTP``, which prose uses
    as a word), or the whole query."""
    words = _IDENTIFIER.findall(query)
    found: list[list[str]] = []
    for word in words:
        parts = re.split(r"\.|::|#", word)
        camel = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
        if len(parts) > 1 or "_" in word or camel or len(words) == 1:
            found.append(parts)
    return found


def names_definition(symbol: str, parts: Sequence[str]) -> bool:
    """Whether a chunk's symbol path (``Client > send``) ends with ``parts``
    (``["Client", "send"]`` or ``["send"]``), ignoring case when nothing matches exactly."""
    path = [part.strip() for part in symbol.split(">")] if symbol else []
    if len(path) < len(parts):
        return False
    tail = path[len(path) - len(parts) :]
    # a symbol may carry a signature or receiver: "impl Foo for Bar", "self.build"
    names = [re.split(r"[\s(<]", part.removeprefix("self."))[-1] or part for part in tail]
    return names == list(parts) or [n.lower() for n in names] == [p.lower() for p in parts]


_NOT_TYPES = "return|await|new|throw|yield|else|case|raise|assert|print"


def defines(text: str, parts: Sequence[str]) -> bool:
    """Whether ``text`` holds a definition of ``parts[-1]`` (and, for ``A.b``, names
    ``A`` too): a keyword (def, class, func, fn, struct, ...) or a type before it, at
    the start of a line."""
    # `in` first: most candidates need no regex
    if parts[-1] not in text or _definition_pattern(parts[-1]).search(text) is None:
        return False
    return len(parts) == 1 or _word_pattern(parts[-2]).search(text) is not None


@functools.lru_cache(maxsize=256)
def _definition_pattern(name: str) -> re.Pattern[str]:
    name = re.escape(name)
    return re.compile(
        rf"^[ \t]*(?:export\s+)?(?:(?:async\s+)?def|class|function|func(?:\s*\([^)]*\))?|fn"
        rf"|struct|enum|trait|interface|type|impl|module|sub|const|let|var)\s+{name}\b"
        rf"|^[ \t]*(?!(?:{_NOT_TYPES})\b)(?:[\w<>\[\],:*&]+[ \t]+)+\**{name}[ \t]*\("
        rf"|^[ \t]*(?:async\s+|static\s+|get\s+|set\s+)*{name}[ \t]*\([^)]*\)[ \t]*\{{",
        re.MULTILINE,
    )


@functools.lru_cache(maxsize=256)
def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(word)}\b")


def wanted_kinds(query: str) -> set[str]:
    words = set(_WORD.findall(query.lower()))
    return {kind for kind, asking in KIND_WORDS.items() if words & asking}


def fuse(
    query: str,
    vector: Sequence[int],
    keyword: Sequence[int],
    candidates: dict[int, Candidate],
    k: int,
) -> list[tuple[int, float]]:
    """The best ``k`` chunk ids with their scores, from the two ranked id lists."""
    scores: dict[int, float] = {}
    for proposed in (vector, keyword):
        for rank, chunk_id in enumerate(proposed, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (RRF_K + rank)
    asked = wanted_kinds(query)
    named = identifiers(query)
    for chunk_id in scores:
        candidate = candidates.get(chunk_id)
        if candidate is None:
            continue
        if candidate.kind not in asked:
            scores[chunk_id] *= KIND_WEIGHTS.get(candidate.kind, 1.0)
        if candidate.kind != "docs" and any(
            names_definition(candidate.symbol, parts) or defines(candidate.text, parts)
            for parts in named
        ):
            scores[chunk_id] += DEFINITION_BONUS
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return _spread_files(ranked, candidates)[:k]


def _spread_files(
    ranked: list[tuple[int, float]], candidates: dict[int, Candidate]
) -> list[tuple[int, float]]:
    """``ranked`` with each file's n-th hit weighted by ``SAME_FILE_DECAY ** (n - 1)``."""
    seen: dict[str, int] = {}
    spread = []
    for chunk_id, score in ranked:
        candidate = candidates.get(chunk_id)
        path = candidate.path if candidate is not None else ""
        earlier = seen.get(path, 0) if path else 0
        seen[path] = earlier + 1
        spread.append((chunk_id, score * SAME_FILE_DECAY**earlier))
    return sorted(spread, key=lambda item: (-item[1], item[0]))
