"""Ranking: reciprocal rank fusion, code before prose, definitions first, and rules that fire
only where they should (the query's form, the class of ``Class.method``, the chunk holding a
definition's signature, stubs, generated files and demo blocks)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from anekit.search import rank as rank_module
from anekit.search.rank import (
    DEFINITION_BONUS,
    FILE_NAME_BONUS,
    FILE_WEIGHT,
    KEYWORD_WEIGHT,
    KIND_WEIGHTS,
    NAME_BONUS,
    PATH_WEIGHT,
    REEXPORT_BONUS,
    ROLE_WEIGHTS,
    RRF_K,
    SAME_FILE_DECAY,
    STEM_SHARE,
    Candidate,
    defines,
    fuse,
    head,
    identifiers,
    is_prose,
    names_definition,
    names_module,
    reexports,
    role,
)
from anekit.search.store import ChunkRecord, FileRecord, Store, StoreIdentity, store_dir


def test_identifiers_are_the_words_that_look_like_code() -> None:
    assert identifiers("getUserName reads the cookie") == [["getUserName"]]
    assert identifiers("Client.send and Session::request") == [
        ["Client", "send"],
        ["Session", "request"],
    ]
    assert identifiers("parse_duration") == [["parse_duration"]]
    assert identifiers("retries") == [["retries"]]  # a one-word query may name anything
    # Acronyms are prose words, not identifiers; mixed case still is.
    assert identifiers("class owning HTTP/2 and the URL of an RGB value") == []
    assert identifiers("HTTPClient or IOError made") == [["HTTPClient"], ["IOError"]]
    assert identifiers("MAX_SIZE") == [["MAX_SIZE"]]
    assert identifiers("attrs.evolve(inst, **changes)") == [["attrs", "evolve"]]
    assert identifiers("cache per host, e.g. for redirects") == []  # not a dotted name


def test_plain_english_names_no_protocol_nor_constant() -> None:
    """In a question a dunder names a protocol (every class may define ``__repr__``) and a
    constant's capitals name a value; a type or function name, a qualified name or one
    written as code still names a definition, and so does a search phrase."""
    assert is_prose("where does getUserName read the cookie")
    assert is_prose("Splitting streamed text into lines when a carriage return ends one")
    assert not is_prose("encode_host for IPv6 and internationalized domain names")
    assert not is_prose("is_prose")  # opens with "is", but it is an identifier
    assert not is_prose("does_not_exist")
    for question in [
        "how is a frozen class's __setattr__ blocked",
        "where is the __repr__ method generated",
        "how are HTTP_PROXY and NO_PROXY read",
        "how are strings such as 'yes' or 'off' turned into booleans",  # quoted words
    ]:
        assert identifiers(question) == [], question
    assert identifiers("where does getUserName read the cookie") == [["getUserName"]]
    assert identifiers("how is BaseModel defined and instantiated") == [["BaseModel"]]
    assert identifiers("what does Response.raise_for_status do for 4xx codes") == [
        ["Response", "raise_for_status"]
    ]
    assert identifiers("how is a frozen class's `__setattr__` blocked") == [["__setattr__"]]
    assert identifiers("where is 'DEFAULT_TIMEOUT' set") == [["DEFAULT_TIMEOUT"]]
    assert identifiers("__repr__ of a frozen class") == [["__repr__"]]
    assert identifiers("NO_PROXY") == [["NO_PROXY"]]


def test_a_symbol_path_names_a_definition_by_its_tail() -> None:
    assert names_definition("Client > send", ["Client", "send"])
    assert names_definition("Client > send", ["send"])
    assert not names_definition("Client > send", ["Server", "send"])
    assert not names_definition("send", ["Client", "send"])
    assert names_definition("impl Cache for LruCache > get", ["get"])
    assert names_definition("impl Cache for LruCache<K, V> > get", ["LruCache", "get"])
    assert names_definition("text > Tokenizer::split", ["Tokenizer", "split"])
    assert names_definition("Session > Request", ["session", "request"])  # any case


def test_definitions_are_found_in_text_across_languages() -> None:
    assert defines("def a():\n    pass\n\ndef logout(s):\n    pass", ["logout"])
    assert defines("func (s *Server) ServeHTTP(w http.ResponseWriter) {", ["ServeHTTP"])
    assert defines("    public static void main(String[] args) {", ["main"])
    assert defines("class Session:\n    def request(self):", ["Session", "request"])
    assert not defines("    def request(self):", ["Client", "request"])  # no Client here
    assert not defines("    return main(args)", ["main"])  # a call, not a definition
    assert not defines("user = getUserName(session)", ["getUserName"])
    # a C++ constructor, its initializers on the next line; a delegating call is not one
    ctor = "  Set(const Set& that)\n      : Set(that, that.alloc()) {}\n"
    assert defines(ctor, ["Set"])
    assert not defines("  Set x = Set(that);\n  x.Set(a) ? b : c;\n  Set(a)::run();", ["Set"])
    assert not defines("  x = y\n      : Set(that, a) {}\n", ["Set"])
    assert defines("  send(request: Request): Promise<Response> {", ["send"])  # TypeScript
    assert not defines("    send(x)\n    def close(self):\n", ["send"])  # a call, then a def
    # a doctest prompt is not a type: ">>> print(x)" calls print
    assert not defines('    """\n    >>> print(capture.get())\n    """', ["print"])


def test_a_modules_assignment_defines_its_name() -> None:
    assert defines("DEFAULT_TIMEOUT = Timeout(5.0)\nDEFAULT_LIMITS = Limits()", ["DEFAULT_LIMITS"])
    assert defines("MAX_SIZE: Final[int] = 10", ["MAX_SIZE"])
    assert not defines("    timeout: Timeout = DEFAULT_TIMEOUT,", ["DEFAULT_TIMEOUT"])  # a use
    assert not defines("    timeout = 5", ["timeout"])  # a local variable, indented
    assert not defines("DEFAULT_TIMEOUT == other", ["DEFAULT_TIMEOUT"])


def test_fusion_adds_reciprocal_ranks_and_weighs_kinds() -> None:
    candidates = {
        1: Candidate(1, "", "docs"),
        2: Candidate(2, "", "code"),
        3: Candidate(3, "", "code"),
    }
    # 1 is first in both lists, but it is a changelog: the code it repeats wins.
    ranked = fuse("how are retries counted", [1, 2, 3], [1, 3, 2], candidates, 3)
    scores = dict(ranked)
    # the vector list counts fully, the keyword list by KEYWORD_WEIGHT
    assert scores[2] == 1 / (RRF_K + 2) + KEYWORD_WEIGHT / (RRF_K + 3)
    assert scores[3] == 1 / (RRF_K + 3) + KEYWORD_WEIGHT / (RRF_K + 2)
    assert 0 < KEYWORD_WEIGHT < 1 and scores[2] > scores[3]
    assert abs(scores[1] - KIND_WEIGHTS["docs"] * (1 + KEYWORD_WEIGHT) / (RRF_K + 1)) < 1e-12
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


def test_a_name_in_a_question_lifts_no_definition() -> None:
    """Every ``__setattr__`` (a test's too) went above the answer for a question that only
    mentions one; written as code, the name is asked for."""
    candidates = {
        1: Candidate(1, "_frozen_setattrs", "code", "def _frozen_setattrs(self, name, value):"),
        2: Candidate(2, "Attribute > __setattr__", "code", "    def __setattr__(self, n, v):"),
        3: Candidate(3, "TestSetAttr > B > __setattr__", "tests", "  def __setattr__(s, n, v):"),
    }
    question = "how is a frozen class's __setattr__ blocked"
    ranked = fuse(question, [1, 2, 3], [1, 3, 2], candidates, 3)
    assert [chunk_id for chunk_id, _ in ranked] == [1, 2, 3]
    assert ranked[0][1] < DEFINITION_BONUS  # nothing got a bonus
    formatted = fuse(question.replace("__setattr__", "`__setattr__`"), [1, 2, 3], [], candidates, 3)
    assert [chunk_id for chunk_id, _ in formatted] == [2, 3, 1]


def test_class_method_resolves_through_the_class_or_module() -> None:
    """``Console.print``: the console's method first, then other ``print`` definitions; a
    docstring's ``>>> print(...)`` beside the word Console defines nothing."""
    candidates = {
        1: Candidate(1, "print", "code", "def print(*args):", "rich/jupyter.py"),
        2: Candidate(2, "Console > capture", "code", "  >>> print(Console().x)", "rich/c.py"),
        3: Candidate(3, "Console > print", "code", "    def print(self, *objects):", "rich/c.py"),
        4: Candidate(4, "", "code", "def print(*args):", "rich/__init__.py"),
    }
    ranked = fuse("Console.print", [1, 2, 4, 3], [1, 2, 4], candidates, 4)
    assert [chunk_id for chunk_id, _ in ranked] == [3, 1, 4, 2]
    scores = dict(ranked)
    assert scores[3] > DEFINITION_BONUS > scores[1] > NAME_BONUS > scores[2]
    # a module qualifies a name at its top level as a class does a method
    ranked = fuse("jupyter.print", [4, 2, 1, 3], [4, 2], candidates, 4)
    assert ranked[0][0] == 1 and ranked[1][1] < DEFINITION_BONUS
    # with or without the leading "_" of a private module, not in another case
    models = Candidate(5, "Response", "code", "class Response:", "httpx/_models.py")
    other = Candidate(6, "Response", "code", "class Response:", "httpx/_api.py")
    for query in ("models.Response", "_models.Response", "httpx._models.Response"):
        assert fuse(query, [6, 5], [6], {5: models, 6: other}, 2)[0][0] == 5, query
    assert fuse("Models.Response", [6, 5], [6], {5: models, 6: other}, 2)[0][0] == 6
    # a method's class is the last qualifier, not a module of the same name
    mine = Candidate(9, "Client > send", "code", "    def send(self):", "pkg/other.py")
    async_ = Candidate(10, "AsyncClient > send", "code", "    def send(self):", "pkg/client.py")
    ranked = fuse("client.send", [10, 9], [10], {9: mine, 10: async_}, 2)
    assert ranked[0][0] == 9 and ranked[1][1] < DEFINITION_BONUS
    # the outer qualifiers are packages or namespaces further out, in order
    split = Candidate(7, "", "code", "StrSplit(Text text) {", "absl/strings/str_split.h")
    copy = Candidate(8, "", "code", "StrSplit(Text text) {", "third_party/str_split.h")
    assert fuse("absl::StrSplit", [8, 7], [8], {7: split, 8: copy}, 2)[0][0] == 7
    assert fuse("strings::absl::StrSplit", [8, 7], [8], {7: split, 8: copy}, 2)[0][0] == 8
    # the indexed folder's name is the outermost scope: absl/ indexed as the root
    inner = Candidate(7, "", "code", "StrSplit(Text text) {", "strings/str_split.h")
    method = Candidate(8, "Splitter > StrSplit", "code", "  StrSplit(Text t) {", "strings/s.h")
    pair = {7: inner, 8: method}
    assert fuse("absl::StrSplit", [8, 7], [8], pair, 2, root="absl")[0][0] == 7
    assert fuse("absl::StrSplit", [8, 7], [8], pair, 2, root="abseil")[0][0] == 8


def test_a_member_assignment_defines_a_qualified_name() -> None:
    """``res.sendFile = function ...`` is res's sendFile; ``function sendfile`` elsewhere
    is another name (case matters), not a definition of it."""
    member = "res.sendFile = function sendFile(path, options) {\n  send(this, path);\n"
    candidates = {
        1: Candidate(1, "sendfile", "code", "function sendfile(res, file) {", "lib/r.js"),
        2: Candidate(2, "", "code", member, "lib/response.js", 371),
        3: Candidate(3, "", "code", "Res.prototype.sendFile = sendFile;", "lib/res.js"),
        4: Candidate(4, "", "code", "  return res.sendFile(path);", "lib/app.js"),
    }
    ranked = fuse("static file serving with res.sendFile", [1, 4, 3, 2], [1, 4], candidates, 4)
    assert ranked[0][0] == 2 and ranked[0][1] > DEFINITION_BONUS
    assert dict(ranked)[1] < NAME_BONUS and dict(ranked)[4] < NAME_BONUS
    assert fuse("Res.sendFile", [1, 4, 3, 2], [], candidates, 1)[0][0] == 3


def test_a_definition_behind_a_sigil_is_another_spelling_of_the_name() -> None:
    """zod's core ``$ZodType`` beside the public ``ZodType``, its builder ``_record`` behind
    ``z.record``: a definition of the name behind ``$`` or ``_`` (by its symbol or its
    text) earns another spelling's bonus, below the name's own definition; a use of the
    prefixed name earns nothing, and a query that writes the sigil names that one."""
    candidates = {
        1: Candidate(1, "ZodType", "code", "export class ZodType {", "classic/schemas.ts"),
        2: Candidate(2, "$ZodType", "code", "export interface $ZodType {", "core/schemas.ts"),
        3: Candidate(3, "", "code", "export function _record(key, value) {", "core/api.ts"),
        4: Candidate(4, "", "code", "  return $ZodType.init(inst);", "core/util.ts"),
    }
    scores = dict(fuse("ZodType", [4, 3, 2, 1], [4], candidates, 4))
    assert scores[1] > DEFINITION_BONUS > scores[2] > NAME_BONUS > scores[4]
    assert rank_module.resolves(candidates[3], ["z", "record"]) == NAME_BONUS
    assert rank_module.resolves(candidates[4], ["ZodType"]) == 0
    assert rank_module.resolves(candidates[2], ["$ZodType"]) >= DEFINITION_BONUS
    assert rank_module.resolves(candidates[1], ["$ZodType"]) == 0


def test_a_long_definitions_first_chunk_takes_the_hit() -> None:
    """An identifier lands on the chunk holding the ``def`` line, not on a later chunk of the
    same definition that the searches ranked higher, even when they did not propose it."""
    tail = Candidate(2, "Client > send", "code", "        return response\n", "c.py", 30)
    first = Candidate(1, "Client > send", "code", "    def send(self, request):\n", "c.py", 10)
    between = Candidate(3, "Client > send", "code", "        auth = self._auth\n", "c.py", 20)
    runs = {2: [tail, between, first], 3: [between, first]}

    def run(of: Candidate) -> list[Candidate]:
        return runs.get(of.id, [of])

    ranked = fuse("Client.send", [2], [2], {2: tail}, 2, run)
    assert [chunk_id for chunk_id, _ in ranked] == [1, 2]
    assert ranked[0][1] > DEFINITION_BONUS > ranked[1][1]
    both = fuse("Client.send", [2, 9, 1], [2, 9], {1: first, 2: tail}, 3, run)
    assert both[0][0] == 1
    # a signature the pattern does not know: the run's first chunk of that symbol
    cpp = Candidate(5, "Tokenizer::split", "code", "void Tokenizer::split(", "t.cpp", 1)
    later = Candidate(6, "Tokenizer::split", "code", "  return out;\n}", "t.cpp", 9)
    assert head(later, ["split"], [later, cpp]) == cpp
    assert head(cpp, ["split"], [cpp]) == cpp


def test_stubs_generated_files_and_demo_blocks_rank_below_the_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = Candidate(1, "Converter", "code", "class Converter:", "src/attr/_make.py")
    stub = Candidate(2, "Converter", "code", "class Converter:", "src/attr/__init__.pyi")
    dts = Candidate(3, "", "code", "export declare class Converter {}", "types/index.d.ts")
    generated = Candidate(4, "", "code", "TABLE = [", "u.py", head="# Auto generated by x.py\n")
    protobuf = Candidate(5, "", "code", "Converter = _reflection", "api/convert_pb2.py")
    demo = Candidate(6, "__main__ > show", "code", "def show():", "src/attr/_make.py")
    assert [role(c) for c in (source, stub, dts, generated, protobuf, demo)] == [
        None,
        "stub",
        "stub",
        "generated",
        "generated",
        "demo",
    ]
    # a TypeScript folder of type declarations: the interfaces, not the code
    declared = Candidate(10, "Store", "code", "export interface Store {", "src/types/store.ts")
    made = Candidate(
        11, "createStore", "code", "export function createStore(", "src/createStore.ts"
    )
    assert role(declared) == "stub" and role(made) is None
    assert role(Candidate(12, "", "code", "x", "src/types.ts")) is None  # a module of its own
    pair = {10: declared, 11: made}
    assert fuse("store creation and dispatch", [10, 11], [10, 11], pair, 2)[0][0] == 11
    assert fuse("store type definitions", [10, 11], [10, 11], pair, 2)[0][0] == 10
    go = "// Code generated by protoc-gen-go. DO NOT EDIT.\n"
    assert role(Candidate(7, "", "code", "x = 1", "a.go", head=go)) == "generated"
    late = "\n" * 6 + "# generated by\n"  # not in the file's first lines
    assert role(Candidate(8, "", "code", "x = 1", "a.py", head=late)) is None
    muted = "// <auto-generated /> // keep as is: shared with other repos\n"  # analyzers off
    assert role(Candidate(9, "", "code", "x = 1", "a.cs", head=muted)) is None
    others = [2, 3, 4, 5, 6, 1]
    candidates = {c.id: c for c in (source, stub, dts, generated, protobuf, demo)}
    monkeypatch.setattr(rank_module, "FILE_WEIGHT", 0.0)  # the role weights alone
    monkeypatch.setattr(rank_module, "PATH_WEIGHT", 0.0)
    ranked = fuse("which class wraps a converter", others, others, candidates, 6)
    assert ranked[0][0] == 1
    assert dict(ranked)[2] == ROLE_WEIGHTS["stub"] * (1 + KEYWORD_WEIGHT) / (RRF_K + 1)
    # asked for, they keep their weight
    assert fuse("the type stub of the converter", [2, 1], [2, 1], candidates, 2)[0][0] == 2
    assert fuse("an example of converters", [6, 1], [6, 1], candidates, 2)[0][0] == 6
    # a named stub is still a definition: below the source's, above everything else
    ranked = fuse("Converter", [2, 9, 1], [2, 9], {**candidates, 9: Candidate(9, "", "code")}, 3)
    assert [chunk_id for chunk_id, _ in ranked] == [1, 2, 9]


def test_example_programs_and_benchmarks_rank_below_the_source() -> None:
    """By folder (examples/, samples/, demo/; benchmarks/, bench/) and benchmark file names
    (hash_benchmark.cc, parse.bench.ts, JsonBenchmark.java); not a name that only begins
    so (benchmarking.py, exampleparser.py)."""
    roles = {
        "example/help.zig": "demo",
        "src/examples/a.py": "demo",
        "samples/App.cs": "demo",
        "absl/hash/hash_benchmark.cc": "benchmark",
        "bench/parse.py": "benchmark",
        "src/x.bench.ts": "benchmark",
        "src/JsonBenchmark.java": "benchmark",
        "Benchmarks/Run.cs": "benchmark",
        "src/benchmarking.py": None,
        "src/exampleparser.py": None,
        "src/sample.py": None,
    }
    assert {path: role(Candidate(1, "", "code", "x", path)) for path in roles} == roles
    source = Candidate(1, "", "code", "def parse(text):", "clap/core.zig")
    example = Candidate(2, "main", "code", "pub fn main() !void {", "example/simple.zig")
    ranked = fuse("how arguments are parsed", [2, 1], [2, 1], {1: source, 2: example}, 2)
    assert ranked[0][0] == 1
    # asked for, they keep their weight
    assert fuse("an example of parsing", [2, 1], [2, 1], {1: source, 2: example}, 2)[0][0] == 2


def test_a_test_named_by_the_query_ranks_below_the_source_definition() -> None:
    candidates = {
        1: Candidate(1, "TestClient > send", "tests", "    def send(self):", "tests/t.py"),
        2: Candidate(2, "Client > send", "code", "    def send(self):", "c.py"),
        3: Candidate(3, "", "code", "client.send(request)", "d.py"),
    }
    ranked = fuse("send", [1, 3, 2], [1, 3, 2], candidates, 3)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1, 3]


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


def test_one_file_does_not_fill_the_first_hits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_module, "FILE_WEIGHT", 0.0)  # the decay alone
    candidates = {
        1: Candidate(1, "", "code", path="a.py"),
        2: Candidate(2, "", "code", path="a.py"),
        3: Candidate(3, "", "code", path="b.py"),
    }
    ranked = dict(fuse("how", [1, 2, 3], [], candidates, 3))
    assert ranked[2] == SAME_FILE_DECAY / (RRF_K + 2)  # a.py's second hit
    assert ranked[3] == 1 / (RRF_K + 3)
    assert ranked[3] > ranked[2]


def test_the_store_gives_a_definitions_chunks_back_to_its_first(tmp_path: Path) -> None:
    """What Index.search hands to fuse: a long definition's run of chunks (nested ones
    inside it, not the definition before it), and each file's first chunk."""
    rows = [
        (1, "import os\n", ""),
        (2, "    def send(self):  # another Client's, in a branch\n", "Client > send"),
        (3, "def before():\n", "before"),
        (10, "class Client:\n", "Client"),
        (12, "    def send(self):\n", "Client > send"),
        (20, "        def inner():\n", "Client > send > inner"),
        (25, "        return r\n", "Client > send"),
    ]
    records = [
        ChunkRecord(line, line, text, symbol, "code", hashlib.sha256(text.encode()).hexdigest())
        for line, text, symbol in rows
    ]
    identity = StoreIdentity(model="m", variant="fp32", chunker="x", max_length=8, dimension=2)
    with Store(store_dir(tmp_path)) as store:
        store.ensure_identity(identity)
        with store.write():
            store.put_file(
                FileRecord("c.py", 1, 1, "0" * 64, "python"),
                records,
                np.ones((len(records), 2), np.float32),
            )
        run = store.definition_run("c.py", 25, "Client > send")
        assert [chunk.start_line for chunk in run] == [25, 20, 12]
        assert [chunk.start_line for chunk in store.definition_run("c.py", 10, "Client")] == [10]
        assert store.definition_run("gone.py", 25, "Client > send") == []
        assert store.first_chunks(["c.py", "gone.py"]) == {"c.py": "import os\n"}


def test_a_name_spelled_the_same_and_in_the_file_named_after_it_goes_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Request``: the class in Request.php, then the one in an extension's file
    (Request+Body.swift) or another folder's, then the helper ``request``, spelled
    otherwise; a query of another spelling than every definition ranks them as fused."""
    candidates = {
        1: Candidate(1, "request", "code", "function request($key = null)", "src/helpers.php"),
        2: Candidate(2, "Request", "code", "extension Request {", "Sources/Request+Body.swift"),
        3: Candidate(3, "Request", "code", "final class Request {", "Sources/Request.swift"),
        4: Candidate(4, "Exception > request", "code", "  public function request()", "E.php"),
    }
    monkeypatch.setattr(rank_module, "FILE_WEIGHT", 0.0)  # the bonuses alone
    ranked = fuse("Request", [1, 4, 2, 3], [1, 4, 2], candidates, 4)
    assert [chunk_id for chunk_id, _ in ranked] == [3, 2, 1, 4]
    scores = dict(ranked)
    assert scores[3] > DEFINITION_BONUS + FILE_NAME_BONUS > scores[2] > DEFINITION_BONUS
    assert DEFINITION_BONUS > scores[1] > NAME_BONUS
    # file names match in any case and without underscores: str_split.h for StrSplit
    split = Candidate(5, "StrSplit", "code", "StrSplit(Text text) {", "absl/str_split.h")
    other = Candidate(6, "StrSplit", "code", "StrSplit(Text text) {", "absl/strings.h")
    assert fuse("StrSplit", [6, 5], [6], {5: split, 6: other}, 2)[0][0] == 5
    # nothing spelled the same: each definition keeps its fused order
    assert [i for i, _ in fuse("REQUEST", [1, 4, 2], [1], candidates, 3)] == [1, 4, 2]


def test_a_path_that_names_the_words_and_a_file_with_more_evidence_go_up() -> None:
    """Path evidence for a question in words (a folder or file name naming its words,
    plurals and prefixes too), none for a query naming an identifier; each file's best hit
    gains by the file's summed score (a class cut into many chunks)."""
    store = Candidate(1, "Store > get", "code", "", "src/Illuminate/Session/Store.php")
    other = Candidate(2, "Cache > get", "code", "", "src/Illuminate/Cache/Repository.php")
    candidates = {1: store, 2: other}
    assert rank_module._path_parts(store.path) == {"session", "store"}
    ranked = fuse("session store behavior", [2, 1], [2, 1], candidates, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [1, 2]
    best = (1 + KEYWORD_WEIGHT) / (RRF_K + 1)  # chunk 2's fused score, the best
    # 2 of its 3 words in the path, and the type's name (Store) whole: one more
    with_path = (1 + KEYWORD_WEIGHT) / (RRF_K + 2) + PATH_WEIGHT * best * (2 + STEM_SHARE) / 3
    # each file has one hit: each gains FILE_WEIGHT times its own score
    assert dict(ranked) == pytest.approx(
        {1: (1 + FILE_WEIGHT) * with_path, 2: (1 + FILE_WEIGHT) * best}
    )
    assert rank_module._names("sessions", "session") and not rank_module._names("se", "session")
    # an identifier query: no path evidence, the order stays the fused one
    assert [i for i, _ in fuse("getStore", [2, 1], [2, 1], candidates, 2)] == [2, 1]
    # three chunks of one file outweigh one better chunk of another
    parts = {
        3: Candidate(3, "Factory > make", "code", "", "src/View/Factory.php"),
        4: Candidate(4, "Factory > render", "code", "", "src/View/Factory.php"),
        5: Candidate(5, "Factory > share", "code", "", "src/View/Factory.php"),
        6: Candidate(6, "Engine", "code", "", "src/Engines/Engine.php"),
    }
    ranked = fuse("how are templates compiled", [6, 3, 4, 5], [6, 3, 4, 5], parts, 4)
    assert [i for i, _ in ranked] == [3, 6, 4, 5]


def test_a_word_names_a_path_part_by_prefix_or_by_its_inflected_root() -> None:
    """``routing`` names Router.php, ``preprocessed`` preprocessing.bash, ``formats``
    formatter.bash, ``utility`` utils.go (their roots without -ing, -ed, -es, -s); an
    agent's -er or -or and -ion are not stripped (``validate`` is not validators.py), nor a
    short root (``used``) or a double s (``access`` is not ``acc``)."""
    named = rank_module._names
    for word, part in [
        ("routing", "router"),
        ("preprocessed", "preprocessing"),
        ("formats", "formatter"),
        ("utility", "utils"),
        ("stores", "storage"),
        ("sessions", "session"),
    ]:
        assert named(word, part), (word, part)
    for word, part in [
        ("validate", "validators"),
        ("connection", "connectors"),
        ("used", "user"),
        ("access", "accident"),
        ("se", "session"),
    ]:
        assert not named(word, part), (word, part)
    assert rank_module._root("processes") == "process" and rank_module._root("class") == "class"
    router = Candidate(1, "Router > dispatch", "code", "", "src/Http/Router.php")
    stub = Candidate(2, "", "code", "", "src/Illuminate/Foundation/Console/ServeCommand.php")
    ranked = fuse("routing HTTP requests to controllers", [2, 1], [2, 1], {1: router, 2: stub}, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [1, 2]


def test_a_file_named_whole_by_the_words_goes_first() -> None:
    """A file name (a type's: Response.swift, UpsertStatement.kt; a module's: streams.py)
    whose every part the query's words name gains STEM_SHARE more words: it goes above a
    file whose longer name only begins with one of them; a file named for its folder
    (mod.rs, index.ts, __init__.py, init.lua) is not named by its name."""
    words = rank_module._path_words("Response type and HTTP response construction")
    assert rank_module._stem_named("Sources/Vapor/Response/Response.swift", words)
    assert not rank_module._stem_named("Sources/Vapor/Response/ResponseCodable.swift", words)
    assert rank_module._stem_named("src/types/response.ts", words)
    upsert = rank_module._path_words("upsert and batch upsert statement for insert-or-update")
    assert rank_module._stem_named("statements/UpsertStatement.kt", upsert)
    assert rank_module._stem_named("statements/BatchUpsertStatement.kt", upsert)
    assert not rank_module._stem_named("statements/BatchReplaceStatement.kt", upsert)
    modules = rank_module._path_words("how middleware modules are indexed and initialised")
    for package in ("src/mod.rs", "src/index.ts", "pkg/__init__.py", "lua/lazy/init.lua"):
        assert not rank_module._stem_named(package, modules), package
    assert rank_module._stem_named("src/workers/init.ts", modules)  # a name of its own
    candidates = {
        1: Candidate(1, "ResponseEncodable", "code", "", "Sources/Vapor/ResponseCodable.swift"),
        2: Candidate(2, "Response", "code", "", "Sources/Vapor/Response/Response.swift"),
    }
    # the codable file ranked first by both halves; the type's file goes above it
    ranked = fuse("Response type and HTTP response construction", [1, 2], [1, 2], candidates, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1]
    lower = {
        1: Candidate(1, "StreamWriter", "code", "", "aiohttp/http_writer.py"),
        2: Candidate(2, "StreamReader", "code", "", "aiohttp/streams.py"),
    }
    ranked = fuse("how flow control works in streaming", [1, 2], [1, 2], lower, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1]


def test_import_blocks_and_string_tables_rank_as_listings() -> None:
    """A chunk whose lines are mostly imports (a file's header) or string literals (a help
    text) is a listing, weighted by its role unless the query asks for it; a short one and
    ordinary code are not."""
    imports = "\n".join(
        ["import qualified XMonad.Core as XMonad", "    (workspaces,manageHook,keys)"]
        + [f"import XMonad.Module{n}" for n in range(8)]
    )
    assert rank_module._text_role(imports) == "imports"
    python = "\n".join(["from os import path", "import sys"] * 4 + ["x = 1"])
    assert rank_module._text_role(python) == "imports"
    help_text = "\n".join(
        ['help = unlines ["The default bindings:",'] + ['    "mod-q  Restart",'] * 9
    )
    assert rank_module._text_role(help_text) == "strings"
    assert rank_module._text_role("import a\nimport b") is None  # too short to tell
    code = "\n".join(["def f(a,", "      b,", "      c):", "    import os"] + ["    return a"] * 6)
    assert rank_module._text_role(code) is None
    header = Candidate(1, "", "code", imports, "src/XMonad/Config.hs")
    loop = Candidate(2, "mainLoop", "code", "mainLoop = forever handle", "src/XMonad/Main.hs")
    assert role(header) == "imports" and role(loop) is None
    ranked = fuse("how events are handled in the loop", [1, 2], [1, 2], {1: header, 2: loop}, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1]
    asked = fuse("which modules does the config import", [1, 2], [1, 2], {1: header, 2: loop}, 2)
    assert [chunk_id for chunk_id, _ in asked] == [1, 2]


def test_a_table_of_entries_ranks_as_a_listing() -> None:
    """A chunk whose code lines are mostly bracketed entries (a key-binding table, a C
    dispatch table), comment lines aside, is a table, weighted by its role unless the
    query asks for bindings or a table; a few entries, or a call per line, are not."""
    bindings = "\n".join(
        ["    -- move focus up or down the window stack"]
        + [f"    , ((modMask, xK_{key}), windows W.focus{key}) -- %! Move focus" for key in "jkmnp"]
        + ["", "    -- modifying the window order"]
    )
    assert rank_module._text_role(bindings) == "table"
    dispatch = "\n".join(f'  {{ "CMD{n}", on_cmd{n}, 0 }},' for n in range(6))
    assert rank_module._text_role(dispatch) == "table"
    assert rank_module._text_role("\n".join(dispatch.splitlines()[:4])) is None  # too few
    calls = "\n".join(f"    register(app, handler{n}, {n})" for n in range(8))
    assert rank_module._text_role(calls) is None
    table = Candidate(1, "keys", "code", bindings, "src/XMonad/Config.hs")
    focus = Candidate(2, "focus", "code", "focus w = withWindowSet", "src/XMonad/Operations.hs")
    assert role(table) == "table"
    pair = {1: table, 2: focus}
    ranked = fuse("how window focus moves between windows", [1, 2], [1, 2], pair, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1]
    asked = fuse("default key bindings for window focus", [1, 2], [1, 2], pair, 2)
    assert [chunk_id for chunk_id, _ in asked] == [1, 2]


def test_a_generators_templates_rank_below_the_source() -> None:
    """Rails' .tt, Laravel's .stub, .tmpl/.template and a ``name.ext.in`` file are a
    generator's templates, below the code that runs unless the query asks for templates;
    a bare ``.in`` (requirements.in, Makefile.in) is not."""
    roles = {
        "railties/lib/rails/generators/rails/app/templates/config/application.rb.tt": "template",
        "src/Illuminate/Routing/Console/stubs/controller.plain.stub": "template",
        "src/tools/langref.html.in": "template",
        "config.h.in": "template",
        "deploy/values.tmpl": "template",
        "requirements.in": None,
        "Makefile.in": None,
        "src/Illuminate/Routing/Router.php": None,
    }
    assert {path: role(Candidate(1, "", "code", "x", path)) for path in roles} == roles
    stub = Candidate(1, "", "code", "class {{ class }} extends Controller", "c.stub")
    router = Candidate(2, "Router > dispatch", "code", "public function dispatch(", "Router.php")
    pair = {1: stub, 2: router}
    ranked = fuse("routing HTTP requests to controllers", [1, 2], [1, 2], pair, 2)
    assert [chunk_id for chunk_id, _ in ranked] == [2, 1]
    asked = fuse("the controller stub template", [1, 2], [1, 2], pair, 2)
    assert [chunk_id for chunk_id, _ in asked] == [1, 2]


def test_a_long_question_naming_a_long_type_name_whole_weighs_it_as_a_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A longer question that names every word of a file's type name of SPECIFIC_STEM_PARTS
    words or more (JsonSerializerInternalWriter.cs) gains PATH_WEIGHT for it, not
    QUESTION_PATH_WEIGHT; a shorter name named whole (JsonSerializer.cs) does not."""
    writer = "Src/Newtonsoft.Json/Serialization/JsonSerializerInternalWriter.cs"
    serializer = "Src/Newtonsoft.Json/JsonSerializer.cs"
    candidates = {
        1: Candidate(1, "JsonSerializer", "code", "", serializer),
        2: Candidate(2, "JsonSerializerInternalWriter", "code", "", writer),
    }
    question = "how the internal serializer writer maps .NET objects to JSON tokens"
    words = rank_module._path_words(question)
    assert len(words) > rank_module.TOPIC_WORDS
    assert len(rank_module._stem_parts(writer)) >= rank_module.SPECIFIC_STEM_PARTS
    assert len(rank_module._stem_parts(serializer)) < rank_module.SPECIFIC_STEM_PARTS
    monkeypatch.setattr(rank_module, "FILE_WEIGHT", 0.0)  # the path evidence alone
    scores = dict(fuse(question, [1, 2], [1, 2], candidates, 2))
    best = (1 + KEYWORD_WEIGHT) / (RRF_K + 1)
    second = (1 + KEYWORD_WEIGHT) / (RRF_K + 2)
    # json, serializer (and the folder's serialization), internal, writer; the name whole
    gain = PATH_WEIGHT * best * (4 + STEM_SHARE) / len(words)
    assert scores[2] == pytest.approx(second + gain)
    short = rank_module.QUESTION_PATH_WEIGHT * best * (2 + STEM_SHARE) / len(words)
    assert scores[1] == pytest.approx(best + short)
    assert scores[2] > scores[1]


def test_a_long_question_weighs_its_path_words_less_than_a_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A topic (at most TOPIC_WORDS words worth matching) gains PATH_WEIGHT by its share of
    words in the path, a longer question QUESTION_PATH_WEIGHT."""
    store = Candidate(1, "Store > get", "code", "", "src/Illuminate/Session/Store.php")
    other = Candidate(2, "Cache > get", "code", "", "src/Illuminate/Cache/Repository.php")
    candidates = {1: store, 2: other}
    question = "session store keeps flashed values around exactly one more request cycle later"
    words = rank_module._path_words(question)
    assert len(words) > rank_module.TOPIC_WORDS
    assert rank_module.QUESTION_PATH_WEIGHT < PATH_WEIGHT
    monkeypatch.setattr(rank_module, "FILE_WEIGHT", 0.0)  # the path evidence alone
    scores = dict(fuse(question, [2, 1], [2, 1], candidates, 2))
    best = (1 + KEYWORD_WEIGHT) / (RRF_K + 1)
    # session, store, and Store.php named whole
    gain = rank_module.QUESTION_PATH_WEIGHT * best * (2 + STEM_SHARE) / len(words)
    assert scores[1] == pytest.approx((1 + KEYWORD_WEIGHT) / (RRF_K + 2) + gain)
    assert scores[2] == pytest.approx(best)


def test_a_reexport_of_the_named_name_ranks_below_its_definitions() -> None:
    """Rust's pub use, TypeScript's export { } and export * as, C++'s using, a Python
    package's import: where a name is exported from (its definition may be outside the
    index); a plain use or import is not one."""
    assert reexports(
        Candidate(
            1,
            "",
            "code",
            "pub use axum_core::extract::{\n    FromRef, FromRequest,\n};",
            "src/extract/mod.rs",
        ),
        "FromRequest",
    )
    assert reexports(Candidate(1, "", "code", "pub(crate) use self::path::Path;", "a.rs"), "Path")
    assert not reexports(
        Candidate(1, "", "code", "use axum_core::extract::FromRequest;", "a.rs"), "FromRequest"
    )
    assert reexports(
        Candidate(1, "", "code", 'export { ZodError, type ZodIssue } from "./errors";', "index.ts"),
        "ZodError",
    )
    assert reexports(Candidate(1, "", "code", 'export * as z from "./external";', "index.ts"), "z")
    assert not reexports(
        Candidate(1, "", "code", 'import { ZodError } from "./errors";', "a.ts"), "ZodError"
    )
    assert reexports(Candidate(1, "", "code", "using absl::string_view;", "a.h"), "string_view")
    init = "from ._models import (\n    Request,\n    Response,\n)\n"
    assert reexports(Candidate(1, "", "code", init, "httpx/__init__.py"), "Response")
    assert not reexports(Candidate(1, "", "code", init, "httpx/_client.py"), "Response")
    assert not reexports(Candidate(1, "", "code", init, "httpx/__init__.py"), "Respons")
    candidates = {
        1: Candidate(1, "", "code", "use crate::Router;\nfn route() {}", "src/a.rs"),
        2: Candidate(2, "", "code", "pub use self::routing::Router;", "src/lib.rs"),
        3: Candidate(3, "Router", "code", "pub struct Router {}", "src/routing/mod.rs"),
    }
    ranked = fuse("Router", [1, 2], [1, 2], candidates, 3)
    assert [i for i, _ in ranked] == [2, 1]  # the definition was never proposed
    assert dict(ranked)[2] > REEXPORT_BONUS > dict(ranked)[1]
    ranked = fuse("Router", [1, 2, 3], [1, 2, 3], candidates, 3)
    assert [i for i, _ in ranked] == [3, 2, 1]


def test_a_dotted_name_of_a_module_finds_its_file() -> None:
    """``mini.comment`` names lua/mini/comment.lua: its best chunk gets the definition's
    bonus, above a same-named function elsewhere; a package's mod.rs, index and __init__
    stand for their folder, src/ names no module; a file that holds the named definition
    keeps that chunk first."""
    assert names_module("lua/mini/comment.lua", ["mini", "comment"])
    assert names_module("axum/src/extract/mod.rs", ["axum", "extract"])
    assert names_module("pydantic/fields/__init__.py", ["pydantic", "fields"])
    assert names_module("packages/zod/src/index.ts", ["Zod"]) is False  # one part: a name
    assert not names_module("lua/mini/comment.lua", ["mini", "comments"])
    candidates = {
        1: Candidate(
            1,
            "MiniBracketed.comment",
            "code",
            "MiniBracketed.comment = function()",
            "lua/mini/bracketed.lua",
        ),
        2: Candidate(2, "", "code", "local H = {}", "lua/mini/comment.lua"),
        3: Candidate(
            3,
            "MiniComment.toggle_lines",
            "code",
            "MiniComment.toggle_lines = function()",
            "lua/mini/comment.lua",
        ),
    }
    ranked = fuse("how mini.comment toggles line comments", [1, 3, 2], [1, 3], candidates, 3)
    assert next(i for i, _ in ranked) == 3  # comment.lua's best-scored chunk
    assert dict(ranked)[3] > dict(ranked)[1]
    engine = {
        1: Candidate(1, "Rails > Engine > config", "code", "def config", "lib/rails/engine.rb"),
        2: Candidate(2, "Rails > Engine", "code", "class Engine < Railtie", "lib/rails/engine.rb"),
    }
    ranked = fuse("Rails::Engine", [1, 2], [1, 2], engine, 2)
    assert [i for i, _ in ranked] == [2, 1]
    assert dict(ranked)[1] < DEFINITION_BONUS


def test_doc_comment_examples_and_trailing_block_calls_are_not_definitions() -> None:
    """A Javadoc/KDoc example line (`` *     withContext(IO) {``) is not a typed
    declaration; in Kotlin, Swift and Scala ``name(args) {`` is a call given a block, in
    TypeScript a method; Kotlin's ``fun <T> name(`` is a definition."""
    assert not defines(" *     withContext(NonCancellable) {", ["withContext"])
    assert not defines(" * val x = withContext(NonCancellable)", ["withContext"])
    assert defines("char *format_to(char *out)", ["format_to"])  # a C pointer type
    call = "    withContext(Dispatchers.IO) {\n        read()\n    }"
    assert rank_module._holds_definition(call, "withContext", "ts/api.ts")
    for path in ("src/Builders.kt", "Sources/App.swift", "core/Flow.scala"):
        assert not rank_module._holds_definition(call, "withContext", path)
    generic = "public suspend fun <T> withContext(context: CoroutineContext): T {"
    assert rank_module._holds_definition(generic, "withContext", "src/Builders.common.kt")
    assert defines("fun launch(block: suspend () -> Unit): Job", ["launch"])
    candidates = {
        1: Candidate(1, "async", "code", call, "common/src/Guidance.kt"),
        2: Candidate(2, "withContext", "code", generic, "common/src/Builders.common.kt"),
    }
    assert [i for i, _ in fuse("withContext", [1, 2], [1, 2], candidates, 2)] == [2, 1]


def test_a_superseded_version_folder_ranks_below_the_current_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """src/v3/ beside src/v4/ (and legacy/, deprecated/ folders) is weighted by
    ROLE_WEIGHTS["superseded"], unless the query names v3 or asks for legacy code."""
    monkeypatch.setattr(rank_module, "FILE_WEIGHT", 0.0)  # the weights alone
    old = Candidate(1, "", "code", "", "packages/zod/src/v3/types.ts")
    new = Candidate(2, "", "code", "", "packages/zod/src/v4/core/schemas.ts")
    lone = Candidate(3, "", "code", "", "api/v1/handlers.go")
    candidates = {1: old, 2: new, 3: lone}
    assert rank_module._superseded([c.path for c in candidates.values()], "q") == (
        "packages/zod/src/v3/",
    )
    assert rank_module._superseded(["a/legacy/b.py", "c.py"], "q") == ("a/legacy/",)
    scores = dict(fuse("issue messages", [1, 2, 3], [1, 2, 3], candidates, 3))
    weight = rank_module.ROLE_WEIGHTS["superseded"]
    assert scores[1] == pytest.approx(weight * (1 + KEYWORD_WEIGHT) / (RRF_K + 1))
    assert scores[3] == pytest.approx((1 + KEYWORD_WEIGHT) / (RRF_K + 3))  # v1 alone
    for asking in ("v3 issue messages", "legacy issue messages"):
        assert fuse(asking, [1, 2, 3], [1, 2, 3], candidates, 3)[0][0] == 1


def test_names_in_plain_english_gain_prose_bonus_best_scores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A definition named in passing in a question gains PROSE_BONUS best fused scores;
    written as code (backticks) or as the whole query, it goes above everything."""
    monkeypatch.setattr(rank_module, "FILE_WEIGHT", 0.0)
    candidates = {
        1: Candidate(1, "", "code", "def run_sync(): ...", "fastapi/concurrency.py"),
        2: Candidate(2, "FastAPI", "code", "class FastAPI(Starlette):", "fastapi/app.py"),
    }
    question = "how does FastAPI run sync route functions without blocking"
    assert rank_module.is_prose(question)
    scores = dict(fuse(question, [1, 2], [1, 2], candidates, 2))
    best = (1 + KEYWORD_WEIGHT) / (RRF_K + 1)
    gain = rank_module.PROSE_BONUS * best  # DEFINITION_BONUS, in best scores
    assert scores[2] == pytest.approx((1 + KEYWORD_WEIGHT) / (RRF_K + 2) + gain)
    assert scores[1] == pytest.approx(best)
    coded = dict(fuse(question.replace("FastAPI", "`FastAPI`"), [1, 2], [1, 2], candidates, 2))
    assert coded[2] > DEFINITION_BONUS > coded[1]
    assert dict(fuse("FastAPI", [1, 2], [1, 2], candidates, 2))[2] > DEFINITION_BONUS


def test_a_header_declaration_goes_before_the_source_definition() -> None:
    """absl::StrCat: the declaration in str_cat.h (the interface, documented there) before
    the definition in str_cat.cc, by HEADER_BONUS; one-part names too."""
    header = Candidate(
        1,
        "absl > StrCat",
        "code",
        "std::string StrCat(const AlphaNum& a);",
        "absl/strings/str_cat.h",
    )
    source = Candidate(
        2,
        "absl > StrCat",
        "code",
        "std::string StrCat(const AlphaNum& a) {\n}",
        "absl/strings/str_cat.cc",
    )
    candidates = {1: header, 2: source}
    for query in ("absl::StrCat", "StrCat"):
        scores = dict(fuse(query, [2, 1], [2, 1], candidates, 2))
        assert scores[1] > scores[2] > DEFINITION_BONUS, query
        assert scores[1] - scores[2] < rank_module.HEADER_BONUS + 0.1, query


def test_a_files_evidence_is_its_fused_scores_not_its_bonuses() -> None:
    """Whole-file evidence counts each chunk's fused score, not the definitions' bonuses:
    three overloads of StrAppend in str_cat.cc, each a definition, are three hits, not three
    bonuses; the header, with its declaration and four more hits, holds more evidence and
    its declaration goes first."""
    header = {
        1: Candidate(1, "absl > StrAppend", "code", "void StrAppend(std::string* d);", "s.h"),
        **{i: Candidate(i, "absl", "code", "// appends pieces", "s.h") for i in (2, 3, 4, 5)},
    }
    overloads = {
        i: Candidate(i, "absl > StrAppend", "code", "void StrAppend(std::string* d) {\n}", "s.cc")
        for i in (6, 7, 8)
    }
    candidates = {**header, **overloads}
    order = [6, 7, 8, 1, 2, 3, 4, 5]
    ranked = fuse("absl::StrAppend", order, order, candidates, 8)
    assert ranked[0][0] == 1


def test_a_file_named_after_the_name_stands_in_for_its_definition() -> None:
    """std::ostream: fmt's ostream.h (no definition of ostream) before os.h's class ostream
    (a same-named definition elsewhere), below a definition the qualifiers name; plurals
    name a file too (fmt::arg: args.h)."""
    named_file = Candidate(
        1, "", "code", "template <typename Char> class basic_ostreambuf;", "include/fmt/ostream.h"
    )
    elsewhere = Candidate(2, "ostream", "code", "class ostream {", "include/fmt/os.h")
    other = Candidate(3, "", "code", "void print(std::FILE* f);", "include/fmt/base.h")
    candidates = {1: named_file, 2: elsewhere, 3: other}
    ranked = fuse("std::ostream", [3, 2, 1], [3, 2, 1], candidates, 3)
    assert [chunk_id for chunk_id, _ in ranked] == [1, 2, 3]
    assert dict(ranked)[1] > rank_module.NAMED_FILE_BONUS > dict(ranked)[2] - NAME_BONUS
    qualified = Candidate(4, "std > ostream", "code", "class ostream {", "include/std/io.h")
    ranked = fuse("std::ostream", [3, 2, 1, 4], [3, 2], {**candidates, 4: qualified}, 4)
    assert ranked[0][0] == 4 and ranked[1][0] == 1
    args = Candidate(5, "", "code", "class dynamic_format_arg_store {", "include/fmt/args.h")
    assert fuse("fmt::arg", [3, 5], [3, 5], {3: other, 5: args}, 2)[0][0] == 5


def test_type_aliases_are_definitions() -> None:
    """C++'s and C#'s ``using Name = ...`` (after a template's parameters too) and C's
    ``typedef ... Name;`` define Name; ``using ns::Name;`` re-exports it."""
    assert defines("template <typename T>\nusing Hash = absl::hash_internal::Hash<T>;", ["Hash"])
    assert defines("using Hash = int;", ["Hash"])
    assert defines("typedef struct hash_state Hash;", ["Hash"])
    assert not defines("using absl::Hash;", ["Hash"])
    assert not defines("Hash h = Hash();", ["Hash"])
    assert reexports(Candidate(1, "", "code", "using absl::Hash;", "a.h"), "Hash")


def test_a_qualified_name_in_the_file_named_after_it_goes_first() -> None:
    """absl::StrSplit defined (qualified by the namespace) in str_split.h and in another
    header: the file named after the name first, as for a one-part name."""
    named = Candidate(
        1, "absl > StrSplit", "code", "Splitter StrSplit(Text t) {", "absl/str_split.h"
    )
    other = Candidate(2, "absl > StrSplit", "code", "Splitter StrSplit(Text t) {", "absl/impl.h")
    scores = dict(fuse("absl::StrSplit", [2, 1], [2, 1], {1: named, 2: other}, 2))
    assert scores[1] > scores[2] > DEFINITION_BONUS


def test_a_csharp_attribute_is_named_without_its_suffix() -> None:
    """[JsonProperty] is the class JsonPropertyAttribute in C#: a definition of the name
    with the suffix counts, in its file named so; not in other languages."""
    attribute = Candidate(
        1,
        "JsonPropertyAttribute",
        "code",
        "public sealed class JsonPropertyAttribute : Attribute",
        "Src/JsonPropertyAttribute.cs",
    )
    other = Candidate(2, "", "code", "var p = new JsonPropertyInfo();", "Src/Reader.cs")
    scores = dict(fuse("JsonProperty", [2, 1], [2, 1], {1: attribute, 2: other}, 2))
    assert scores[1] > DEFINITION_BONUS + FILE_NAME_BONUS > scores[2]
    java = Candidate(3, "JsonPropertyAttribute", "code", "class JsonPropertyAttribute {", "A.java")
    assert dict(fuse("JsonProperty", [2, 3], [2, 3], {2: other, 3: java}, 2))[3] < NAME_BONUS
