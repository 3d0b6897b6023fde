"""Code-aware keyword terms: identifier splitting, and FTS5 expressions that never break."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anekit.search.terms import (
    FTS_TOKENIZER,
    MAX_QUERY_TERMS,
    identifier_parts,
    index_terms,
    query_items,
    query_terms,
)


@pytest.mark.parametrize(
    ("identifier", "parts"),
    [
        ("getUserName", ["get", "user", "name"]),
        ("GetUserName", ["get", "user", "name"]),
        ("get_user_name", ["get", "user", "name"]),
        ("get-user-name", ["get", "user", "name"]),
        ("GET_USER_NAME", ["get", "user", "name"]),
        ("HTTPServerError", ["http", "server", "error"]),
        ("XMLHttpRequest", ["xml", "http", "request"]),
        ("IOError", ["io", "error"]),
        ("utf8Decode", ["utf", "8", "decode"]),
        ("sha256", ["sha", "256"]),
        ("__init__", ["init"]),
        ("ABC", ["abc"]),
        ("x", ["x"]),
        ("naïveBayes", ["naïve", "bayes"]),
    ],
)
def test_identifier_parts(identifier: str, parts: list[str]) -> None:
    assert identifier_parts(identifier) == parts


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("getUserName", "get user name getusername"),
        ("HTTPServerError", "http server error httpservererror"),
        ("get_user_name", "get user name getusername"),
        ("get-user-name", "get user name getusername"),
        ("plain words only", ""),
        ("", ""),
    ],
)
def test_index_terms(text: str, terms: str) -> None:
    assert index_terms(text) == terms


def test_index_terms_once_per_identifier_in_order() -> None:
    text = "x = getUserName(a)\ny = get_user_name(b)\nsetUserName(getUserName(c))"
    assert index_terms(text) == "get user name getusername set user name setusername"


def test_query_terms_shape() -> None:
    assert query_terms("getUserName find") == '("getusername" OR "get user name") OR "find"'
    assert query_terms("find find FIND") == '"find"'
    assert query_items("getUserName find") == [("get", "user", "name"), ("find",)]


def test_query_terms_caps_the_number_of_terms() -> None:
    query = " ".join(f"word{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(200))
    assert len(query_items(query)) == MAX_QUERY_TERMS


@pytest.fixture
def fts() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{FTS_TOKENIZER}')")
    yield conn
    conn.close()


def _add(conn: sqlite3.Connection, rowid: int, text: str) -> None:
    conn.execute(
        "INSERT INTO t(rowid, body) VALUES (?, ?)", (rowid, f"{text}\n{index_terms(text)}")
    )


def _match(conn: sqlite3.Connection, query: str) -> set[int]:
    expression = query_terms(query)
    if not expression:
        return set()
    return {r[0] for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,))}


FORMS = ["getUserName", "get_user_name", "get user name", "GetUserName", "get-user-name"]


@pytest.mark.parametrize("query", FORMS)
def test_every_form_meets_every_form(fts: sqlite3.Connection, query: str) -> None:
    for rowid, form in enumerate(FORMS, start=1):
        _add(fts, rowid, f"def f():\n    return {form}(x)")
    _add(fts, 99, "def g():\n    return user.get(name_of_it)")  # the words, not in order
    found = _match(fts, query)
    assert set(range(1, len(FORMS) + 1)) <= found
    if query != "get user name":  # three loose words also find the scattered ones (OR)
        assert 99 not in found


def test_unrelated_identifier_does_not_match(fts: sqlite3.Connection) -> None:
    _add(fts, 1, "setUserName(x)")
    _add(fts, 2, "target = 1")
    assert _match(fts, "getUserName") == set()


def test_diacritics_fold(fts: sqlite3.Connection) -> None:
    _add(fts, 1, "café_au_lait = 1")
    assert _match(fts, "cafe") == {1}
    assert _match(fts, "CaféAuLait") == {1}


NASTY = [
    "",
    '"',
    '""',
    "'",
    "a:b",
    "text:foo",
    "NOT",
    "AND",
    "OR",
    "NEAR",
    "NEAR(a b, 3)",
    "(",
    ")",
    "()",
    "*",
    "a*",
    "^a",
    "-a",
    "+",
    "{a b}:c",
    "a AND",
    "OR OR OR",
    'he said "hi',
    "x == y && z",
    "\x00",
    "ǅ",
    "\u0301",
    "２５６",
    "💥🔥",
    "   ",
]


@pytest.mark.parametrize("query", NASTY)
def test_query_never_breaks_fts5(fts: sqlite3.Connection, query: str) -> None:
    _add(fts, 1, "not and or near text foo a b")
    expression = query_terms(query)
    if expression:
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_keywords_are_searched_as_words(fts: sqlite3.Connection) -> None:
    _add(fts, 1, "do not touch")
    _add(fts, 2, "touch it")
    assert _match(fts, "NOT") == {1}
    assert _match(fts, "a:b") == set()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_gives_a_valid_expression(query: str) -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{FTS_TOKENIZER}')")
        conn.execute("INSERT INTO t(body) VALUES (?)", (query + "\n" + index_terms(query),))
        expression = query_terms(query)
        if expression:
            conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
    finally:
        conn.close()
