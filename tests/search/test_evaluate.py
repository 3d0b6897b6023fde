"""Retrieval metrics (anekit.search.evaluate) and the harness's scoring
(bench/retrieval.py) on a tiny labelled fixture with hand-computed values."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from anekit.search.evaluate import Gold, Hit, file_rank, is_relevant, metrics, symbol_rank

BENCH = Path(__file__).resolve().parents[2] / "bench"


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


# --- the harness: bench/retrieval.py --------------------------------------------------


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("retrieval_harness", BENCH / "retrieval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "retrieval_harness", module)
    spec.loader.exec_module(module)
    return module


class _Result:
    def __init__(self, hit: Hit) -> None:
        self.path, self.start_line, self.end_line = hit.path, hit.start_line, hit.end_line
        self.symbol, self.kind, self.score = "s", "function", 0.5


class _FakeIndex:
    """Answers question ``q<i>`` with the fixture's ranking i in every mode but "keyword",
    which finds nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str]] = []

    def search(self, query: str, k: int = 10, mode: str = "hybrid") -> list[_Result]:
        self.calls.append((query, k, mode))
        if mode == "keyword":
            return []
        return [_Result(hit) for hit in RANKED[int(query[1:])]]


def _questions() -> list[dict[str, Any]]:
    return [
        {
            "id": f"t-{number}",
            "corpus": "t",
            "category": "behaviour",
            "question": f"q{number}",
            "gold": {
                "path": gold.path,
                "symbol": gold.symbol,
                "start_line": gold.start_line,
                "end_line": gold.end_line,
            },
        }
        for number, gold in enumerate(GOLDS)
    ]


def test_harness_scores_each_mode_of_an_index(harness: ModuleType) -> None:
    index = _FakeIndex()
    runs = harness.run_questions(index, _questions(), ["hybrid", "keyword"])
    assert {call[1] for call in index.calls} == {10}
    assert len(index.calls) == 10
    hybrid = harness.score(runs["hybrid"])
    assert hybrid["mrr@10"] == pytest.approx(metrics(RANKED, GOLDS)["mrr@10"])
    assert hybrid["symbol_hit@10"] == pytest.approx(2 / 5)
    assert harness.score(runs["keyword"])["hit@10"] == 0.0
    assert [row["file_rank"] for row in runs["hybrid"]] == [1, 2, 5, None, 3]
    assert [row["symbol_rank"] for row in runs["hybrid"]] == [1, 4, None, None, None]


def test_harness_locates_definitions_with_their_decorators(harness: ModuleType) -> None:
    source = (
        "import x\n"  # 1
        "\n"
        "class A:\n"  # 3
        "    @property\n"  # 4
        "    @other(\n"  # 5
        "        1)\n"
        "    def name(self):\n"  # 7
        "        return 1\n"  # 8
        "\n"
        "if x:\n"  # 10
        "    def f():\n"  # 11
        "        pass\n"  # 12
        "\n"
        "def g(): pass\n"  # 14
        "def g(): pass\n"  # 15
    )
    assert harness.locate(source, "A.name") == [(4, 8)]
    assert harness.locate(source, "A") == [(3, 8)]
    assert harness.locate(source, "f") == [(11, 12)]  # under an if at module level
    assert harness.locate(source, "g") == [(14, 14), (15, 15)]  # ambiguous: both
    assert harness.locate(source, "A.missing") == []


def test_harness_check_finds_bad_golds_and_leaky_questions(
    harness: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(
        "class Client:\n"  # 1
        "    @property\n"  # 2
        "    def redirect_headers(self):\n"  # 3
        '        """Strip the credentials when the host of the request changes."""\n'
        "        return {}\n"  # 5
    )

    def question(number: int, category: str, text: str, symbol: str, last: int = 5) -> Any:
        gold = {"path": "pkg/mod.py", "symbol": symbol, "start_line": 2, "end_line": last}
        return {
            "id": f"q{number}",
            "corpus": "httpx",
            "category": category,
            "question": text,
            "gold": gold,
        }

    method = "Client.redirect_headers"
    questions = [
        question(1, "behaviour", "where is the authorization dropped on a new host", method),
        question(2, "identifier", method, method, last=4),
        question(3, "behaviour", "which code redirects and fixes the Headers", method),
        question(4, "behaviour", "strip the credentials when the host changes", method),
        question(5, "identifier", "Client.missing", "Client.missing"),
    ]
    problems = harness.check(questions, {"httpx": tmp_path})
    assert problems == [
        "q2: Client.redirect_headers spans 2-5, recorded 2-4",
        "q3: a behaviour question spells out Client.redirect_headers",
        "q4: copies its gold's docstring ('strip the credentials when the')",
        "q5: Client.missing defined 0 times in pkg/mod.py",
    ]
