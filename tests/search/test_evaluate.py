"""Retrieval metrics (anekit.search.evaluate) on a tiny labelled fixture with
hand-computed values."""

from __future__ import annotations

import math

import pytest

from anekit.search.evaluate import Gold, Hit, file_rank, is_relevant, metrics, symbol_rank


def _miss(number: int) -> Hit:
    return Hit(f"other/{number}.py", 1, 100)


# Five questions; their file ranks are 1, 2, 5, none and 3; symbol-level relevant
# hits for the first two only.
GOLDS = [
    Gold("a.py", "f", 10, 20),
    Gold("b.py", "C.m", 5, 8),
    Gold("c.py", "g", 1, 3),
    Gold("d.py", "h", 40, 50),
    Gold("e.py", "K", 7, 9),
]
RANKED = [
    # rank 1, the exact span
    [Hit("a.py", 10, 20), _miss(1)],
    # rank 2 in the file (wrong span); the same file again at rank 4, touching line 8 only
    [_miss(1), Hit("b.py", 30, 40), _miss(2), Hit("b.py", 8, 9)],
    # rank 5 in the file, on lines 4-6 (next to 1-3, not overlapping); the gold's span
    # itself only at rank 11, past the cut
    [*map(_miss, range(1, 5)), Hit("c.py", 4, 6), *map(_miss, range(5, 10)), Hit("c.py", 1, 3)],
    # the gold's lines, in another file; the gold's file only at rank 11
    [Hit("x/d.py", 40, 50), *map(_miss, range(1, 10)), Hit("d.py", 40, 50)],
    # rank 3 in the file, ending the line before the gold starts
    [_miss(1), _miss(2), Hit("e.py", 1, 6)],
]


def test_is_relevant_boundaries_are_inclusive() -> None:
    gold = Gold("m.py", "f", 10, 20)
    assert is_relevant(Hit("m.py", 20, 30), gold)  # shares the gold's last line
    assert is_relevant(Hit("m.py", 1, 10), gold)  # shares the gold's first line
    assert is_relevant(Hit("m.py", 12, 14), gold)  # inside
    assert is_relevant(Hit("m.py", 1, 99), gold)  # around
    assert not is_relevant(Hit("m.py", 21, 30), gold)  # the line after
    assert not is_relevant(Hit("m.py", 1, 9), gold)  # the line before
    assert not is_relevant(Hit("n/m.py", 10, 20), gold)  # same lines, other file


def test_ranks_are_one_based_first_occurrences_within_ten() -> None:
    assert [file_rank(hits, gold) for hits, gold in zip(RANKED, GOLDS, strict=True)] == [
        1, 2, 5, None, 3,
    ]  # fmt: skip
    assert [symbol_rank(hits, gold) for hits, gold in zip(RANKED, GOLDS, strict=True)] == [
        1, 4, None, None, None,
    ]  # fmt: skip


def test_metrics_on_the_fixture() -> None:
    scores = metrics(RANKED, GOLDS)
    assert scores["questions"] == 5
    assert scores["hit@1"] == pytest.approx(1 / 5)
    assert scores["hit@3"] == pytest.approx(3 / 5)
    assert scores["hit@10"] == pytest.approx(4 / 5)
    assert scores["mrr@10"] == pytest.approx((1 + 1 / 2 + 1 / 5 + 0 + 1 / 3) / 5)
    ndcg = (1 + 1 / math.log2(3) + 1 / math.log2(6) + 0 + 1 / math.log2(4)) / 5
    assert scores["ndcg@10"] == pytest.approx(ndcg)
    assert scores["symbol_hit@10"] == pytest.approx(2 / 5)
    assert set(scores) == {
        "hit@1", "hit@3", "hit@10", "mrr@10", "ndcg@10", "symbol_hit@10", "questions",
    }  # fmt: skip


def test_a_repeated_file_counts_at_its_first_rank_only() -> None:
    gold = Gold("a.py", "f", 10, 20)
    once = metrics([[_miss(1), Hit("a.py", 1, 2)]], [gold])
    repeated = metrics([[_miss(1), Hit("a.py", 1, 2), Hit("a.py", 10, 20)]], [gold])
    assert once["mrr@10"] == repeated["mrr@10"] == 0.5
    assert once["ndcg@10"] == repeated["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert (once["symbol_hit@10"], repeated["symbol_hit@10"]) == (0.0, 1.0)


def test_rank_one_scores_one_and_an_empty_ranking_zero() -> None:
    gold = Gold("a.py", "f", 1, 2)
    top = metrics([[Hit("a.py", 1, 2)]], [gold])
    assert all(top[name] == 1.0 for name in top)
    empty = metrics([[]], [gold])
    assert all(empty[name] == 0.0 for name in empty if name != "questions")


def test_metrics_refuse_mismatched_or_no_questions() -> None:
    with pytest.raises(ValueError, match="rankings"):
        metrics([[]], [])
    with pytest.raises(ValueError, match="no questions"):
        metrics([], [])
