"""Code-aware keyword terms, stated once for indexing and for querying.

The store's FTS5 index uses the ``unicode61`` tokenizer with ``remove_diacritics 2`` and no
``tokenchars``: ``_``, ``-``, ``.`` and ``/`` stay separators, so ``get_user_name``,
``get-user-name`` and ``src/user/name.py`` are split into words by the tokenizer itself, and
``remove_diacritics 2`` folds ``café`` to ``cafe`` on both sides (the ``2`` also folds letters
that carry several diacritics, which ``1`` misses). Keeping ``_`` as a token character would
make ``get_user_name`` one token that ``get user name`` never meets.

What the tokenizer cannot do is split ``getUserName`` or ``HTTPServerError``, nor join the parts
of ``get_user_name`` into ``getusername``. :func:`index_terms` adds both to every chunk (the
parts and the joined form of each compound identifier), and :func:`query_terms` asks for a
compound identifier as its joined form OR its parts as a phrase, so ``getUserName``,
``get_user_name`` and ``get user name`` all find a chunk that holds any one of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "FTS_TOKENIZER",
    "MAX_QUERY_TERMS",
    "TERMS_VERSION",
    "identifier_parts",
    "index_terms",
    "item_expression",
    "query_items",
    "query_terms",
]

FTS_TOKENIZER = "unicode61 remove_diacritics 2"
"""The FTS5 tokenizer of the store's keyword index (why: see the module docstring)."""

# Bump when index_terms changes what it emits: stores rebuild their keyword index then.
TERMS_VERSION = 1

# A query gives at most this many distinct terms to FTS5 (the rest of a pasted page is noise).
MAX_QUERY_TERMS = 64

# An identifier: letters/digits, possibly joined by "_" or "-" (snake_case, kebab-case).
_IDENTIFIER = re.compile(r"[^\W_]+(?:[-_]+[^\W_]+)*")
_PIECE = re.compile(r"[^\W_]+")


def identifier_parts(identifier: str) -> list[str]:
    """Lower-cased words of an identifier, split at ``_``/``-``, camelCase, PascalCase and digits.

    ``getUserName`` -> ``[get, user, name]``; ``HTTPServerError`` -> ``[http, server, error]``;
    ``utf8_decode`` -> ``[utf, 8, decode]``.
    """
    parts: list[str] = []
    for piece in _PIECE.findall(identifier):
        parts.extend(word.lower() for word in _split_case(piece))
    return parts


def _split_case(piece: str) -> list[str]:
    """Split a run of letters and digits at case and digit boundaries."""
    words: list[str] = []
    start = 0
    for i in range(1, len(piece)):
        prev, char = piece[i - 1], piece[i]
        if prev.isdigit() != char.isdigit():
            boundary = True
        elif prev.islower() and char.isupper():
            boundary = True  # getUser
        else:
            # HTTPServer: cut before the last capital of a run that a lower-case letter follows.
            boundary = (
                prev.isupper()
                and char.isupper()
                and i + 1 < len(piece)
                and piece[i + 1].isalpha()
                and not piece[i + 1].isupper()
            )
            if boundary:
                boundary = i > start  # never an empty word
        if boundary:
            words.append(piece[start:i])
            start = i
    words.append(piece[start:])
    return words


def _expansions(text: str) -> list[list[str]]:
    """The parts of each distinct compound identifier in ``text``, in order of first use."""
    seen: set[tuple[str, ...]] = set()
    out: list[list[str]] = []
    for match in _IDENTIFIER.finditer(text):
        parts = identifier_parts(match.group())
        key = tuple(parts)
        if len(parts) > 1 and key not in seen:
            seen.add(key)
            out.append(parts)
    return out


def index_terms(text: str) -> str:
    """Extra terms appended to what FTS5 indexes for ``text``: for each distinct compound
    identifier its lower-cased parts and their joined form (``getUserName`` and
    ``get_user_name`` -> ``"get user name getusername"``). Plain words add nothing."""
    return " ".join(" ".join([*parts, "".join(parts)]) for parts in _expansions(text))


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def query_items(query: str) -> list[tuple[str, ...]]:
    """The distinct words and identifiers of a query as their lower-cased parts, in order
    (``"getUserName find"`` -> ``[("get", "user", "name"), ("find",)]``), at most
    :data:`MAX_QUERY_TERMS`."""
    items: list[tuple[str, ...]] = []
    seen: set[tuple[str, ...]] = set()
    for match in _IDENTIFIER.finditer(query):
        parts = tuple(identifier_parts(match.group()))
        if parts and parts not in seen:
            seen.add(parts)
            items.append(parts)
            if len(items) == MAX_QUERY_TERMS:
                break
    return items


def item_expression(parts: Sequence[str]) -> str:
    """The FTS5 expression of one query item: ``"word"``, or for a compound identifier its
    joined form OR its parts as a phrase: ``("getusername" OR "get user name")``."""
    if len(parts) == 1:
        return _quote(parts[0])
    return f"({_quote(''.join(parts))} OR {_quote(' '.join(parts))})"


def query_terms(query: str) -> str:
    """An FTS5 MATCH expression for a user query, or ``""`` when it has no words.

    Each word or identifier becomes its joined form OR its parts as a phrase
    (``getUserName`` -> ``("getusername" OR "get user name")``); the words are joined with OR
    for recall and BM25 ranks chunks by how many they match. Every term is a quoted string of
    letters and digits, so FTS5 syntax in the query (quotes, ``*``, ``:``, ``-``, parentheses,
    ``AND``/``OR``/``NOT``/``NEAR``) is searched for as words, never parsed.
    """
    return " OR ".join(item_expression(parts) for parts in query_items(query))
