"""Retrieval metrics for code search: rankings scored against labelled gold definitions.

Each question has one gold definition (file, symbol, 1-based inclusive line span); a ranking is
what a search returned for it, best first, cut to its first :data:`K` hits. The *file rank* is
the position of the first hit in the gold's file (a file returned several times counts once, at
its first rank); a hit is relevant at the *symbol* level when it is in the gold's file and its
span overlaps the gold's, boundary lines included (:func:`is_relevant`).

:func:`metrics` averages over the questions, a miss scoring 0: ``hit@1``, ``hit@3`` and
``hit@10`` (the file rank is at most 1, 3, 10), ``mrr@10`` (``1 / file rank``), ``ndcg@10``
(``1 / log2(file rank + 1)``: binary relevance, one relevant item, ideal DCG 1),
``symbol_hit@10`` (a hit in the top 10 is relevant at the symbol level) and ``questions``.

Pure: no I/O; paths are compared as given (the caller makes them relative, with ``/``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: How many hits of a ranking count.
K = 10


@dataclass(frozen=True)
class Gold:
    """The definition a question is about: its file and its line span (1-based, inclusive,
    decorators included)."""

    path: str
    symbol: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Hit:
    """One returned result: a file and a line span (1-based, inclusive)."""

    path: str
    start_line: int
    end_line: int


def is_relevant(hit: Hit, gold: Gold) -> bool:
    """The hit is in the gold's file and the two line spans share at least one line."""
    return (
        hit.path == gold.path
        and hit.start_line <= gold.end_line
        and gold.start_line <= hit.end_line
    )


def file_rank(hits: Sequence[Hit], gold: Gold) -> int | None:
    """1-based rank of the first hit in the gold's file within the top :data:`K`, or None."""
    return next((r for r, hit in enumerate(hits[:K], start=1) if hit.path == gold.path), None)


def symbol_rank(hits: Sequence[Hit], gold: Gold) -> int | None:
    """1-based rank of the first hit overlapping the gold within the top :data:`K`, or None."""
    return next((r for r, hit in enumerate(hits[:K], start=1) if is_relevant(hit, gold)), None)


def metrics(ranked: Sequence[Sequence[Hit]], golds: Sequence[Gold]) -> dict[str, float]:
    """hit@1, hit@3, hit@10, mrr@10, ndcg@10 and symbol_hit@10 averaged over the questions
    (``ranked[i]`` answers the question whose gold is ``golds[i]``), and ``questions``."""
    if len(ranked) != len(golds):
        raise ValueError(f"{len(ranked)} rankings for {len(golds)} golds")
    if not golds:
        raise ValueError("no questions to score")
    totals = dict.fromkeys(("hit@1", "hit@3", "hit@10", "mrr@10", "ndcg@10", "symbol_hit@10"), 0.0)
    for hits, gold in zip(ranked, golds, strict=True):
        rank = file_rank(hits, gold)
        if rank is not None:
            totals["hit@1"] += rank <= 1
            totals["hit@3"] += rank <= 3
            totals["hit@10"] += 1.0
            totals["mrr@10"] += 1.0 / rank
            totals["ndcg@10"] += 1.0 / math.log2(rank + 1)
        totals["symbol_hit@10"] += symbol_rank(hits, gold) is not None
    result = {name: total / len(golds) for name, total in totals.items()}
    result["questions"] = float(len(golds))
    return result
