"""Which language a file is in, what kind of file it is, and where its definitions start.

One table, :data:`LANGUAGES` (the fields are :class:`LanguageSpec`'s); node type names were
checked by parsing samples with tree-sitter-language-pack 0.13.0.

Kinds (:func:`kind_for`), first match wins:

* ``docs``: prose (Markdown, reStructuredText, AsciiDoc, plain text), README, CHANGELOG,
  LICENSE and friends without a code extension, and HTML or files of no known language
  under a ``docs/`` or ``doc/`` folder;
* ``tests``: code or config under a test folder (``tests/``, ``test/``, ``__tests__/``,
  ``spec/``, ``specs/``, ``testdata/``), and code files named like tests (``test_*.py``,
  ``*_test.py``, ``conftest.py``, ``*_test.go``, ``*.test.ts``, ``*.spec.js``,
  ``*Test.java``, ``*_spec.rb``, ...);
* ``config``: data and build files: TOML, YAML, JSON, INI/cfg, XML, Dockerfile, Makefile,
  CMake, requirements*.txt, .env, ignore files;
* ``code``: everything else, including text of no known language.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["LANGUAGES", "LanguageSpec", "kind_for", "language_for", "spec_for"]


@dataclass(frozen=True)
class LanguageSpec:
    """One language: how files are recognised and where the chunker may cut them."""

    name: str
    extensions: tuple[str, ...] = ()  # lower case, with the dot
    filenames: tuple[str, ...] = ()  # exact base names
    grammar: str | None = None  # tree-sitter grammar used to find definitions or headings
    definitions: frozenset[str] = frozenset()
    # Wrappers carry a definition's decorators or ``export``: one around a single definition
    # takes its place (its span becomes the definition's).
    wrappers: frozenset[str] = frozenset()
    attached: frozenset[str] = frozenset()  # kept with the definition below (besides comments)
    # For grammars without a ``name`` field (Kotlin): a definition's name is its first
    # direct child of one of these types.
    names: frozenset[str] = frozenset()
    # Consecutive definitions of one name are one (Haskell's equations, Elixir's clauses).
    clauses: bool = False
    kind: str = "code"  # "code", "docs" or "config" (tests are decided by path)


def _f(*groups: str) -> frozenset[str]:
    """The node type names in ``groups`` (each a space-separated list)."""
    return frozenset(name for group in groups for name in group.split())


_JS_DEFS = _f(
    "function_declaration generator_function_declaration class_declaration method_definition",
    "variable_declarator",  # only when its value is a function or class (see chunk.py)
)
_TS_DEFS = _JS_DEFS | _f(
    "abstract_class_declaration interface_declaration enum_declaration type_alias_declaration",
    "internal_module",  # namespace N { ... }
    "module",  # declare module "m" { ... }
    "function_signature abstract_method_signature",
)
_JS_WRAPPERS = _f("export_statement lexical_declaration variable_declaration")
_TS_WRAPPERS = _JS_WRAPPERS | _f("ambient_declaration expression_statement")
_C_DEFS = _f(
    "function_definition type_definition",
    # only with a body (see chunk.py)
    "struct_specifier union_specifier enum_specifier",
)

# TypeScript and TSX differ only in their grammar and extensions.
_typescript = functools.partial(
    LanguageSpec, definitions=_TS_DEFS, wrappers=_TS_WRAPPERS, attached=_f("decorator")
)

LANGUAGES: tuple[LanguageSpec, ...] = (
    LanguageSpec(
        "python",
        (".py", ".pyi", ".pyw"),
        grammar="python",
        definitions=_f(
            "function_definition class_definition",
            "if_statement",  # only a module's own `if __name__ == "__main__":`
        ),
        wrappers=_f("decorated_definition"),
    ),
    LanguageSpec(
        "javascript",
        (".js", ".mjs", ".cjs", ".jsx"),
        grammar="javascript",
        definitions=_JS_DEFS,
        wrappers=_JS_WRAPPERS,
        attached=_f("decorator"),
    ),
    _typescript("typescript", (".ts", ".mts", ".cts"), grammar="typescript"),
    _typescript("tsx", (".tsx",), grammar="tsx"),
    LanguageSpec(
        "go",
        (".go",),
        grammar="go",
        definitions=_f("function_declaration method_declaration type_spec type_alias"),
        wrappers=_f("type_declaration"),
    ),
    LanguageSpec(
        "rust",
        (".rs",),
        grammar="rust",
        definitions=_f(
            "function_item function_signature_item struct_item enum_item union_item trait_item",
            "impl_item macro_definition",
            "mod_item",  # only with a body
        ),
        attached=_f("attribute_item"),
    ),
    LanguageSpec(
        "java",
        (".java",),
        grammar="java",
        definitions=_f(
            "class_declaration interface_declaration enum_declaration record_declaration",
            "annotation_type_declaration method_declaration constructor_declaration",
            "compact_constructor_declaration",
        ),
        attached=_f("marker_annotation annotation"),
    ),
    LanguageSpec("c", (".c", ".h"), grammar="c", definitions=_C_DEFS),
    LanguageSpec(
        "cpp",
        (".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp", ".tpp", ".inl"),
        grammar="cpp",
        definitions=_C_DEFS | _f("class_specifier namespace_definition concept_definition"),
        wrappers=_f("template_declaration"),
    ),
    LanguageSpec(
        "ruby",
        (".rb", ".rake", ".gemspec", ".ru"),
        ("Rakefile", "Gemfile", "Guardfile", "Vagrantfile"),
        grammar="ruby",
        definitions=_f("method singleton_method class module singleton_class"),
    ),
    LanguageSpec(
        "kotlin",
        (".kt", ".kts"),
        grammar="kotlin",
        definitions=_f(
            "class_declaration object_declaration companion_object function_declaration",
            "secondary_constructor type_alias",
        ),
        names=_f("type_identifier simple_identifier"),
    ),
    LanguageSpec(
        "scala",
        (".scala", ".sc"),
        grammar="scala",
        definitions=_f(
            "class_definition object_definition trait_definition enum_definition",
            "function_definition function_declaration given_definition package_object",
            "type_definition",
        ),
        attached=_f("annotation"),
    ),
    LanguageSpec(
        "swift",
        (".swift",),
        grammar="swift",
        definitions=_f(
            "class_declaration protocol_declaration function_declaration init_declaration",
            "deinit_declaration protocol_function_declaration subscript_declaration",
            "typealias_declaration",
        ),
    ),
    LanguageSpec(
        "csharp",
        (".cs",),
        grammar="csharp",
        definitions=_f(
            "class_declaration struct_declaration interface_declaration enum_declaration",
            "record_declaration method_declaration constructor_declaration",
            "destructor_declaration operator_declaration property_declaration",
            "delegate_declaration local_function_statement",
        ),
        attached=_f("attribute_list"),
    ),
    LanguageSpec(
        "php",
        (".php", ".phtml"),
        grammar="php",
        definitions=_f(
            "class_declaration interface_declaration trait_declaration enum_declaration",
            "function_definition method_declaration",
        ),
        attached=_f("attribute_list"),
    ),
    LanguageSpec(
        "elixir",
        (".ex", ".exs"),
        grammar="elixir",
        definitions=_f("call"),  # only def, defp, defmodule, ... (see chunk.py)
        attached=_f("unary_operator"),  # @doc, @spec and other module attributes
        clauses=True,
    ),
    LanguageSpec(
        "haskell",
        (".hs", ".lhs"),
        grammar="haskell",
        definitions=_f(
            "function bind data_type newtype type_synomym type_family data_family",
            "class instance",
        ),
        attached=_f("signature haddock pragma"),
        clauses=True,
    ),
    LanguageSpec(
        "lua",
        (".lua",),
        grammar="lua",
        definitions=_f(
            "function_declaration",
            "assignment_statement",  # only when its value is a function (see chunk.py)
        ),
        wrappers=_f("variable_declaration"),
    ),
    LanguageSpec(
        "zig",
        (".zig",),
        grammar="zig",
        # Decl: only a function or a struct/enum/union/opaque constant (see chunk.py)
        definitions=_f("Decl TestDecl"),
        attached=_f("doc_comment"),
    ),
    LanguageSpec(
        "shell",
        (".sh", ".bash", ".zsh", ".bats", ".ksh"),
        grammar="bash",
        definitions=_f("function_definition"),
    ),
    # Prose: Markdown and reStructuredText are cut at headings.
    LanguageSpec(
        "markdown", (".md", ".markdown", ".mdown", ".mkd"), grammar="markdown", kind="docs"
    ),
    LanguageSpec("rst", (".rst", ".rest"), grammar="rst", kind="docs"),
    LanguageSpec("asciidoc", (".adoc", ".asciidoc"), kind="docs"),
    LanguageSpec("text", (".txt", ".text"), kind="docs"),
    # Config: line windows.
    LanguageSpec("toml", (".toml",), ("Pipfile", "Cargo.lock", "poetry.lock"), kind="config"),
    LanguageSpec("yaml", (".yaml", ".yml"), kind="config"),
    LanguageSpec("json", (".json", ".jsonc", ".json5", ".jsonl"), kind="config"),
    LanguageSpec(
        "ini",
        (".ini", ".cfg", ".conf", ".properties"),
        (".editorconfig", ".flake8", ".pylintrc", ".npmrc", ".coveragerc"),
        kind="config",
    ),
    LanguageSpec("xml", (".xml", ".plist", ".xsd"), kind="config"),
    LanguageSpec("dockerfile", (".dockerfile",), ("Dockerfile", "Containerfile"), kind="config"),
    LanguageSpec("make", (".mk",), ("Makefile", "makefile", "GNUmakefile"), kind="config"),
    LanguageSpec("cmake", (".cmake",), ("CMakeLists.txt",), kind="config"),
    LanguageSpec("requirements", (), (), kind="config"),  # requirements*.txt, by pattern
    LanguageSpec("dotenv", (".env",), (), kind="config"),  # and .env.*, by pattern
    LanguageSpec(
        "ignore",
        (),
        (".gitignore", ".dockerignore", ".gitattributes", ".npmignore", ".hgignore"),
        kind="config",
    ),
    # Other code: line windows.
    LanguageSpec("fish", (".fish",)),
    LanguageSpec("sql", (".sql",)),
    LanguageSpec("html", (".html", ".htm")),
    LanguageSpec("css", (".css", ".scss", ".sass", ".less")),
    LanguageSpec("objc", (".m", ".mm")),
    LanguageSpec("cuda", (".cu", ".cuh")),
    LanguageSpec("proto", (".proto",)),
)

_BY_NAME = {spec.name: spec for spec in LANGUAGES}
_BY_EXT = {ext: spec.name for spec in LANGUAGES for ext in spec.extensions}
_BY_FILENAME = {name: spec.name for spec in LANGUAGES for name in spec.filenames}

# Prose files known by name, with or without an extension: README, README.txt, CHANGELOG.md.
_PROSE_NAME = re.compile(
    r"(?i)^(readme|changelog|changes|history|news|license|licence|copying|notice|authors"
    r"|contributors|contributing|code_of_conduct|security|support|todo"
    r"|pkg-info|metadata)([._-].*)?$"  # a package's metadata: its README and changelog
)
_DOCS_DIRS = frozenset({"docs", "doc", "documentation"})
_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testdata"})
_TEST_NAME = re.compile(
    r"^(?:test_.+\.\w+"  # test_x.py, test_x.c
    r"|conftest\.py"
    r"|.+_(?:test|tests|spec)\.\w+"  # x_test.go, x_test.py, x_spec.rb
    r"|.+\.(?:test|spec)\.[cm]?[jt]sx?"  # x.test.ts, x.spec.js
    r"|.+(?:Test|Tests|IT|Spec)\.(?:java|kt|kts|scala|groovy|cs|swift))$"  # FooTest.java
)


def spec_for(language: str | None) -> LanguageSpec | None:
    """The table row of ``language`` (a name returned by :func:`language_for`)."""
    return _BY_NAME.get(language) if language else None


def language_for(relpath: str) -> str | None:
    """The language of ``relpath`` by file name and extension; ``None`` when unknown."""
    name = relpath.replace("\\", "/").rsplit("/", 1)[-1]
    if name in _BY_FILENAME:
        return _BY_FILENAME[name]
    lower = name.lower()
    if lower.startswith("requirements") and lower.endswith((".txt", ".in")):
        return "requirements"
    if lower == ".env" or lower.startswith(".env."):
        return "dotenv"
    if lower.startswith(("dockerfile.", "containerfile.")):
        return "dockerfile"
    dot = lower.rfind(".")
    if dot > 0 and lower[dot:] in _BY_EXT:
        return _BY_EXT[lower[dot:]]
    if _PROSE_NAME.match(name):
        return "text"
    return None


def kind_for(relpath: str, language: str | None) -> str:
    """``"docs"``, ``"tests"``, ``"config"`` or ``"code"`` for a file (rules in the module doc)."""
    parts = relpath.replace("\\", "/").split("/")
    name, dirs = parts[-1], {part.lower() for part in parts[:-1]}
    spec = spec_for(language)
    kind = spec.kind if spec else "code"
    if kind == "docs" or (spec is None and (_PROSE_NAME.match(name) or dirs & _DOCS_DIRS)):
        return "docs"
    if language == "html" and dirs & _DOCS_DIRS:
        return "docs"
    if dirs & _TEST_DIRS or (kind == "code" and _TEST_NAME.match(name)):
        return "tests"
    return kind
