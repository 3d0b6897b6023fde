"""Ranking: reciprocal rank fusion, code before prose, definitions first."""

from __future__ import annotations

from anekit.search.rank import (
    KIND_WEIGHTS,
    RRF_K,
    SAME_FILE_DECAY,
    Candidate,
    defines,
    fuse,
    identifiers,
    names_definition,
)


def test_identifiers_are_the_words_that_look_like_code() -> None:
    assert identifiers("where does getUserName read the cookie") == [["getUserName"]]
    assert identifiers("Client.send and Session::request") == [
        ["Client", "send"],
        ["Session", "request"],
    ]
    assert identifiers("how are retries counted") == []
    assert identifiers("parse_duration") == [["parse_duration"]]
    assert identifiers("retries") == [["retries"]]  # a one-word query may name anything
    # Acronyms are prose words, not identifiers; mixed case still is.
    assert identifiers("which class owns HTTP/2 and the URL of an RGB value") == []
    assert identifiers("where is HTTPClient or IOError made") == [["HTTPClient"], ["IOError"]]
    assert identifiers("MAX_SIZE") == [["MAX_SIZE"]]


def test_a_symbol_path_names_a_definition_by_its_tail() -> None:
    assert names_definition("Client > send", ["Client", "send"])
    assert names_definition("Client > send", ["send"])
    assert not names_definition("Client > send", ["Server", "send"])
    assert not names_definition("send", ["Client", "send"])
    assert names_definition("impl Cache for LruCache > get", ["get"])
    assert names_definition("Session > Request", ["session", "request"])  # any case


def test_definitions_are_found_in_text_across_languages() -> None:
    assert defines("def a():\n    pass\n\ndef logout(s):\n    pass", ["logout"])
    assert defines("func (s *Server) ServeHTTP(w http.ResponseWriter) {", ["ServeHTTP"])
    assert defines("    public static void main(String[] args) {", ["main"])
    assert defines("class Session:\n    def request(self):", ["Session", "request"])
    assert not defines("    def request(self):", ["Client", "request"])  # no Client here
    assert not defines("    return main(args)", ["main"])  # a call, not a definition
    assert not defines("user = getUserName(session)", ["getUserName"])


def test_fusion_adds_reciprocal_ranks_and_weighs_kinds() -> None:
    candidates = {
        1: Candidate(1, "", "docs"),
        2: Candidate(2, "", "code"),
        3: Candidate(3, "", "code"),
    }
    # 1 is first in both lists, but it is a changelog: the code it repeats wins.
    ranked = fuse("how are retries counted", [1, 2, 3], [1, 3, 2], candidates, 3)
    scores = dict(ranked)
    assert scores[2] == scores[3] == 1 / (RRF_K + 2) + 1 / (RRF_K + 3)
    assert abs(scores[1] - KIND_WEIGHTS["docs"] * 2 / (RRF_K + 1)) < 1e-12
    assert [chunk_id for chunk_id, _ in ranked] == [2, 3, 1]
    asking = fuse("where are the docs about retries", [1, 2, 3], [1, 3, 2], candidates, 3)
    assert asking[0][0] == 1  # the query asks for docs: no discount


def test_a_named_definition_goes_first_whatever_its_ranks() -> None:
    candidates = {
        1: Candidate(1, "Client > close", "code"),
        2: Candidate(2, "Client > send", "code"),
    }
    ranked = fuse("Client.send", [1], [1], candidates, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [1]  # 2 was never a candidate
    ranked = fuse("Client.send", [1, 2], [1], candidates, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1]


def test_docs_that_name_a_definition_are_not_it() -> None:
    """A README example or a docstring's prose that shows ``def send(`` is not the
    definition: no bonus, so the code defining it (ranked lower) goes first."""
    candidates = {
        1: Candidate(1, "Usage", "docs", "Subclass it:\n\n    def send(self, request):\n"),
        2: Candidate(2, "Client > send", "code", "    def send(self, request):\n"),
    }
    ranked = fuse("Client.send", [1, 2], [1, 2], candidates, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1]
    assert dict(ranked)[1] < 1.0  # no bonus


def test_one_file_does_not_fill_the_first_hits() -> None:
    candidates = {
        1: Candidate(1, "", "code", path="a.py"),
        2: Candidate(2, "", "code", path="a.py"),
        3: Candidate(3, "", "code", path="b.py"),
    }
    ranked = dict(fuse("how", [1, 2, 3], [], candidates, 3))
    assert ranked[2] == SAME_FILE_DECAY / (RRF_K + 2)  # a.py's second hit
    assert ranked[3] == 1 / (RRF_K + 3)
    assert ranked[3] > ranked[2]
