"""Where to cut a file into chunks for code search (rules after semlith's chunker).

* Chunks are line-aligned and at most :data:`MAX_CHARS` (800) characters long; a window of
  lines overlaps the one before it by :data:`OVERLAP_LINES` (2) lines; a line longer than
  the budget is hard-split into slices.
* Code is cut at tree-sitter definition starts (the table is :mod:`anekit.search.languages`),
  moved up over the comments, decorators and attributes directly above (no blank line
  between), with no overlap; a definition over the budget is cut again at the definitions
  inside it, or into windows when it has none.
* Markdown and reStructuredText are cut at headings, nested sections like nested
  definitions, the heading path ("A > B") kept as the chunk's symbol.
* Everything else, and any file whose parse fails, is cut into line windows.

Packing, so that a definition starts its own chunk wherever the budget allows: at one
nesting level the pieces are the definitions (with what sits directly above them), the
header of the enclosing definition (its lines before its first nested definition) and the
runs of other lines between definitions. A definition over :data:`SMALL_CHARS` (200) gets a
chunk of its own (or several when it is over the budget). A small definition or a header
opens a chunk which the following small definitions and in-between lines join while the
total stays within the budget. Other lines that do not follow such a chunk form chunks of
their own, except closing lines (``}``, ``end``, ``);``) which join the chunk before them when
they fit. Blank lines at a chunk's edges are left out.

A chunk's ``symbol`` is the path of the definition it holds ("Session > request"), or of
the enclosing one when it holds several or lines between them ("" at top level). Go methods
are named by receiver ("Session > Request"), Rust impl blocks "impl Foo" or "impl Trait for
Foo", C++ out-of-class methods "Session::request", Haskell instances "instance Show Shape",
Zig tests 'test "name"'. Consecutive clauses of one Elixir function or equations of one
Haskell function (with the signature above) are one definition. A ``.h`` file that reads
as C++ (``namespace``, ``template <``, ``std::``, ...) is parsed as C++. A Python module's
``if __name__ == "__main__":`` block is a definition named ``__main__`` (what it defines is
"__main__ > name"), so that search can rank such demo code below the module's own.

Lines are split at "\\n" only ("\\r\\n" stays a line ending), as git, grep, editors and
tree-sitter count them, so line numbers are exact and a chunk's ``text`` is exactly the
file's lines ``start_line..end_line``. :func:`model_text` adds the context (path, symbol or
heading path) for the embedding model only.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # imported when a file is parsed (20 ms), not for a search
    from tree_sitter import Language, Node, Parser, Query

from anekit.search.languages import LanguageSpec, kind_for, language_for, spec_for

__all__ = [
    "CHUNKER_VERSION",
    "KINDS",
    "MAX_CHARS",
    "OVERLAP_LINES",
    "SMALL_CHARS",
    "Chunk",
    "chunk_file",
    "kind_for",
    "language_for",
    "model_text",
    "split_lines",
]

#: Bumped when boundaries, kinds or model text change (2: PKG-INFO and METADATA are docs;
#: 3: chunks of code files holding only comments and docstrings are docs; 4: a Python
#: module's ``__main__`` block is a definition; 5: definitions in Kotlin, Scala, Swift, C#,
#: PHP, Elixir, Haskell, Lua, Zig and shell, and C++ headers named ``.h``).
CHUNKER_VERSION = "5"
MAX_CHARS = 800
OVERLAP_LINES = 2
SMALL_CHARS = 200  # definitions up to this size may share a chunk with their neighbours
KINDS = ("code", "docs", "tests", "config")

_log = logging.getLogger(__name__)

_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function", "class"}
)
_NEEDS_BODY = frozenset(
    {"struct_specifier", "union_specifier", "enum_specifier", "class_specifier", "mod_item"}
)
# Nodes whose children are statements: a string directly in one is a docstring (the Python
# grammar puts docstrings there; others wrap a bare string in an expression_statement).
_STATEMENT_LISTS = frozenset({"block", "module"})
_CLOSER = re.compile(  # a line that only closes something, maybe with a comment
    r"\s*(?:[)\]};,]+|end[;,)]*|(?:public|private|protected)\s*:)\s*(?:(?://|#|--).*|/\*.*\*/)?\s*"
)
_DECLARED_NAMES = frozenset(
    {"identifier", "type_identifier", "field_identifier", "qualified_identifier"}
    | {"destructor_name", "operator_name"}
)
# Elixir's macros that define something named by their first argument.
_ELIXIR_DEFINERS = frozenset(
    {"defmodule", "def", "defp", "defmacro", "defmacrop", "defguard", "defguardp"}
    | {"defdelegate", "defprotocol", "defimpl", "defn", "defnp"}
)
# A Zig constant that is a type: const Parser = struct { ... }
_ZIG_TYPE = re.compile(r"=\s*(?:extern\s+|packed\s+)?(?:struct|enum|union|opaque)\b")
# A C++ header in a .h file (fmt, nlohmann/json, abseil): parsed with the C++ grammar.
_CPP_HINT = re.compile(
    r"^[ \t]*(?:namespace\b|template\s*<|class\s+\w+[^;]*$|(?:public|private|protected)\s*:)"
    r"|\bstd::|\bconstexpr\b",
    re.M,
)
# Python's guard of a script's own code: if __name__ == "__main__":
_MAIN_GUARD = re.compile(r"""__name__ ?== ?(['"])__main__\1|(['"])__main__\2 ?== ?__name__""")
_HEADING_MARKER = re.compile(r"atx_h(\d)_marker|setext_h([12])_underline")
_NAME_MAX = 100
_HEADER_SYMBOL_MAX = 160


@dataclass(frozen=True)
class Chunk:
    """A line-aligned piece of one file."""

    start_line: int  # 1-based, inclusive
    end_line: int  # inclusive
    text: str  # exactly the file's lines start..end (or a slice of one over-long line)
    symbol: str  # enclosing symbol path "Session > request", the heading path for prose
    kind: str  # one of KINDS


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each with its line ending; only "\\n" ends a line."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def chunk_file(relpath: str, text: str) -> list[Chunk]:
    """Cut ``text`` (the content of ``relpath``) into chunks; never raises.

    The chunks cover every non-blank line at least once, in order; an empty or blank file
    gives none. Unknown languages, and files whose parse fails, are cut into line windows.
    """
    language = language_for(relpath)
    kind = kind_for(relpath, language)
    lines = split_lines(text)
    if all(not line.strip() for line in lines):
        return []
    spec = spec_for(language)
    if language == "c" and relpath.lower().endswith(".h") and _CPP_HINT.search(text):
        spec = spec_for("cpp")
    spans: list[_Span] | None = None
    prose: Callable[[_Span], bool] | None = None
    if spec is not None and spec.grammar is not None:
        try:
            spans, prose = _structured(spec, spec.grammar, text, lines)
        except Exception as error:  # a grammar surprise must not stop indexing
            _log.warning("%s: chunked by line windows: its parse failed (%s)", relpath, error)
            _log.debug("the parse failure of %s", relpath, exc_info=True)
    if spans is None:
        cutter = _Cutter(lines, lambda d: [])
        cutter.windows(1, len(lines), "")
        spans = cutter.out
    return [
        Chunk(
            s.start,
            s.end,
            s.text if s.text is not None else "".join(lines[s.start - 1 : s.end]),
            s.symbol,
            "docs" if kind == "code" and prose is not None and prose(s) else kind,
        )
        for s in spans
    ]


def model_text(relpath: str, chunk: Chunk) -> str:
    """The text the embedding model gets: a short context header, then the chunk's text."""
    header = f"path: {relpath}\n"
    if chunk.symbol:
        label = "heading" if language_for(relpath) in ("markdown", "rst") else "symbol"
        symbol = chunk.symbol
        if len(symbol) > _HEADER_SYMBOL_MAX:
            symbol = "…" + symbol[-(_HEADER_SYMBOL_MAX - 1) :]
        header += f"{label}: {symbol}\n"
    return header + "\n" + chunk.text


@dataclass
class _Def:
    """A definition or section: lines start..end (1-based), its own first line ``head``."""

    start: int  # first line, with the comments and decorators directly above
    end: int
    head: int  # the line the definition or heading ends on; nested ones start below it
    path: tuple[str, ...]
    node: Node | None = None  # tree-sitter node to search for nested definitions
    kids: list[_Def] | None = None  # nested sections (prose), known up front


@dataclass
class _Span:
    start: int
    end: int
    symbol: str
    text: str | None = None  # set for a slice of an over-long line


@functools.cache
def _language(grammar: str) -> Language:
    from tree_sitter_language_pack import SupportedLanguage, get_language

    # Grammar names come from the languages table.
    return get_language(cast(SupportedLanguage, grammar))


_local = threading.local()


def _parser(grammar: str) -> Parser:
    """A parser for ``grammar``, cached per thread (parsers are not shared across threads)."""
    from tree_sitter import Parser

    parsers: dict[str, Parser] = _local.__dict__.setdefault("parsers", {})
    if grammar not in parsers:
        parsers[grammar] = Parser(_language(grammar))
    return parsers[grammar]


@functools.cache
def _definitions_query(grammar: str, types: frozenset[str]) -> Query:
    from tree_sitter import Query

    return Query(_language(grammar), " ".join(f"({t}) @d" for t in sorted(types)))


def _last_row(node: Node) -> int:
    """The 0-based row of a node's last character (a node may end after its newline)."""
    end = node.end_point
    if end.column == 0 and end.row > node.start_point.row:
        return end.row - 1
    return end.row


def _structured(
    spec: LanguageSpec, grammar: str, text: str, lines: list[str]
) -> tuple[list[_Span], Callable[[_Span], bool] | None]:
    src = text.encode("utf-8", "surrogatepass")
    root = _parser(grammar).parse(src).root_node
    prose = None
    if spec.name in ("markdown", "rst"):
        headings = _markdown_headings if spec.name == "markdown" else _rst_headings
        kids = _sections(headings(root, src), lines)
        cutter = _Cutter(lines, lambda d: d.kids or [])
    else:
        outline = _Code(spec, src, root, lines)
        kids = outline.level(root, (), 0)
        cutter = _Cutter(lines, outline.kids)
        prose = outline.is_prose
    cutter.region(1, len(lines), kids, (), has_head=False)
    return cutter.out, prose


def _is_comment(node_type: str) -> bool:
    return "comment" in node_type or node_type == "haddock"  # Haskell's -- | docs


def _text(src: bytes, node: Node | None) -> str:
    if node is None:
        return ""
    name = " ".join(src[node.start_byte : node.end_byte].decode("utf-8", "replace").split())
    return name[:_NAME_MAX]


class _Code:
    """Definitions of a parsed source file, found by one tree-sitter query, nested."""

    def __init__(self, spec: LanguageSpec, src: bytes, root: Node, lines: list[str]) -> None:
        from tree_sitter import QueryCursor

        self.spec, self.src, self.root, self.lines = spec, src, root, lines
        found = QueryCursor(_definitions_query(spec.grammar or "", spec.definitions)).captures(root)
        hits = []
        for inner in found.get("d", []):
            name = self._name(inner)
            if name:
                span = inner
                while (parent := span.parent) is not None and parent.type in spec.wrappers:
                    if self._definition(parent) != inner:
                        break
                    span = parent
                hits.append((span, inner, name))
        self.heads = {inner.start_point.row + 1 for _, inner, _ in hits}
        hits.sort(key=lambda h: (h[0].start_byte, -h[0].end_byte))
        # Nest by byte ranges: a definition inside another's node is its child; one inside
        # another's wrapper only (a decorator's argument) is left to the lines around it.
        self.children: dict[int | None, list[tuple[Node, Node, tuple[str, ...]]]] = {}
        stack: list[tuple[Node, Node]] = []
        for span, inner, name in hits:
            while stack and span.end_byte > stack[-1][0].end_byte:
                stack.pop()
            if stack:
                outer = stack[-1][1]
                if not outer.start_byte <= span.start_byte or span.end_byte > outer.end_byte:
                    continue
            key = stack[-1][1].id if stack else None
            self.children.setdefault(key, []).append((span, inner, name))
            stack.append((span, inner))
        self.prose = self._prose_lines()

    def is_prose(self, span: _Span) -> bool:
        """Whether ``span`` is prose: each of its non-blank lines is a comment, a
        docstring or only closes something (``}``), and it holds no definition's first
        line (a definition with a long docstring stays code). One line of code, and the
        chunk is code."""
        if span.text is not None:
            return False  # a slice of one over-long line
        lines = self.lines
        filled = [n for n in range(span.start, span.end + 1) if lines[n - 1].strip()]
        if not filled or any(n in self.heads for n in filled):
            return False
        return all(n in self.prose or _CLOSER.fullmatch(lines[n - 1]) for n in filled)

    def _prose_lines(self) -> set[int]:
        """1-based lines whose first character is in a comment or a docstring (a string
        that is a statement of its own: Python's docstrings)."""
        found: set[int] = set()
        for r in range(len(self.lines)):
            node = self._first_node(r)
            while node is not None and node != self.root:
                if _is_comment(node.type):
                    found.add(r + 1)
                    break
                parent = node.parent
                if "string" not in node.type or parent is None:
                    break
                if parent.type in _STATEMENT_LISTS or (
                    parent.type == "expression_statement" and parent.named_child_count == 1
                ):
                    found.add(r + 1)
                    break
                node = parent
        return found

    def _first_node(self, r: int) -> Node | None:
        """The smallest named node at line ``r``'s first non-blank character; None if blank."""
        line = self.lines[r]
        stripped = line.lstrip()
        if not stripped.strip():
            return None
        col = len(line[: len(line) - len(stripped)].encode("utf-8", "surrogatepass"))
        # A one-byte range: an empty one where a node ending with its newline (Haskell's
        # haddock) meets the next would find their parent.
        return self.root.named_descendant_for_point_range((r, col), (r, col + 1))

    def kids(self, d: _Def) -> list[_Def]:
        return self.level(d.node, d.path, d.head) if d.node is not None else []

    def level(self, container: Node, path: tuple[str, ...], floor: int) -> list[_Def]:
        """The definitions nested in ``container`` (not inside one another), below ``floor``."""
        out: list[_Def] = []
        key = None if container == self.root else container.id
        for span, inner, name in self.children.get(key, []):
            first, end = span.start_point.row + 1, _last_row(span) + 1
            if first <= floor:
                continue  # on the enclosing definition's own line: part of its header
            if out and first <= out[-1].end:  # shares a line with the one before: one piece
                prev = out[-1]
                out[-1] = _Def(prev.start, max(prev.end, end), prev.head, path)
                continue
            if out and self.spec.clauses and out[-1].path == (*path, *name):
                prev = out[-1]  # another clause of the definition before
                out[-1] = _Def(prev.start, end, prev.head, prev.path, prev.node)
                continue
            start = self._attached_start(first - 1, out[-1].end if out else floor) + 1
            out.append(_Def(start, end, inner.start_point.row + 1, (*path, *name), inner))
        return out

    def _definition(self, node: Node) -> Node | None:
        """The named definition ``node`` is, or the one definition a wrapper holds."""
        if node.type in self.spec.definitions:
            return node if self._name(node) else None
        if node.type in self.spec.wrappers:
            hits = [h for c in node.named_children if (h := self._definition(c)) is not None]
            if len(hits) == 1:
                return hits[0]
        return None

    def _name(self, node: Node) -> tuple[str, ...]:
        """The name path a definition adds, () when it is not one (anonymous, no body)."""
        kind, field, src = node.type, node.child_by_field_name, self.src
        if kind == "variable_declarator":
            value = field("value")
            if value is None or value.type not in _FUNCTION_VALUES:
                return ()
        elif kind in _NEEDS_BODY and field("body") is None:
            return ()
        if kind == "method_declaration" and self.spec.name == "go":
            receiver = _text(src, field("receiver")).strip("()").split()
            owner = re.sub(r"\[.*", "", receiver[-1].lstrip("*")) if receiver else ""
            return tuple(part for part in (owner, _text(src, field("name"))) if part)
        if kind == "if_statement":  # Python: only the module's own `if __name__ == "__main__":`
            guard = _MAIN_GUARD.fullmatch(_text(src, field("condition")))
            return ("__main__",) if guard and node.parent == self.root else ()
        if kind == "impl_item":
            trait, target = _text(src, field("trait")), _text(src, field("type"))
            return (f"impl {trait} for {target}" if trait else f"impl {target}",)
        if self.spec.name in ("elixir", "zig", "lua"):
            return self._macro_name(node)
        if kind == "instance":  # Haskell: instance Show Shape
            patterns = _text(src, field("patterns"))
            return (f"instance {_text(src, field('name'))} {patterns}".strip(),)
        if kind == "singleton_method":
            return (f"{_text(src, field('object'))}.{_text(src, field('name'))}",)
        if kind == "singleton_class":
            return (f"class << {_text(src, field('value'))}",)
        if kind in ("secondary_constructor", "deinit_declaration"):  # Kotlin, Swift
            return ("constructor" if kind == "secondary_constructor" else "deinit",)
        name = field("name")
        if name is None and self.spec.names:  # Kotlin: no name fields
            name = next((c for c in node.named_children if c.type in self.spec.names), None)
            if name is None and kind == "companion_object":
                return ("companion object",)
        if name is None:  # C/C++ functions and typedefs: the name is inside the declarator
            name = field("declarator")
            while name is not None and name.type not in _DECLARED_NAMES:
                name = name.child_by_field_name("declarator") or next(
                    (c for c in name.named_children if c.type.endswith("declarator")), None
                )
        text = _text(src, name)
        return (text,) if text else ()

    def _macro_name(self, node: Node) -> tuple[str, ...]:
        """The name of an Elixir ``def``-like call, a Zig declaration or a Lua assignment
        of a function; () when ``node`` defines nothing."""
        src, kind = self.src, node.type
        if kind == "call":  # Elixir: def name(args) when guard do ... end
            if _text(src, node.child_by_field_name("target")) not in _ELIXIR_DEFINERS:
                return ()
            args = next((c for c in node.named_children if c.type == "arguments"), None)
            head = args.named_children[0] if args is not None and args.named_children else None
            while head is not None and head.type == "binary_operator":  # when, ::, \\
                head = head.child_by_field_name("left")
            if head is not None and head.type == "call":
                head = head.child_by_field_name("target")
            name = _text(src, head)
        elif kind == "TestDecl":  # Zig: test "name" { ... }
            label = next((c for c in node.named_children if c.type != "Block"), None)
            name = f"test {_text(src, label)}".strip()
        elif kind == "Decl":  # Zig: a function, or a constant holding a type
            fn = next((c for c in node.named_children if c.type == "FnProto"), None)
            var = next((c for c in node.named_children if c.type == "VarDecl"), None)
            if fn is not None:
                name = _text(src, fn.child_by_field_name("function"))
            elif var is not None and _ZIG_TYPE.search(_text(src, var)):
                name = _text(src, var.child_by_field_name("variable_type_function"))
            else:
                return ()
        elif kind == "assignment_statement":  # Lua: M.name = function(...) ... end
            names = next((c for c in node.named_children if c.type == "variable_list"), None)
            values = next((c for c in node.named_children if c.type == "expression_list"), None)
            value = values.named_children[0] if values and values.named_children else None
            if names is None or names.named_child_count != 1 or value is None:
                return ()
            if value.type != "function_definition":
                return ()
            name = _text(src, names)
        else:  # Lua's function_declaration: function M.name(...) or M:name(...)
            name = _text(src, node.child_by_field_name("name"))
        return (name,) if name else ()

    def _attached_start(self, row: int, floor: int) -> int:
        """The 0-based row where a definition on ``row`` starts with what sits directly above.

        Moves up over whole lines of comments, decorators and attributes, not past a blank
        line nor above row ``floor``.
        """
        start = row
        while start > floor:
            node = self._attached_at(start - 1, row)
            if node is None or node.start_point.row < floor:
                break
            start = node.start_point.row
        return start

    def _attached_at(self, r: int, def_row: int) -> Node | None:
        """The comment, decorator or attribute filling line ``r`` above ``def_row``, if any."""
        node = self._first_node(r)
        while node is not None and node != self.root:
            if _last_row(node) >= def_row:
                return None  # it encloses the definition: not something above it
            if _is_comment(node.type) or node.type in self.spec.attached:
                break
            node = node.parent
        if node is None or node == self.root:
            return None
        src, start, end = self.src, node.start_byte, node.end_byte
        if src[start - node.start_point.column : start].strip():
            return None  # code before it on its first line
        if _last_row(node) == node.end_point.row:  # the node does not end with its newline
            newline = src.find(b"\n", end)
            if src[end : newline if newline >= 0 else len(src)].strip():
                return None  # code after it on its last line
        return node


def _markdown_headings(root: Node, src: bytes) -> list[tuple[int, int, int, str]]:
    """(first line, last line, level, title) of the headings outside quotes and lists."""
    heads = []
    stack = list(reversed(root.named_children))
    while stack:
        node = stack.pop()
        if node.type == "section":
            stack.extend(reversed(node.named_children))
        elif node.type in ("atx_heading", "setext_heading"):
            level = 0
            for child in node.children:
                if marker := _HEADING_MARKER.fullmatch(child.type):
                    level = int(marker[1] or marker[2])
            title = _text(src, node.child_by_field_name("heading_content"))
            title = re.sub(r"(^|\s+)#+$", "", title).strip()
            heads.append((node.start_point.row + 1, _last_row(node) + 1, level, title))
    return heads


def _rst_headings(root: Node, src: bytes) -> list[tuple[int, int, int, str]]:
    """(first line, last line, level, title) of reStructuredText section titles.

    Levels go by adornment style (character, overline or not) in order of first use.
    """
    styles: list[tuple[str, bool]] = []
    heads = []
    for node in root.named_children:
        if node.type != "section":
            continue
        adornments = [c for c in node.children if c.type == "adornment"]
        title = next((c for c in node.named_children if c.type == "title"), None)
        if not adornments or title is None:
            continue
        char = src[adornments[-1].start_byte : adornments[-1].start_byte + 1].decode("latin-1")
        style = (char, node.children[0].type == "adornment")
        if style not in styles:
            styles.append(style)
        level = styles.index(style) + 1
        heads.append((node.start_point.row + 1, _last_row(node) + 1, level, _text(src, title)))
    return heads


def _sections(heads: list[tuple[int, int, int, str]], lines: list[str]) -> list[_Def]:
    """Nest headings into sections: a section runs to the next heading of its level or up."""
    top: list[_Def] = []
    open_: list[tuple[int, _Def]] = []

    def close(level: int, before: int) -> None:
        while open_ and open_[-1][0] >= level:
            section = open_.pop()[1]
            end = before - 1
            while end > section.head and not lines[end - 1].strip():
                end -= 1
            section.end = end

    for first, last, level, title in heads:
        if not title:
            continue
        close(level, first)
        parent = open_[-1][1] if open_ else None
        path = (*parent.path, title) if parent else (title,)
        section = _Def(first, last, last, path, kids=[])
        (parent.kids if parent and parent.kids is not None else top).append(section)
        open_.append((level, section))
    close(0, len(lines) + 1)
    return top


class _Cutter:
    """Cuts regions of lines into spans, appending them to ``out`` in order."""

    def __init__(self, lines: list[str], kids_of: Callable[[_Def], list[_Def]]) -> None:
        self.lines = lines
        self.kids_of = kids_of
        self.out: list[_Span] = []
        self.blank = [True] + [not line.strip() for line in lines]  # 1-based
        self.cum = [0, *itertools.accumulate(len(line) for line in lines)]

    def size(self, start: int, end: int) -> int:
        return self.cum[end] - self.cum[start - 1]

    def region(
        self, lo: int, hi: int, kids: list[_Def], path: tuple[str, ...], *, has_head: bool
    ) -> None:
        """Cut lines lo..hi holding the definitions ``kids``; ``path`` encloses them all."""
        symbol = " > ".join(path)
        pieces: list[tuple[int, int, _Def | None, bool]] = []  # start, end, def, is header

        def gap(start: int, end: int, is_head: bool) -> None:
            while start <= end and self.blank[start]:
                start += 1
            while end >= start and self.blank[end]:
                end -= 1
            if start <= end:
                pieces.append((start, end, None, is_head))

        cursor = lo
        for kid in kids:
            gap(cursor, kid.start - 1, has_head and cursor == lo)
            pieces.append((kid.start, kid.end, kid, False))
            cursor = kid.end + 1
        gap(cursor, hi, has_head and cursor == lo)

        first = len(self.out)
        packable = False  # the last span takes small definitions and in-between lines
        for start, end, d, is_head in pieces:
            size = self.size(start, end)
            last = self.out[-1] if len(self.out) > first else None
            if last is not None and (
                last.text is not None or self.size(last.start, end) > MAX_CHARS
            ):
                last = None  # nothing can join it
            own = " > ".join(d.path) if d is not None else symbol
            # Small definitions and other lines may join a packable chunk; headers never do.
            joins = not is_head and (d is None or size <= SMALL_CHARS)
            if d is not None and size > MAX_CHARS and (nested := self.kids_of(d)):
                self.region(d.start, d.end, nested, d.path, has_head=True)
                packable = False
            elif d is None and not is_head and last is not None and self._closing(start, end):
                last.end = end  # a closing line joins the chunk before it, symbol unchanged
            elif joins and packable and last is not None:
                last.end, last.symbol = end, symbol
            elif (d is not None or is_head) and size <= MAX_CHARS:
                self.out.append(_Span(start, end, own))
                packable = is_head or joins
            else:
                self.windows(start, end, own)
                packable = False

    def _closing(self, start: int, end: int) -> bool:
        return all(
            self.blank[i] or _CLOSER.fullmatch(self.lines[i - 1]) for i in range(start, end + 1)
        )

    def windows(self, lo: int, hi: int, symbol: str) -> None:
        """Line windows of at most MAX_CHARS over lo..hi, overlapping by OVERLAP_LINES."""
        lines, i = self.lines, lo
        while i <= hi:
            while i <= hi and self.blank[i]:
                i += 1
            if i > hi:
                return
            if len(lines[i - 1]) > MAX_CHARS:
                self._hard_split(i, symbol)
                i += 1
                continue
            j = i
            while j < hi and self.size(i, j + 1) <= MAX_CHARS:
                j += 1
            end = j
            while self.blank[end]:
                end -= 1
            self.out.append(_Span(i, end, symbol))
            if j >= hi:
                return
            nxt = j + 1
            if len(lines[nxt - 1]) <= MAX_CHARS:
                while nxt > max(i + 1, j + 1 - OVERLAP_LINES) and (
                    self.size(nxt - 1, j + 1) <= MAX_CHARS
                ):
                    nxt -= 1
            i = nxt

    def _hard_split(self, i: int, symbol: str) -> None:
        """Slices of at most MAX_CHARS of over-long line ``i``; the last keeps the ending."""
        line = self.lines[i - 1]
        body = line.rstrip("\n").removesuffix("\r") if line.endswith("\n") else line
        ending = line[len(body) :]
        slices = [body[k : k + MAX_CHARS] for k in range(0, len(body), MAX_CHARS)]
        if ending and len(slices[-1]) + len(ending) <= MAX_CHARS:
            slices[-1] += ending
        self.out.extend(_Span(i, i, symbol, piece) for piece in slices if piece.strip())
