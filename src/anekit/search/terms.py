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
from collections.abc import Iterator, Sequence
from itertools import islice

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
    """Lower-cased words of an identifier, split at ``_``/``-``, case changes and digits:
    ``getUserName`` -> ``[get, user, name]``, ``HTTPServerError`` -> ``[http, server, error]``,
    ``utf8_decode`` -> ``[utf, 8, decode]``."""
    return [word.lower() for piece in _PIECE.findall(identifier) for word in _split_case(piece)]


def _split_case(piece: str) -> list[str]:
    """Split a run of letters and digits at case and digit boundaries."""
    words: list[str] = []
    start = 0
    for i in range(1, len(piece)):
        prev, char, after = piece[i - 1], piece[i], piece[i + 1 : i + 2]
        if (
            prev.isdigit() != char.isdigit()
            or (prev.islower() and char.isupper())  # getUser
            # HTTPServer: cut before the last capital of a run that a lower-case letter follows.
            or (prev.isupper() and char.isupper() and after.isalpha() and not after.isupper())
        ):
            words.append(piece[start:i])
            start = i
    words.append(piece[start:])
    return words


def _distinct_parts(text: str) -> Iterator[tuple[str, ...]]:
    """The parts of each distinct word or identifier in ``text``, in order of first use."""
    seen: set[tuple[str, ...]] = set()
    for match in _IDENTIFIER.finditer(text):
        parts = tuple(identifier_parts(match.group()))
        if parts and parts not in seen:
            seen.add(parts)
            yield parts


def index_terms(text: str) -> str:
    """Extra terms appended to what FTS5 indexes for ``text``: for each distinct compound
    identifier its lower-cased parts and their joined form (``getUserName`` and
    ``get_user_name`` -> ``"get user name getusername"``). Plain words add nothing."""
    compounds = (parts for parts in _distinct_parts(text) if len(parts) > 1)
    return " ".join(" ".join([*parts, "".join(parts)]) for parts in compounds)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def query_items(query: str) -> list[tuple[str, ...]]:
    """The distinct words and identifiers of a query as their lower-cased parts, in order
    (``"getUserName find"`` -> ``[("get", "user", "name"), ("find",)]``), at most
    :data:`MAX_QUERY_TERMS`."""
    return list(islice(_distinct_parts(query), MAX_QUERY_TERMS))


def item_expression(parts: Sequence[str]) -> str:
    """The FTS5 expression of one query item: ``"word"``, or for a compound identifier its
    joined form OR its parts as a phrase: ``("getusername" OR "get user name")``."""
    if len(parts) == 1:
        return _quote(parts[0])
    return f"({_quote(''.join(parts))} OR {_quote(' '.join(parts))})"


def query_terms(query: str) -> str:
    """An FTS5 MATCH expression for a user query (``""`` when it has no words): its items
    (:func:`item_expression`) joined with OR for recall; BM25 ranks chunks by how many they
    match. Every term is quoted, so FTS5 syntax in the query is searched for, never parsed."""
    return " OR ".join(item_expression(parts) for parts in query_items(query))
