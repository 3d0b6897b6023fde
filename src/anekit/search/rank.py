"""Ranking: vector and keyword candidates fused by reciprocal rank, knowing code from prose.

- **Reciprocal rank fusion** (Cormack et al. 2009; semlith's hybrid search,
  shared/docs/prior-art.md §3.6): a chunk's score is the sum over the two lists of
  ``1 / (RRF_K + rank)``, the keyword list's terms weighted by :data:`KEYWORD_WEIGHT` (on
  semble's benchmark's development repositories the vector half alone scores 0.844 and
  the keyword half 0.813; equal weights 0.853, these 0.856). Scores compare hits of one
  query only.
- **Code before prose**: a question about behaviour is answered by the code that does it,
  not by the changelog, docs and tests that repeat its words (:data:`KIND_WEIGHTS`), nor by
  the stubs, generated files, templates, listings and ``__main__`` demo blocks that repeat
  its names (:data:`ROLE_WEIGHTS`, :func:`role`), nor by a superseded copy (a ``v3/`` folder beside
  ``v4/``, ``legacy/``: :func:`_superseded`), unless the query asks for that kind or role
  (``test``, ``docs``, ``stub``, ``example``, ``legacy``, ``v3`` ...).
- **Many files**: a file's further hits are weighted down (:data:`SAME_FILE_DECAY`).
- **Path evidence**: for a query that names no identifier, a hit whose file name or folder
  names the query's words (``session store behavior``: ``Session/Store.php``; a word and a
  path part match when one begins the other, 3 letters at least: ``queue``, ``queues``,
  or their roots do, :func:`_names`: ``routing``, ``Router``)
  gains up to :data:`PATH_WEIGHT` times the best fused score, by the share of the words
  it names; a long question (more than :data:`TOPIC_WORDS` such words) describes
  behaviour rather than naming a module, and gains :data:`QUESTION_PATH_WEIGHT`. A file
  whose name the words name whole (``Response.swift`` for "Response type ...", not
  ``ResponseCodable.swift``; ``streams.py`` for "... in streaming") counts
  :data:`STEM_SHARE` words more.
- **Whole files**: each file's best hit gains up to :data:`FILE_WEIGHT` times the best
  score, by the file's summed score against the best file's: a class cut into many small
  method chunks holds its evidence together.
- **Definitions first**: when the query names an identifier (:func:`identifiers`: it
  writes one, ``getUserName``, ``Client.send``, or quotes one; in a plain-English question,
  :func:`is_prose`, not a dunder such as ``__repr__`` nor a constant's ``NO_PROXY``), a chunk
  holding its definition goes above every other hit of its kind and role (one spelled
  otherwise, ``request`` for ``Request``, below those spelled the same; one in the file
  named after it, ``Request.php``, above the others: :data:`FILE_NAME_BONUS`; a C or C++
  header's declaration above the source's definition: :data:`HEADER_BONUS`). ``Class.method``
  resolves through the class (or module): its own method gets :data:`DEFINITION_BONUS`,
  same-named definitions elsewhere :data:`NAME_BONUS`. The bonus goes to the chunk holding
  the definition's signature (:func:`head`): a later chunk of a long definition passes it
  to the first. Not a docs chunk: a README's example or a docstring's prose names the
  definition without being it. In a plain-English question the names it mentions may be
  incidental: there the bonuses count :data:`PROSE_BONUS` best fused scores, not more.
- **Re-exports and modules**: a chunk that re-exports a named name (:func:`reexports`:
  ``pub use``, ``export { }``, a package's ``__init__.py``) gains :data:`REEXPORT_BONUS`,
  below every definition: where a user imports it from, and the answer when the
  definition lives outside the index. A dotted name that names a module (``mini.comment``:
  lua/mini/comment.lua, :func:`names_module`) gives that file's best hit the definition's
  bonus, unless the file holds a definition of the name already.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import PurePosixPath

from anekit.search.terms import identifier_parts

#: The constant of reciprocal rank fusion (the usual 60).
RRF_K = 60
#: What the keyword list's reciprocal ranks count against the vector list's (module doc).
KEYWORD_WEIGHT = 0.7
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
#: Score weights of code that is not the source proper (:func:`role`): type stubs and
#: generated files restate the names of the source, a ``__main__`` demo block, an example
#: program and a benchmark call it.
ROLE_WEIGHTS = {
    "stub": 0.5,
    "generated": 0.5,
    "demo": 0.5,
    "benchmark": 0.5,
    "superseded": 0.5,
    "imports": 0.5,
    "strings": 0.5,
    "template": 0.5,
    "table": 0.5,
}
#: Query words that ask for a role: its weight is then 1.
ROLE_WORDS = {
    "stub": {"stub", "stubs", "pyi", "typeshed", "declaration", "declarations", "typing"}
    | {"typings", "definition", "definitions", "signature", "signatures"},
    "generated": {"generated", "autogenerated", "codegen", "generator"},
    "demo": {"demo", "demos", "example", "examples", "sample", "samples", "__main__"},
    "benchmark": {"benchmark", "benchmarks", "bench", "benchmarking", "perf"},
    "superseded": {"legacy", "deprecated", "old", "older", "previous"},
    "imports": {"import", "imports", "imported", "include", "includes", "dependencies"},
    "strings": {"help", "message", "messages", "text", "string", "strings", "usage"},
    "template": {"template", "templates", "stub", "stubs", "scaffold", "scaffolding", "skeleton"},
    "table": {"table", "tables", "binding", "bindings", "keybinding", "keybindings", "keymap"}
    | {"keymaps", "shortcut", "shortcuts", "mapping", "mappings", "lookup"},
}
#: What a definition named by the query gets on top of its fused score (before its kind's
#: and role's weights).
DEFINITION_BONUS = 1.0
#: What a definition of a qualified name's last part (``send`` of ``Client.send``) gets when
#: it is not in that class or module: below the named one, above everything else.
NAME_BONUS = 0.5
#: What the definition of a one-part name gets on top of its bonus in the file named after
#: it (``Request`` in Request.php, not in Request+Body.swift nor helpers.php): the type a
#: file is for, before its extensions, partial classes and same-named helpers.
FILE_NAME_BONUS = 0.25
#: What the best hit of a file named after a name the query names gets when the file holds
#: no definition of it (``ostream.h`` for ``std::ostream``, the module of that name): below
#: the definition, above a same-named definition elsewhere (:data:`NAME_BONUS`).
NAMED_FILE_BONUS = 0.75
#: What a file a shim forwards to (``base.h`` of fmt's ``#include "base.h"`` core.h) gets,
#: in the shim's scores: the answer to a question about the shim's name, listed beside it.
SHIM_FOLLOW = 0.99
#: What a C or C++ header's declaration of a named name gets on top of its bonus: the
#: interface, where its documentation lives (``absl::StrCat`` in str_cat.h), before the
#: definition in the source file.
HEADER_BONUS = 0.1
#: In a plain-English question (:func:`is_prose`) that writes no code span, the names it
#: mentions may be incidental ("how does FastAPI run sync route functions"): their
#: definitions gain this many best fused scores (times their bonus over
#: :data:`DEFINITION_BONUS`) instead of going above every other hit.
PROSE_BONUS = 3.0
#: What a chunk that re-exports a name the query names gets (``pub use a::{Name}``,
#: ``export { Name } from``, a Python package's ``from .a import Name``): where users
#: import it from, the answer when the definition is outside the index, below definitions.
REEXPORT_BONUS = 0.25
#: A query of this many ordinary words (or one opening with :data:`QUESTION_WORDS`) is
#: plain English: a dunder or a constant's capitals in it is not taken as a name.
PROSE_WORDS = 8
#: First words of a question or a request in English.
QUESTION_WORDS = frozenset(
    {"how", "what", "where", "which", "why", "when", "who", "whose", "whom", "can", "could"}
    | {"does", "do", "did", "is", "are", "was", "were", "should", "would", "will", "has"}
    | {"have", "find", "show", "explain", "describe", "tell"}
)
#: What a hit whose path names all of a topic's words gains, in best scores: a query of at
#: most :data:`TOPIC_WORDS` words worth matching (``State extractor for sharing application
#: state``) names its subject, and the file or folder named after it is the answer.
PATH_WEIGHT = 1.0
#: The same for a longer question (``how does the generated string representation avoid
#: infinite recursion ...``): it describes behaviour, and its words name many files that
#: are not about it.
QUESTION_PATH_WEIGHT = 0.3
#: What a file whose name the query's words name whole (``Response.swift`` for "Response
#: type and HTTP response construction") gains on top, in words named: the module of that
#: topic, before the files whose longer names merely begin with a word of it.
STEM_SHARE = 1.0
#: A file named in full by a longer question (``JsonSerializerInternalWriter.cs`` for "how
#: the internal serializer writer maps .NET objects to JSON tokens") with a name of this
#: many words or more gains :data:`PATH_WEIGHT`, as for a topic: so many words of one name
#: are its subject, not a chance match.
SPECIFIC_STEM_PARTS = 3
# A file that a package's folder is imported by: its name is the folder's, not its topic.
_FOLDER_FILE = re.compile(r"(?:__init__\.pyi?|mod\.rs|index\.[cm]?[jt]sx?|init\.lua)$")
# English inflections, longest first (:func:`_root`); not the agent's -er and -or nor -ion
# (``validate`` is not ``validators``, ``connection`` not ``connectors``): measured worse.
_SUFFIXES = ("ing", "ed", "es", "s")
#: The most words worth matching (:func:`_path_words`) that a topic has.
TOPIC_WORDS = 7
#: What the best hit of the file with the most evidence gains, in best scores.
FILE_WEIGHT = 0.3
#: Words a path is not matched on.
PATH_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "the and for are was were does did has have how what when where which who why with"
        " from into that this these those its their our your not can could should would will"
        " use used using uses",
    )
)
#: Each further hit from a file already listed is weighted by this once more, so that
#: one file's many chunks do not push every other file out of the first hits.
SAME_FILE_DECAY = 0.5

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|#)[A-Za-z_][A-Za-z0-9_]*)*")
_SEPARATOR = re.compile(r"\.|::|#")
_WORD = re.compile(r"[a-z]+|__[a-z]+__")
# Code formatting: `anything`, or one token in quotes ('Client.send', not the class's).
_BACKTICKED = re.compile(r"`([^`]+)`")
_QUOTED = re.compile(r"(?<![\w'\"])(['\"])([^'\"\s]+)\1(?!\w)")
_ORDINARY = re.compile(r"(?<![\w.:#])[A-Z]?[a-z]+(?![\w.:#])")
_FIRST_WORD = re.compile(r"\W*([A-Za-z]+)(?![\w.:#])")
# Names that a sentence uses for a protocol or a value, not for one definition: a dunder
# (__repr__: every class may define one) or a constant's capitals (HTTP_PROXY, NO_PROXY).
_CONCEPT = re.compile(r"__\w+__|[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+")
_STUB = re.compile(r"\.(?:pyi|d\.[cm]?ts)$")
# TypeScript's folder of type declarations (redux's src/types/store.ts: the Store interface,
# not createStore): like a .d.ts, it restates the names the code defines.
_TYPES_FOLDER = re.compile(r"(?:^|/)(?:types|typings)/[^/]+\.[cm]?tsx?$")
# File names that code generators give: protobuf, gRPC, *_generated.*, minified bundles.
_GENERATED_NAME = re.compile(
    r"(?:_pb2(?:_grpc)?\.pyi?|\.pb(?:\.gw)?\.go|\.pb\.(?:cc|h)|[._]generated\.\w+"
    r"|\.g\.dart|\.designer\.cs|\.min\.(?:js|css)|^zz_generated.*\.go)$"
)
# What a generated file says in its first lines (Go's "Code generated ... DO NOT EDIT.");
# a bare "<auto-generated />" tag is not enough: C# projects put it on their own files to
# mute analyzers.
_GENERATED_HEADER = re.compile(
    r"(?i)\b(?:code generated|automatically generated|generated by|do not edit)\b|@generated\b"
)
_HEADER_LINES = 5
# A generator's template, by the suffix its tool reads (Rails' Thor ``.tt``, Laravel's
# ``.stub``, ``.tmpl``/``.template``, autoconf's and CMake's ``config.h.in``,
# ``langref.html.in``): the text of files a tool writes, not the code that runs.
_TEMPLATE_NAME = re.compile(r"\.(?:tt|stub|tmpl|template)$|.\.\w+\.in$")
# Example programs and benchmarks: by folder, and benchmarks by their files' names too.
_DEMO_FOLDER = re.compile(r"(?i)(?:^|/)_?(?:examples?|samples?|demos?)/")
_BENCHMARK_PATH = re.compile(
    r"(?:^|/)(?:[Bb]enchmarks?|bench)/"  # a folder of them
    r"|[_.-]bench(?:mark)?s?\.\w+$"  # hash_benchmark.cc, parse.bench.ts, str_bench.rs
    r"|(?:^|/)(?:\w+Benchmarks?|Benchmarks?[A-Z]\w*)\.\w+$"  # JsonBenchmark.java
)
# A line that imports (Python, JavaScript, Java, Kotlin, Scala, Swift, Go, Haskell, C#,
# Rust, PHP, C and C++, Ruby, Lua and Zig's forms) and one that is a string literal (with
# a separator before or after it: a list's item).
_IMPORT_LINE = re.compile(
    r"[ \t]*(?:import\b|from[ \t]+\S+[ \t]+import\b|#[ \t]*include\b|using[ \t]+[\w.]+;"
    r"|use[ \t]+[\w:\\{]|require(?:_relative)?\b|local[ \t]+\w+[ \t]*=[ \t]*require\b"
    r"|const[ \t]+\w+[ \t]*=[ \t]*@import\b)"
)
_STRING_LINE = re.compile(r"[ \t]*[,+(\[{]?[ \t]*(?:\"[^\"]*\"|'[^']*')[ \t]*[,+)\]}]*[ \t]*$")
# A table's entry: a bracketed tuple, array or struct literal on a line of its own, after
# a list's separator, a comment after it allowed (``, ((mod, xK_p), spawn "x") -- %! Launch``,
# ``{ "GET", on_get },``); and a line that is a comment only.
_ENTRY_LINE = re.compile(
    r"[ \t]*[,\[{(]?[ \t]*[\[{(][^\n]*,[^\n]*[\]})][ \t]*,?[ \t]*(?:(?:--|//|#)[^\n]*)?$"
)
_COMMENT_LINE = re.compile(r"[ \t]*(?:--|//|#(?![a-z])|/\*|\*|;)")
#: A chunk of at least this many lines, this share of them imports or string literals, is
#: a listing (:func:`_text_role`).
LISTING_LINES = 8
LISTING_SHARE = 0.6
#: A table's entries are long lines, a chunk holds few of them: this many make a table.
TABLE_ENTRIES = 5
# A version's folder (src/v3/) and folders of old code: superseded (:func:`_superseded`).
_VERSION_FOLDER = re.compile(r"(?:^|/)v(\d+)/")
_OLD_FOLDER = re.compile(r"(?:^|/)(?:legacy|deprecated)/")
_VERSION_NAMED = re.compile(r"\bv(\d+)\b")


@dataclass(frozen=True)
class Candidate:
    """A chunk proposed by the vector or the keyword search (``head``: the first lines of
    its file, where a generated file says so)."""

    id: int
    symbol: str
    kind: str
    text: str = ""
    path: str = ""
    start_line: int = 0
    head: str = ""


def code_spans(query: str) -> list[str]:
    """The identifiers ``query`` writes as code: every one in backticks, and a quoted
    token that looks like code (:func:`_looks_like_code`; ``'yes'`` is a quoted word)."""
    found = [word for span in _BACKTICKED.findall(query) for word in _IDENTIFIER.findall(span)]
    for _, token in _QUOTED.findall(query):
        found += [word for word in _IDENTIFIER.findall(token) if _looks_like_code(word)]
    return found


def is_prose(query: str) -> bool:
    """Whether ``query`` (its backticked and quoted parts left out) is plain English: it
    opens like a question or a request (:data:`QUESTION_WORDS`), or has
    :data:`PROSE_WORDS` ordinary words (lower-case words, not identifiers)."""
    text = _QUOTED.sub(" ", _BACKTICKED.sub(" ", query))
    first = _FIRST_WORD.match(text)
    opens = first is not None and first.group(1).lower() in QUESTION_WORDS
    return opens or len(_ORDINARY.findall(text)) >= PROSE_WORDS


def _looks_like_code(word: str) -> bool:
    """``_``, a separator (not between one-letter parts: ``e.g``), or an inner capital and
    a small letter (``getUserName``, ``HTTPClient``; not ``HTTP``, which prose uses)."""
    parts = _SEPARATOR.split(word)
    camel = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
    dotted = len(parts) > 1 and any(len(part) > 1 for part in parts)
    return dotted or "_" in word or camel


def identifiers(query: str) -> list[list[str]]:
    """The identifiers ``query`` names, each as its dotted parts (``Client.send`` ->
    ``["Client", "send"]``): those it writes as code (:func:`code_spans`); then each word
    that looks like code (:func:`_looks_like_code`), or the whole query when it is one word;
    but in plain English (:func:`is_prose`) not a dunder nor a constant's capitals: "how is
    a frozen class's __setattr__ blocked" and "how are HTTP_PROXY and NO_PROXY read" name a
    protocol and values, and every definition of those names would go first."""
    return [list(parts) for parts in _identifiers(query)]


@functools.lru_cache(maxsize=256)  # a search asks it of one query in several places
def _identifiers(query: str) -> tuple[tuple[str, ...], ...]:
    found = code_spans(query)
    words = _IDENTIFIER.findall(_QUOTED.sub(" ", _BACKTICKED.sub(" ", query)))
    prose = is_prose(query)
    for word in words:
        if prose:
            if _looks_like_code(word) and not _CONCEPT.fullmatch(word):
                found.append(word)
        elif _looks_like_code(word) or (len(words) == 1 and not found):
            found.append(word)
    return tuple(tuple(_SEPARATOR.split(word)) for word in dict.fromkeys(found))


def _symbol_path(symbol: str) -> list[str]:
    """A symbol's names: ``impl Cache for LruCache<K> > get`` -> ``[LruCache, get]``,
    ``text > Tokenizer::split`` -> ``[text, Tokenizer, split]``, ``self.build`` -> ``[build]``."""
    return list(_symbol_names(symbol))


@functools.lru_cache(maxsize=8192)  # a search meets the same symbols in every rule
def _symbol_names(symbol: str) -> tuple[str, ...]:
    names: list[str] = []
    for part in symbol.split(" > ") if symbol else []:
        part = part.strip().removeprefix("self.")
        while (stripped := re.sub(r"<[^<>]*>|\([^()]*\)", "", part)) != part:
            part = stripped  # generic arguments and parameters, innermost first
        words = part.split()
        if words:
            names += [name for name in _SEPARATOR.split(words[-1]) if name]
    return tuple(names)


def _ends_with(path: Sequence[str], parts: Sequence[str]) -> bool:
    if len(path) < len(parts) or not parts:
        return False
    tail = list(path[len(path) - len(parts) :])
    return tail == list(parts) or [n.lower() for n in tail] == [p.lower() for p in parts]


def names_definition(symbol: str, parts: Sequence[str]) -> bool:
    """Whether a chunk's symbol path (``Client > send``) ends with ``parts``
    (``["Client", "send"]`` or ``["send"]``), ignoring case when nothing matches exactly."""
    return _ends_with(_symbol_path(symbol), parts)


def _module_path(path: str, root: str = "") -> list[str]:
    """The module names of a file: ``src/attr/_make.py`` -> ``[src, attr, _make]``, a
    package's ``__init__`` its folder; after ``root``, the indexed folder's name."""
    return list(_module_names(path, root))


@functools.lru_cache(maxsize=8192)  # a search meets each candidate's file in every rule
def _module_names(path: str, root: str) -> tuple[str, ...]:
    if not path:
        return ()
    *folders, name = [part for part in path.split("/") if part not in ("", ".")]
    names = [*filter(None, [root]), *folders, name.split(".")[0]]
    if names and names[-1] in _PACKAGE_FILES:
        names.pop()
    return tuple(names)


#: File names that stand for their folder's module.
_PACKAGE_FILES = frozenset({"__init__", "mod", "index", "init"})
#: C and C++ headers (:data:`HEADER_BONUS`).
_HEADERS = (".h", ".hpp", ".hh", ".hxx")

#: Folders that hold a package's sources without naming a module (``axum/src/extract``).
_SOURCE_FOLDERS = frozenset({"src", "lib"})

_NOT_TYPES = "return|await|new|throw|yield|else|case|raise|assert|print"


def defines(text: str, parts: Sequence[str]) -> bool:
    """Whether ``text`` holds a definition of ``parts[-1]`` (and, for ``A.b``, of ``A``
    too): a keyword (def, class, func, fn, struct, ...) or a type before it, at the start
    of a line, or an assignment to it at the start of a line (``NAME = ...``: a module's
    constant)."""
    return all(_holds_definition(text, name) for name in parts[-2:])


def _holds_definition(text: str, name: str, path: str = "") -> bool:
    # A definition's match begins at the start of a line that holds the name: the pattern
    # is tried there only (``match``), not at every line (``search``), a third of a query's
    # ranking time at 10k chunks.
    pattern = _definition_pattern(name, path.endswith(_TRAILING_BLOCKS))
    found = text.find(name)
    while found >= 0:
        if pattern.match(text, text.rfind("\n", 0, found) + 1):
            return True
        end = text.find("\n", found)
        if end < 0:
            return False
        found = text.find(name, end + 1)
    return False


#: Languages where ``name(args) {`` at the start of a line is a call given a block
#: (Kotlin's ``withContext(Dispatchers.IO) {``, Swift's and Scala's trailing closures),
#: not a method's definition as in JavaScript and TypeScript.
_TRAILING_BLOCKS = (".kt", ".kts", ".swift", ".scala", ".sc", ".groovy", ".gradle")


@functools.lru_cache(maxsize=256)
def _definition_pattern(name: str, trailing_blocks: bool = False) -> re.Pattern[str]:
    name = re.escape(name)
    # name(args) { : a method (JavaScript, TypeScript) or a C++ constructor (its parameters,
    # then its initializers or its body); in a language of trailing blocks, a call
    calls = (
        ""
        if trailing_blocks
        else rf"|^[ \t]*(?:async\s+|static\s+|get\s+|set\s+)*{name}[ \t]*\([^)]*\)[ \t]*\{{"
        rf"|^[ \t]*(?:explicit[ \t]+|constexpr[ \t]+|inline[ \t]+)*{name}[ \t]*\([^;{{}}()]*\)"
        rf"[ \t]*(?:noexcept[ \t]*)?\n?[ \t]*(?::(?!:)|\{{)"
    )
    return re.compile(
        rf"^[ \t]*(?:export\s+)?(?:(?:async\s+)?def|class|function|func(?:\s*\([^)]*\))?|fn|fun"
        rf"|struct|enum|trait|interface|type|impl|module|sub|const|let|var)\s+{name}\b"
        # a type (or modifiers, or generic parameters: Kotlin's fun <T> name) before the
        # name: words, not a prompt such as ">>> " nor a doc comment's "* " (an example in
        # Javadoc, KDoc, JSDoc)
        rf"|^[ \t]*(?!(?:{_NOT_TYPES})\b)(?!\*+[ \t])"
        rf"(?:(?:[A-Za-z_*&][\w<>\[\],:*&]*|<[^<>\n]*>)[ \t]+)+\**{name}[ \t]*\("
        + calls
        + rf"|^{name}[ \t]*(?::[^=\n]*)?=(?!=)"
        # a type alias: C++'s and C#'s using name = (after a template's parameters), C's
        # and C++'s typedef ... name;
        + rf"|^[ \t]*(?:template[ \t]*<[^\n]*>[ \t]*)?using[ \t]+{name}[ \t]*="
        + rf"|^[ \t]*typedef\b[^;{{}}]*\b{name}[ \t]*;",
        re.MULTILINE,
    )


def holds_signature(text: str, parts: Sequence[str], path: str = "") -> bool:
    """Whether ``text`` holds the first line of the definition of ``parts[-1]``
    (:func:`defines`), or, for ``A.b``, assigns it as a member: ``A.b = ...`` or
    ``A.prototype.b = ...`` at the start of a line (``res.sendFile = function ...``).
    ``path``: the file's, for its language's calls that look like definitions."""
    if _holds_definition(text, parts[-1], path):
        return True
    return (
        len(parts) > 1
        and parts[-1] in text
        and _member_pattern(*parts[-2:]).search(text) is not None
    )


@functools.lru_cache(maxsize=256)
def _member_pattern(owner: str, name: str) -> re.Pattern[str]:
    owner, name = re.escape(owner), re.escape(name)
    return re.compile(rf"^[ \t]*{owner}(?:\.prototype)?\.{name}[ \t]*=(?!=)", re.MULTILINE)


def resolves(candidate: Candidate, parts: Sequence[str], root: str = "") -> float:
    """The bonus ``candidate`` earns as the definition of ``parts``: :data:`DEFINITION_BONUS`
    when it defines the last part (by its symbol path or its text) where the qualifiers put
    it (:func:`_qualified`), or as their member (``A.b = ...``); :data:`NAME_BONUS` for a
    definition of the last part, spelled the same, elsewhere; else 0. ``root``: the name of
    the indexed folder, a package or namespace around every file (``absl`` of absl/...).
    In C#, ``Name`` also names the class ``NameAttribute`` (``[JsonProperty]`` is
    ``JsonPropertyAttribute``: the language looks the name up with the suffix too)."""
    bonus = _resolves(candidate, parts, root)
    if bonus or not candidate.path.endswith(".cs") or parts[-1].endswith("Attribute"):
        return bonus
    return _resolves(candidate, [*parts[:-1], parts[-1] + "Attribute"], root)


def _resolves(candidate: Candidate, parts: Sequence[str], root: str) -> float:
    name = parts[-1]
    path = _symbol_path(candidate.symbol)
    named = _ends_with(path, [name])  # in any case, when nothing matches exactly
    holds = holds_signature(candidate.text, parts, candidate.path)
    if not (named or holds):
        return NAME_BONUS if _defines_behind_sigil(candidate, name) else 0.0
    if len(parts) == 1:  # spelled otherwise (request for Request): another name's
        if not (holds or path[-1:] == [name]):
            return NAME_BONUS
        return (
            DEFINITION_BONUS
            + (FILE_NAME_BONUS if _file_named(candidate.path, name) else 0)
            + (HEADER_BONUS if candidate.path.endswith(_HEADERS) else 0)
        )
    modules = _module_path(candidate.path, root)
    owners = path[:-1] if named else path  # the symbols enclosing the definition
    beside = holds and _holds_definition(candidate.text, parts[-2], candidate.path)  # class A
    if _qualified(modules, owners, parts[:-1]) or beside:
        return (
            DEFINITION_BONUS
            + (FILE_NAME_BONUS if _file_named(candidate.path, name) else 0)
            + (HEADER_BONUS if candidate.path.endswith(_HEADERS) else 0)
        )
    if holds and not _holds_definition(candidate.text, name, candidate.path):  # A.b = ...
        return DEFINITION_BONUS
    # another definition of the name: spelled the same (sendfile is not sendFile)
    return NAME_BONUS if holds or path[-1:] == [name] else 0.0


#: Prefixes that mark a name as internal or core without changing what it names: zod's
#: core ``$ZodType`` behind the public ``ZodType``, its builder ``_record`` behind
#: ``z.record``, Python's and JavaScript's private ``_name``.
_SIGILS = ("$", "_")


def _defines_behind_sigil(candidate: Candidate, name: str) -> bool:
    """Whether ``candidate`` defines ``name`` behind a sigil (:data:`_SIGILS`), by its
    symbol path or its text: another spelling of the name (:data:`NAME_BONUS`)."""
    text = candidate.text
    if name.startswith(_SIGILS) or (name not in text and name not in candidate.symbol):
        return False
    path = _symbol_names(candidate.symbol)
    if path and path[-1] != name and path[-1].lstrip("".join(_SIGILS)) == name:
        return True
    return any(
        sigil + name in text and _holds_definition(text, sigil + name, candidate.path)
        for sigil in _SIGILS
    )


def reexports(candidate: Candidate, name: str) -> bool:
    """Whether ``candidate`` re-exports ``name``: Rust's ``pub use``, JavaScript's and
    TypeScript's ``export { ... }`` and ``export * as``, C++'s ``using ns::name;``, and in a
    Python package's ``__init__.py`` an import of it."""
    text = candidate.text
    if name not in text:
        return False
    # each form opens with one of these words (its names may follow on later lines)
    if ("pub" in text or "export" in text or "using" in text) and _reexport_pattern(name).search(
        text
    ) is not None:
        return True
    return (
        candidate.path.rsplit("/", 1)[-1] == "__init__.py"
        and _python_import_pattern(name).search(text) is not None
    )


@functools.lru_cache(maxsize=256)
def _reexport_pattern(name: str) -> re.Pattern[str]:
    name = re.escape(name)
    return re.compile(
        rf"^[ \t]*pub(?:\([^)]*\))?[ \t]+use[ \t]+[^;]*\b{name}\b[^;]*;"
        rf"|^[ \t]*export[ \t]+(?:type[ \t]+)?\{{[^}}]*\b{name}\b[^}}]*\}}"
        rf"|^[ \t]*export[ \t]+\*[ \t]+as[ \t]+{name}\b"
        rf"|^[ \t]*using[ \t]+[\w:]*::{name}[ \t]*;",
        re.MULTILINE,
    )


@functools.lru_cache(maxsize=256)
def _python_import_pattern(name: str) -> re.Pattern[str]:
    name = re.escape(name)
    return re.compile(
        rf"^[ \t]*from[ \t]+\S+[ \t]+import[ \t]+(?:\([^)]*\b{name}\b[^)]*\)|[^\n]*\b{name}\b)",
        re.MULTILINE,
    )


def names_module(path: str, parts: Sequence[str], root: str = "") -> bool:
    """Whether a dotted name (``mini.comment``, ``pydantic.fields``) names the module of the
    file at ``path`` (:func:`_module_path`; a package's ``__init__``, ``mod.rs``, ``index``
    and ``init`` files are their folder): its last parts, in any case."""
    if len(parts) < 2:
        return False
    modules = [name for name in _module_path(path, root) if name not in _SOURCE_FOLDERS]
    if len(modules) < len(parts):
        return False

    tail = modules[-len(parts) :]
    return [_bare(m).lower() for m in tail] == [_bare(p).lower() for p in parts]


def _file_named(path: str, name: str) -> bool:
    """Whether the file at ``path`` is named after ``name``, in any case and with or
    without underscores and dashes (``str_split.h`` for ``StrSplit``)."""
    stem = _plain_stem(path)
    return bool(stem) and stem == _plain(name)


@functools.lru_cache(maxsize=8192)
def _plain_stem(path: str) -> str:
    """A file's name before its extensions, :func:`_plain`."""
    return _plain(_stem(path))


def _stem(path: str) -> str:
    """A file's name before its extensions (``src/Response.swift``: ``Response``)."""
    return path.rsplit("/", 1)[-1].split(".")[0]


def _plain(text: str) -> str:
    """``text`` lower-cased without underscores and dashes."""
    return text.replace("_", "").replace("-", "").lower()


def _qualified(modules: Sequence[str], owners: Sequence[str], qualifiers: Sequence[str]) -> bool:
    """Whether ``qualifiers`` (``Client`` of ``Client.send``) name the scope of a definition
    in the file of ``modules`` inside the symbols ``owners``: a method's class (or impl,
    namespace) is the last qualifier (in any case); the others, or all for a definition at a
    module's top level, are enclosing packages, modules or namespaces, in order
    (``absl::StrSplit`` in absl/strings/str_split.h, ``validators.not_``,
    ``_models.Response``: a module with or without its leading ``_``)."""
    if owners:
        if owners[-1].lower() != qualifiers[-1].lower():
            return False
        qualifiers, owners = qualifiers[:-1], owners[:-1]
    scope = iter(_bare(name) for name in [*modules, *owners])
    return all(_bare(qualifier) in scope for qualifier in qualifiers)  # in order


def _bare(name: str) -> str:
    """A module's name without its leading underscores (``_models``: ``models``)."""
    return name.lstrip("_") or name


def wanted_kinds(query: str) -> set[str]:
    """The kinds and roles the query asks for by name (``tests``, ``stub``, ``example`` ...)."""
    words = set(_WORD.findall(query.lower()))
    asked = {kind for kind, asking in KIND_WORDS.items() if words & asking}
    return asked | {role for role, asking in ROLE_WORDS.items() if words & asking}


def _superseded(paths: Sequence[str], query: str) -> tuple[str, ...]:
    """The folders among ``paths`` that hold superseded code: a version's folder beside a
    later version's (``src/v3/`` beside ``src/v4/``; not when the query names ``v3``), and
    ``legacy/`` and ``deprecated/`` folders, as path prefixes."""
    named = set(_VERSION_NAMED.findall(query.lower()))
    versions: dict[str, set[int]] = {}
    found: set[str] = set()
    for path in paths:
        for match in _VERSION_FOLDER.finditer(path):
            parent = path[: match.start(1) - 1]
            versions.setdefault(parent, set()).add(int(match.group(1)))
        old = _OLD_FOLDER.search(path)
        if old is not None:
            found.add(path[: old.end()])
    for parent, numbers in versions.items():
        latest = max(numbers)
        found.update(f"{parent}v{n}/" for n in numbers if n < latest and str(n) not in named)
    return tuple(sorted(found))


def role(candidate: Candidate) -> str | None:
    """What a code chunk is besides source (None: source): ``stub`` (``.pyi``, ``.d.ts``, a
    TypeScript ``types/`` folder's files), ``generated`` (a generator's file name, or a
    header saying so in its file's first lines), ``demo`` (a ``__main__`` block, which the
    chunker names so, or a file under an ``examples/``, ``samples/`` or ``demo/`` folder),
    ``benchmark`` (under ``benchmarks/`` or ``bench/``, or named ``*_benchmark.*``,
    ``*.bench.ts``, ``BenchmarkFoo.java``), ``template`` (a generator's template:
    ``app.rb.tt``, ``controller.stub``, ``config.h.in``), ``imports``, ``strings`` or
    ``table`` (a listing: :func:`_text_role`)."""
    if candidate.kind != "code":
        return None
    found = _file_role(candidate.path, candidate.head)
    if found is None and _symbol_names(candidate.symbol)[:1] == ("__main__",):
        return "demo"
    return found or _text_role(candidate.text)


@functools.lru_cache(maxsize=4096)  # a chunk is met again by the next query
def _text_role(text: str) -> str | None:
    """``imports``, ``strings`` or ``table`` when most of a chunk's lines
    (:data:`LISTING_SHARE`, of :data:`LISTING_LINES` at least) are import statements (a
    file's header: it names every module the file uses), string literals (a help text, a
    message table) or, of its lines that are not comments, a table's entries (a key-binding
    or dispatch table, one bracketed entry a line): listings that name or describe behaviour
    the code elsewhere does."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < min(LISTING_LINES, TABLE_ENTRIES):
        return None
    listings = (("imports", _IMPORT_LINE), ("strings", _STRING_LINE))
    for name, pattern in listings if len(lines) >= LISTING_LINES else ():
        if sum(1 for line in lines if pattern.match(line)) >= LISTING_SHARE * len(lines):
            return name
    code = [line for line in lines if not _COMMENT_LINE.match(line)]  # a table's headings
    entries = sum(1 for line in code if _ENTRY_LINE.match(line))
    if entries >= TABLE_ENTRIES and entries >= LISTING_SHARE * len(code):
        return "table"
    return None


@functools.lru_cache(maxsize=4096)  # a file's chunks share its name and first lines
def _file_role(path: str, head: str) -> str | None:
    """``stub``, ``generated``, ``benchmark``, ``demo`` or ``template`` by a file's name,
    folder and first lines, else None."""
    name = PurePosixPath(path).name
    if _STUB.search(name) or _TYPES_FOLDER.search(path):
        return "stub"
    first = "".join(head.splitlines(keepends=True)[:_HEADER_LINES])
    if _GENERATED_NAME.search(name) or _GENERATED_HEADER.search(first):
        return "generated"
    if _BENCHMARK_PATH.search(path):
        return "benchmark"
    if _DEMO_FOLDER.search(path):
        return "demo"
    if _TEMPLATE_NAME.search(name):
        return "template"
    return None


def fuse(
    query: str,
    vector: Sequence[int],
    keyword: Sequence[int],
    candidates: dict[int, Candidate],
    k: int,
    runs: Callable[[Candidate], Sequence[Candidate]] | None = None,
    root: str = "",
    forwarded: Callable[[Candidate], Sequence[Candidate]] | None = None,
    *,
    more: Sequence[tuple[Sequence[int], float]] = (),
) -> list[tuple[int, float]]:
    """The best ``k`` chunk ids with their scores, from the two ranked id lists (and any
    ``more`` ranked lists with their weights: a bench's third list).

    ``runs``: the chunks of the definition a chunk is part of, from it back to the
    definition's first, latest first (a long definition is cut into several). A definition
    named by the query is ranked by the chunk holding its signature (:func:`head`), which
    takes the better score of the two and the bonus, and may be one neither list proposed.
    ``root``: the indexed folder's name (:func:`resolves`). ``forwarded``: the first chunks
    of the files a chunk forwards to when the chunk is a whole shim (anekit.search.shims),
    else nothing: each target file goes just below its shim (:data:`SHIM_FOLLOW`).
    """
    scores: dict[int, float] = {}
    for proposed, weight in ((vector, 1.0), (keyword, KEYWORD_WEIGHT), *more):
        for rank, chunk_id in enumerate(proposed, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (RRF_K + rank)
    candidates = dict(candidates)  # and the heads ranked instead of later chunks
    named = identifiers(query)
    prose = bool(named) and is_prose(query) and not code_spans(query)  # names in passing
    bonuses: dict[int, float] = {}
    for chunk_id in list(scores) if named else []:
        candidate = candidates.get(chunk_id)
        if candidate is None or candidate.kind == "docs":
            continue
        bonus, parts = max(((resolves(candidate, p, root), p) for p in named), key=lambda x: x[0])
        if bonus <= 0:
            if any(reexports(candidate, p[-1]) for p in named):
                bonuses[chunk_id] = max(bonuses.get(chunk_id, 0.0), REEXPORT_BONUS)
            continue
        first = candidate
        if runs is not None and not holds_signature(candidate.text, parts, candidate.path):
            first = head(candidate, parts, runs(candidate))
        if first.id != chunk_id:
            candidates[first.id] = first
            scores[first.id] = max(scores.get(first.id, 0.0), scores[chunk_id])
        bonuses[first.id] = max(bonuses.get(first.id, 0.0), bonus)
    defined = {candidates[i].path for i, b in bonuses.items() if b >= DEFINITION_BONUS}
    for chunk_id in _module_heads(scores, candidates, named, root):
        if candidates[chunk_id].path not in defined:  # the definition it holds goes first
            bonuses[chunk_id] = max(bonuses.get(chunk_id, 0.0), DEFINITION_BONUS)
    holding = {candidates[i].path for i, b in bonuses.items() if b >= NAME_BONUS}
    for chunk_id in _named_file_heads(scores, candidates, named):
        if candidates[chunk_id].path not in holding:
            bonuses[chunk_id] = max(bonuses.get(chunk_id, 0.0), NAMED_FILE_BONUS)
    scale = 1.0  # a bonus in best scores in plain English, else above everything
    if bonuses and prose:
        scale = PROSE_BONUS * max(scores.values()) / DEFINITION_BONUS
    asked = wanted_kinds(query)
    old = _superseded([candidate.path for candidate in candidates.values()], query)
    evidence: dict[int, float] = {}  # the weighted fused scores, without bonuses
    for chunk_id in scores:
        candidate = candidates.get(chunk_id)
        if candidate is None:
            continue
        weight = 1.0 if candidate.kind in asked else KIND_WEIGHTS.get(candidate.kind, 1.0)
        what = role(candidate)
        if what is None and candidate.path.startswith(old) and "superseded" not in asked:
            what = "superseded"
        if what is not None and what not in asked:
            weight *= ROLE_WEIGHTS[what]
        evidence[chunk_id] = weight * scores[chunk_id]
        scores[chunk_id] = evidence[chunk_id] + weight * scale * bonuses.get(chunk_id, 0.0)
    if scores and not named:
        _weigh_paths(scores, candidates, query)  # no bonuses then: the scores are evidence
    if scores:
        _weigh_files(scores, evidence if named else scores, candidates)
    if forwarded is not None and scores:
        _follow_shims(scores, candidates, forwarded, k)
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return _spread_files(ranked, candidates)[:k]


def _follow_shims(
    scores: dict[int, float],
    candidates: dict[int, Candidate],
    forwarded: Callable[[Candidate], Sequence[Candidate]],
    k: int,
) -> None:
    """Each target of a shim among the best ``k`` hits gains :data:`SHIM_FOLLOW` times the
    shim's score (its best chunk among the candidates, else its first chunk), in place."""
    top = sorted(scores, key=lambda i: (-scores[i], i))[:k]
    followed = [
        (shim_id, target)
        for shim_id in top
        if (shim := candidates.get(shim_id)) is not None and shim.kind != "docs"
        for target in forwarded(shim)
    ]
    if not followed:
        return  # the common case: no shim among the best hits
    best_of: dict[str, int] = {}
    for chunk_id, score in scores.items():
        path = candidates[chunk_id].path if chunk_id in candidates else ""
        if path and (path not in best_of or score > scores[best_of[path]]):
            best_of[path] = chunk_id
    for shim_id, target in followed:
        chosen = best_of.get(target.path, target.id)
        candidates.setdefault(chosen, target)
        scores[chosen] = max(scores.get(chosen, 0.0), SHIM_FOLLOW * scores[shim_id])


def _module_heads(
    scores: dict[int, float],
    candidates: dict[int, Candidate],
    named: Sequence[Sequence[str]],
    root: str,
) -> list[int]:
    """The best-scored code chunk of each file whose module a dotted name of the query
    names (:func:`names_module`)."""
    dotted = [parts for parts in named if len(parts) > 1]
    if not dotted:
        return []
    return _best_of_files(
        scores, candidates, lambda path: any(names_module(path, p, root) for p in dotted)
    )


def _named_file_heads(
    scores: dict[int, float], candidates: dict[int, Candidate], named: Sequence[Sequence[str]]
) -> list[int]:
    """The best-scored code chunk of each file named after the last part of a name the
    query names (:func:`_file_named`, or its plural: ``ostream.h`` for ``std::ostream``,
    ``args.h`` for ``fmt::arg``)."""
    names = {parts[-1] for parts in named if parts}
    if not names:
        return []
    return _best_of_files(
        scores,
        candidates,
        lambda path: any(_file_named(path, n) or _file_named(path, n + "s") for n in names),
    )


def _best_of_files(
    scores: dict[int, float], candidates: dict[int, Candidate], chosen: Callable[[str], bool]
) -> list[int]:
    """The best-scored code chunk of each file whose path is ``chosen``."""
    best: dict[str, int] = {}
    verdicts: dict[str, bool] = {}
    for chunk_id, score in scores.items():
        candidate = candidates.get(chunk_id)
        if candidate is None or candidate.kind == "docs" or not candidate.path:
            continue
        path = candidate.path
        if path in best and scores[best[path]] >= score:
            continue
        if path not in verdicts:
            verdicts[path] = chosen(path)
        if verdicts[path]:
            best[path] = chunk_id
    return list(best.values())


def _path_words(query: str) -> set[str]:
    return set(topic_words(query))


def topic_words(query: str) -> list[str]:
    """The words of ``query`` a path is matched on, lower-cased, in order: three letters
    or more, neither a stopword nor a question's word."""
    return [
        word
        for word in (w.lower() for w in _IDENTIFIER.findall(query) for w in _SEPARATOR.split(w))
        if len(word) > 2 and word not in PATH_STOPWORDS and word not in QUESTION_WORDS
    ]


@functools.lru_cache(maxsize=4096)
def _path_parts(path: str) -> frozenset[str]:
    """The lower-cased identifier parts of a file's name (before its extensions) and of its
    folder: ``src/Illuminate/Session/Store.php`` -> session, store."""
    pure = PurePosixPath(path)
    names = [_stem(path), pure.parent.name]
    return frozenset(part for name in names for part in identifier_parts(name) if part)


def _stem_named(path: str, words: AbstractSet[str]) -> bool:
    """Whether every identifier part of a file's name (before its extensions) is named by
    one of ``words`` (:func:`_names`): ``Response.swift`` for "Response type", not
    ``ResponseCodable.swift``; ``streams.py`` for "flow control in streaming"."""
    stem = _stem_parts(path)
    return bool(stem) and all(any(_names(word, part) for word in words) for part in stem)


@functools.lru_cache(maxsize=8192)
def _stem_parts(path: str) -> tuple[str, ...]:
    """The identifier parts of a file's name (``Response.swift``: response;
    ``UpsertStatement.kt``: upsert, statement; ``bash_completions.go``), none for a file
    named for its folder (:data:`_FOLDER_FILE`: ``mod.rs``, ``index.ts``)."""
    if _FOLDER_FILE.match(PurePosixPath(path).name):
        return ()
    return tuple(part for part in identifier_parts(_stem(path)) if part)


@functools.lru_cache(maxsize=65536)  # a search asks of every word and every path part
def _names(word: str, part: str) -> bool:
    """Whether a query's word names a path's part: one begins with the other (``session``,
    ``sessions``), or their roots do (:func:`_root`: ``routing`` and ``router``,
    ``preprocessed`` and ``preprocessing``, ``formats`` and ``formatter``, ``utility`` and
    ``utils``)."""
    if _prefixed(word, part):
        return True
    return _prefixed(_root(word), _root(part))


def _prefixed(a: str, b: str) -> bool:
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 3 and long.startswith(short)


def _root(word: str) -> str:
    """``word`` without one inflection (:data:`_SUFFIXES`) when at least four letters are
    left and it does not end in ``ss``: ``routing``, ``routes`` -> ``rout``; ``process``."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def _weigh_paths(scores: dict[int, float], candidates: dict[int, Candidate], query: str) -> None:
    """Path evidence (module doc), in place."""
    words = _path_words(query)
    if not words:
        return
    weight = PATH_WEIGHT if len(words) <= TOPIC_WORDS else QUESTION_PATH_WEIGHT
    unit = weight * max(scores.values())
    topic_unit = PATH_WEIGHT * max(scores.values())
    gains: dict[str, float] = {}  # per file: a file's chunks share its path
    for chunk_id in scores:
        candidate = candidates.get(chunk_id)
        if candidate is None or not candidate.path:
            continue
        gain = gains.get(candidate.path)
        if gain is None:
            parts = _path_parts(candidate.path)
            named = sum(1 for word in words if any(_names(word, part) for part in parts))
            whole = named > 0 and _stem_named(candidate.path, words)
            # a name of several words, each named: the question's subject however long
            scale = (
                topic_unit
                if whole and len(_stem_parts(candidate.path)) >= SPECIFIC_STEM_PARTS
                else unit
            )
            gain = gains[candidate.path] = scale * (named + STEM_SHARE * whole) / len(words)
        scores[chunk_id] += gain


def _weigh_files(
    scores: dict[int, float], evidence: dict[int, float], candidates: dict[int, Candidate]
) -> None:
    """Whole files (module doc), in place: each file's total is its chunks' ``evidence``,
    the fused scores without the definitions' bonuses (a file of many overloads of a named
    name, each with its bonus, is not more evidence than its fused scores say); the unit is
    the best score."""
    totals: dict[str, float] = {}
    best: dict[str, int] = {}
    for chunk_id, score in scores.items():
        candidate = candidates.get(chunk_id)
        if candidate is None or not candidate.path:
            continue
        path = candidate.path
        totals[path] = totals.get(path, 0.0) + evidence.get(chunk_id, 0.0)
        if path not in best or score > scores[best[path]]:
            best[path] = chunk_id
    if not totals:
        return
    top, unit = max(totals.values()), FILE_WEIGHT * max(scores.values())
    if top <= 0:
        return
    for path, chunk_id in best.items():
        scores[chunk_id] += unit * totals[path] / top


def head(candidate: Candidate, parts: Sequence[str], run: Sequence[Candidate]) -> Candidate:
    """The chunk holding the signature of ``parts``, whose definition ``candidate`` is a
    later chunk of: the nearest chunk of ``run`` (``candidate``'s symbol, latest first) that
    holds it (:func:`holds_signature`), else the run's first chunk of that symbol (a
    signature the definition pattern does not know), else ``candidate``."""
    same = [chunk for chunk in run if chunk.symbol == candidate.symbol]
    for chunk in same:
        if holds_signature(chunk.text, parts, chunk.path):
            return chunk
    return same[-1] if same else candidate


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
