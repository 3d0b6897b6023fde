"""The chunker: exact spans and symbols per language on small fixtures, the 800-character
budget, 2 lines of overlap in a split definition, doc comments and decorators kept with
their definition, Markdown/RST heading paths, and text that must never make it raise."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import pytest

from anekit.search import chunk as chunk_module
from anekit.search.chunk import (
    KINDS,
    MAX_CHARS,
    OVERLAP_LINES,
    Chunk,
    chunk_file,
    kind_for,
    language_for,
    model_text,
)
from anekit.search.languages import spec_for

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "chunking"


def read(name: str) -> str:
    """A fixture exactly as stored (no newline translation)."""
    return (FIXTURES / name).read_bytes().decode("utf-8")


def lines_of(text: str) -> list[str]:
    """Lines with their endings, split at "\\n" only (written apart from chunk.split_lines)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def spans(chunks: list[Chunk]) -> list[tuple[int, int, str]]:
    return [(c.start_line, c.end_line, c.symbol) for c in chunks]


def by_symbol(chunks: list[Chunk], symbol: str) -> Chunk:
    (found,) = [c for c in chunks if c.symbol == symbol]
    return found


def check(text: str, chunks: list[Chunk]) -> None:
    """The invariants of any chunking: exact text, budget, order, every line covered."""
    lines = lines_of(text)
    covered: set[int] = set()
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines), c
        assert 0 < len(c.text) <= MAX_CHARS, c
        assert c.kind in KINDS
        whole = "".join(lines[c.start_line - 1 : c.end_line])
        if c.text != whole:  # only a slice of one over-long line may differ
            assert c.start_line == c.end_line, c
            assert len(whole) > MAX_CHARS and c.text in whole, c
        covered.update(range(c.start_line, c.end_line + 1))
    assert [c.start_line for c in chunks] == sorted(c.start_line for c in chunks)
    missing = [i + 1 for i, line in enumerate(lines) if line.strip() and i + 1 not in covered]
    assert missing == []


# (fixture, expected (start, end, symbol) per chunk, (symbol, first line of its chunk, a line
# that must be in it) for a definition with a doc comment or decorators above it)
CASES = [
    (
        "session.py",
        [
            (1, 9, ""),
            (12, 18, "Retry"),
            (21, 33, "Session"),
            (35, 40, "Session > delay"),
            (42, 57, "Session > request"),
            (56, 61, "Session > request"),
            (63, 64, "Session > close"),
            (67, 69, "connect"),
        ],
        ("Session > delay", "    # Exponential backoff", "    @staticmethod\n"),
    ),
    (
        "client.js",
        [
            (1, 3, ""),
            (5, 13, "joinUrl"),
            (15, 16, "backoff"),
            (18, 26, "Client"),
            (28, 47, "Client > getJson"),
        ],
        ("Client > getJson", "  /**", "   * @param {string} path\n"),
    ),
    (
        "store.ts",
        [
            (1, 1, ""),
            (3, 10, ""),
            (12, 18, "Store"),
            (20, 26, "Store > subscribe"),
            (28, 44, "Store > put"),
            (46, 49, "Mode"),
        ],
        ("Store > put", "  /**", "  @logged\n"),
    ),
    (
        "server.go",
        [
            (1, 8, ""),
            (10, 26, ""),
            (28, 52, "Server > ServeHTTP"),
            (51, 55, "Server > ServeHTTP"),
            (57, 62, "Server > Hits"),
        ],
        ("Server > ServeHTTP", "// ServeHTTP implements", "// replaces it with"),
    ),
    (
        "cache.rs",
        [
            (1, 4, ""),
            (6, 13, "LruCache"),
            (15, 19, "impl LruCache<K, V>"),
            (21, 29, "impl LruCache<K, V> > get"),
            (31, 48, "impl LruCache<K, V> > put"),
            (50, 59, ""),
            (61, 72, "tests"),
        ],
        ("LruCache", "/// A cache that holds", "#[derive(Debug, Clone)]\n"),
    ),
    (
        "RateLimiter.java",
        [
            (1, 4, ""),
            (6, 16, "RateLimiter"),
            (18, 25, "RateLimiter > RateLimiter"),
            (27, 44, "RateLimiter > tryAcquire"),
            (46, 55, "RateLimiter > refill"),
        ],
        ("RateLimiter > tryAcquire", "    /**", "    @Override\n"),
    ),
    (
        "ring.c",
        [
            (1, 4, ""),
            (6, 12, "ring"),
            (14, 26, "ring_new"),
            (28, 32, "ring_used"),
            (34, 51, "ring_write"),
        ],
        ("ring_new", "/*", " * Returns NULL when out of memory.\n"),
    ),
    (
        "tokenizer.cpp",
        [
            (1, 2, ""),
            (4, 4, "text"),
            (6, 15, "text > Tokenizer"),
            (17, 34, "text > Tokenizer::split"),
            (36, 42, "text > larger"),
        ],
        ("text > larger", "/// The larger of two values.", "template <typename T>\n"),
    ),
    (
        "inventory.rb",
        [
            (1, 3, ""),
            (5, 7, "Shop"),
            (9, 22, "Shop > Inventory"),
            (24, 31, "Shop > Inventory > remove"),
            (33, 42, "Shop > Inventory"),
        ],
        ("Shop > Inventory > remove", "    # Removes +count+", "    def remove("),
    ),
    (
        "Pipeline.kt",
        [
            (1, 5, ""),
            (7, 16, ""),
            (18, 25, "Pipeline"),
            (27, 43, "Pipeline > run"),
            (45, 50, "Pipeline"),
            (52, 62, ""),
        ],
        ("Pipeline", "/**", "@OptIn(ExperimentalCoroutinesApi::class)\n"),
    ),
    (
        "Parser.scala",
        [
            (1, 3, ""),
            (5, 10, ""),
            (12, 26, "Parser"),
            (28, 34, "Parser"),
            (36, 43, "Parser > token"),
            (45, 50, "Parser"),
        ],
        ("Parser > token", "  /** Accepts one token", "  def token(kind: String)"),
    ),
    (
        "Router.swift",
        [
            (1, 1, ""),
            (3, 19, ""),
            (21, 30, "Router"),
            (32, 37, "Router > add"),
            (39, 57, "Router > dispatch"),
            (59, 64, "Router"),
        ],
        ("Router > add", "    @discardableResult\n", "func add("),
    ),
    (
        "Cache.cs",
        [
            (1, 6, ""),
            (7, 21, ""),
            (23, 41, "LruCache"),
            (43, 56, "LruCache > TryGet"),
            (58, 63, "LruCache > Put"),
            (65, 71, "LruCache > Evict"),
            (73, 80, "LruCache > Node"),
        ],
        ("LruCache", "    /// <summary>", '    [DebuggerDisplay("Count = {Count}")]\n'),
    ),
    (
        "Logger.php",
        [
            (1, 8, ""),
            (10, 33, ""),
            (35, 45, "Logger"),
            (47, 51, "Logger > __construct"),
            (53, 68, "Logger > log"),
            (70, 74, "Logger > handle"),
            (76, 80, "format_context"),
        ],
        ("Logger", "/**", "final class Logger implements HandlerInterface\n"),
    ),
    (
        "router.ex",
        [
            (1, 12, "MyApp.Router"),
            (14, 26, "MyApp.Router > match"),
            (28, 36, "MyApp.Router"),
            (38, 52, "MyApp.Router > find_route"),
            (54, 58, "MyApp.Router > bind"),
            (60, 67, "MyApp.Router.Route"),
            (69, 76, "MyApp.Describe"),
        ],
        ("MyApp.Router > match", '  @doc """', "  @spec match(String.t(), String.t())"),
    ),
    (
        "Shapes.hs",
        [
            (1, 12, ""),
            (14, 30, ""),
            (32, 38, "instance HasArea Shape"),
            (40, 45, "describe"),
            (47, 48, "totalArea"),
            (50, 57, "shoelace"),
            (59, 72, "centroid"),
            (74, 78, "dist"),
        ],
        (
            "centroid",
            "-- | The centre of mass",
            "centroid :: [Point] -> Point\ncentroid [] = (0, 0)\n",
        ),
    ),
    (
        "config.lua",
        [
            (1, 16, ""),
            (18, 24, "merge"),
            (26, 45, "M.setup"),
            (47, 51, "M:reload"),
            (53, 58, "M.on_attach"),
            (60, 60, ""),
        ],
        ("merge", "---Deep-merges", "---@param b table|nil\n"),
    ),
    (
        "args.zig",
        [
            (1, 2, ""),
            (4, 11, ""),
            (13, 23, "Parser"),
            (25, 42, "Parser > next"),
            (44, 48, "parseInt"),
            (50, 52, "isFlag"),
            (54, 59, 'test "splits options and flags"'),
            (61, 63, 'test "parses hex"'),
        ],
        ("Parser", "/// Splits command-line arguments", "pub const Parser = struct {\n"),
    ),
    (
        "deploy.sh",
        [
            (1, 8, ""),
            (10, 13, "log"),
            (15, 34, "deploy"),
            (36, 47, ""),
        ],
        ("deploy", "# Picks the host", "function deploy {\n"),
    ),
    (
        "format.h",
        [
            (1, 11, ""),
            (13, 13, "fmt"),
            (14, 30, "fmt > detail"),
            (32, 37, "fmt > format_error"),
            (39, 39, "fmt > append"),
            (41, 45, "fmt > append"),
            (47, 65, "fmt > format"),
            (67, 67, ""),
        ],
        ("fmt > format", "/// Replaces each `{}`", "template <typename... Args>\n"),
    ),
    (
        "guide.md",
        [
            (1, 5, ""),
            (7, 24, "Installation"),
            (26, 32, "Configuration"),
            (34, 47, "Configuration > Paths"),
            (49, 52, "Configuration > Paths > Cache"),
            (54, 56, "Configuration > Logging"),
        ],
        ("Installation", "# Installation", "# a comment, not a heading\n"),
    ),
    (
        "overview.rst",
        [(1, 6, "Overview"), (8, 21, "Overview > Parsing"), (23, 28, "Overview > Formatting")],
        ("Overview > Parsing", "Parsing", "Errors\n~~~~~~\n"),
    ),
]


@pytest.mark.parametrize(("name", "expected", "attached"), CASES, ids=[c[0] for c in CASES])
def test_fixture_spans_and_symbols(
    name: str, expected: list[tuple[int, int, str]], attached: tuple[str, str, str]
) -> None:
    text = read(name)
    chunks = chunk_file(f"src/{name}", text)
    assert spans(chunks) == expected
    check(text, chunks)
    symbol, first_line, inside = attached
    found = next(c for c in chunks if c.symbol == symbol)
    assert found.text.startswith(first_line)
    assert inside in found.text


def test_python_decorators_and_docstring_stay_with_the_definition() -> None:
    chunks = chunk_file("pkg/session.py", read("session.py"))
    retry = by_symbol(chunks, "Retry")
    assert retry.text.splitlines()[:4] == [
        "# Shared by every session of a host.",
        "@dataclass(frozen=True)",
        "class Retry:",
        '    """How often and how long to retry."""',
    ]
    # The chunk before ends above the comment: nothing of Retry is cut off into it.
    assert chunks[0].end_line == 9 and "Retry" not in chunks[0].text


def test_split_definition_overlaps_by_two_lines_and_definition_cuts_do_not() -> None:
    for name, symbol in [("session.py", "Session > request"), ("server.go", "Server > ServeHTTP")]:
        text = read(name)
        chunks = chunk_file(f"src/{name}", text)
        parts = [c for c in chunks if c.symbol == symbol]
        assert len(parts) == 2
        first, second = parts
        assert first.end_line - second.start_line + 1 == OVERLAP_LINES
        assert first.text.splitlines()[-OVERLAP_LINES:] == second.text.splitlines()[:2]
        # Greedy: the first window could not take one more line.
        extra = lines_of(text)[first.end_line]
        assert len(first.text) + len(extra) > MAX_CHARS
        others = [c for c in chunks if c.symbol != symbol]
        for a, b in itertools.pairwise(chunks):
            if a in others or b in others:
                assert a.end_line < b.start_line, (a, b)


def test_small_definitions_share_a_chunk_and_large_ones_start_their_own() -> None:
    small = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(3))
    chunks = chunk_file("m.py", small)
    assert spans(chunks) == [(1, 10, "")]
    body = "".join(f"    y = x * {i}  # step {i} of the computation\n" for i in range(6))
    large = f"def big(x):\n{body}    return y\n"
    chunks = chunk_file("m.py", small + large + "\n\n" + small)
    assert spans(chunks) == [(1, 10, ""), (13, 20, "big"), (23, 32, "")]
    assert chunks[1].text == large


def test_a_python_main_block_is_named_main() -> None:
    """``if __name__ == "__main__":`` (either way round) is a definition named ``__main__``,
    what it defines nested in it; another ``if``, or the guard inside a function, is not a
    definition."""
    body = "".join(f"    print(render(row_{i}, width={i}))  # demo row {i}\n" for i in range(14))
    inner = "".join(f"        total += {i}  # the sum of the demo, step {i}\n" for i in range(6))
    guarded = "".join(f"        return {i}  # no debugging here, case {i}\n" for i in range(6))
    for guard in ('__name__ == "__main__"', "'__main__' == __name__"):
        text = (
            f"import sys\n\n\nif DEBUG:\n\n    def trace(x):\n{guarded}\n\n"
            f"def check():\n{inner[4:].replace(chr(10) + '    ', chr(10))}\n"
            f"    if {guard}:\n{guarded * 2}\n\n"
            f"if {guard}:  # pragma: no cover\n{body}\n"
            f"    def demo(total):\n{inner}        return total\n\n    demo(0)\n"
        )
        chunks = chunk_file("pkg/render.py", text)
        check(text, chunks)
        symbols = [c.symbol for c in chunks]
        assert "trace" in symbols and "__main__ > demo" in symbols, symbols
        assert "check" in symbols and "check > __main__" not in symbols
        main = [c for c in chunks if c.text.startswith("if ")]
        assert [c.symbol for c in main if guard in c.text] == ["__main__"]
        assert chunks[-1].symbol == "__main__"  # the lines after demo: the block's


def test_nested_definitions_of_a_long_function_get_their_path() -> None:
    body = "".join(f"        total += {i} * value  # term {i} of the sum\n" for i in range(20))
    text = (
        "def build(values):\n"
        '    """Sums the weighted values."""\n'
        "\n"
        "    def weigh(value):\n"
        "        total = 0\n"
        f"{body}"
        "        return total\n"
        "\n"
        "    return sum(weigh(v) for v in values)\n"
    )
    chunks = chunk_file("b.py", text)
    assert spans(chunks) == [
        (1, 2, "build"),
        (4, 20, "build > weigh"),
        (19, 26, "build > weigh"),
        (28, 28, "build"),
    ]
    check(text, chunks)


def test_chunks_stay_within_the_budget_on_a_long_file() -> None:
    text = "\n\n".join(read(name) for name in ("session.py", "session.py", "session.py"))
    text += "\n" + "".join(f"VALUE_{i} = {i} * 3  # a module-level constant\n" for i in range(80))
    chunks = chunk_file("long.py", text)
    check(text, chunks)
    assert max(len(c.text) for c in chunks) <= MAX_CHARS
    constants = [c for c in chunks if "VALUE_" in c.text]
    assert len(constants) == 6 and {c.symbol for c in constants} == {""}


def test_windows_for_unknown_text_overlap_by_two_lines() -> None:
    text = "".join(
        f"line {i:03d} of a plain file with no known language at all\n" for i in range(60)
    )
    chunks = chunk_file("notes/data.unknown", text)
    check(text, chunks)
    assert [c.symbol for c in chunks] == [""] * len(chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 60
    lines = lines_of(text)
    for a, b in itertools.pairwise(chunks):
        assert a.end_line - b.start_line + 1 == OVERLAP_LINES
        assert len(a.text) + len(lines[a.end_line]) > MAX_CHARS  # as full as the budget allows


def test_crlf_line_endings_keep_spans_and_exact_text() -> None:
    lf = read("session.py")
    crlf = lf.replace("\n", "\r\n")
    chunks = chunk_file("pkg/session.py", crlf)
    assert spans(chunks) == spans(chunk_file("pkg/session.py", lf))
    check(crlf, chunks)
    assert all(c.text.endswith("\r\n") for c in chunks)
    assert by_symbol(chunks, "Retry").text.startswith("# Shared by every session of a host.\r\n")


def test_file_without_final_newline() -> None:
    text = 'def f():\n    return 1\n\n\ndef g():\n    return "no newline at the end"'
    chunks = chunk_file("x.py", text)
    assert spans(chunks) == [(1, 6, "")]
    assert chunks[0].text == text
    md = "# Title\n\nLast line without newline"
    assert [(c.start_line, c.end_line, c.symbol, c.text) for c in chunk_file("a.md", md)] == [
        (1, 3, "Title", md)
    ]
    plain = "one\ntwo"
    assert [(c.start_line, c.end_line, c.text) for c in chunk_file("a.cfg", plain)] == [
        (1, 2, plain)
    ]


def test_over_long_line_is_hard_split() -> None:
    long_line = "const table = [" + ", ".join(str(i) for i in range(600)) + "];\n"
    assert len(long_line) > 2 * MAX_CHARS
    text = "// Lookup table.\n" + long_line + "export const size = table.length;\n"
    chunks = chunk_file("table.js", text)
    check(text, chunks)
    middle = [c for c in chunks if c.start_line == 2]
    assert all(c.end_line == 2 for c in middle)
    assert "".join(c.text for c in middle) == long_line
    assert [len(c.text) for c in middle[:-1]] == [MAX_CHARS] * (len(middle) - 1)
    assert [(c.start_line, c.end_line) for c in chunks if c.start_line != 2] == [(1, 1), (3, 3)]


def test_over_long_line_inside_a_definition_keeps_its_symbol() -> None:
    text = "def data():\n    return [" + "1, " * 400 + "]\n"
    chunks = chunk_file("d.py", text)
    check(text, chunks)
    assert {c.symbol for c in chunks} == {"data"}
    assert (chunks[0].start_line, chunks[0].end_line) == (1, 1)
    assert all(c.start_line == c.end_line == 2 for c in chunks[1:])


def test_markdown_heading_paths_and_fences() -> None:
    text = read("guide.md")
    chunks = chunk_file("docs/guide.md", text)
    assert {c.kind for c in chunks} == {"docs"}
    # "# a comment, not a heading" is inside a code fence: not a cut.
    assert not any("a comment" in c.symbol for c in chunks)
    # A setext heading is a level-1 heading like "# Installation".
    configuration = by_symbol(chunks, "Configuration")
    assert configuration.text.startswith("Configuration\n=============\n")
    assert by_symbol(chunks, "Configuration > Paths > Cache").text.startswith("### Cache\n")


def test_model_text_carries_context_and_stored_text_stays_exact() -> None:
    chunks = chunk_file("pkg/session.py", read("session.py"))
    delay = by_symbol(chunks, "Session > delay")
    assert model_text("pkg/session.py", delay) == (
        "path: pkg/session.py\nsymbol: Session > delay\n\n" + delay.text
    )
    assert delay.text.startswith("    # Exponential backoff")
    assert model_text("pkg/session.py", chunks[0]) == "path: pkg/session.py\n\n" + chunks[0].text
    md = by_symbol(chunk_file("docs/guide.md", read("guide.md")), "Configuration > Paths")
    assert model_text("docs/guide.md", md).startswith(
        "path: docs/guide.md\nheading: Configuration > Paths\n\n## Paths\n"
    )


def test_empty_and_blank_files_give_no_chunks() -> None:
    for text in ("", "\n", "   \n\t\n\r\n", "\n" * 2000):
        assert chunk_file("x.py", text) == []
        assert chunk_file("x.md", text) == []
        assert chunk_file("x", text) == []


def test_parse_failure_falls_back_to_windows(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(grammar: str) -> object:
        raise RuntimeError("no parser")

    monkeypatch.setattr(chunk_module, "_parser", broken)
    text = read("session.py")
    with caplog.at_level("WARNING", logger="anekit.search.chunk"):
        chunks = chunk_file("pkg/session.py", text)
    check(text, chunks)
    assert {c.symbol for c in chunks} == {""}
    assert chunks[0].start_line == 1 and len(chunks) == 3
    assert [r.getMessage() for r in caplog.records] == [
        "pkg/session.py: chunked by line windows: its parse failed (no parser)"
    ]


def test_a_cpp_header_named_h_is_parsed_as_cpp_and_a_c_header_as_c() -> None:
    cpp = read("format.h")
    assert spans(chunk_file("include/fmt/format.h", cpp)) == spans(
        chunk_file("include/fmt/format.hpp", cpp)
    )
    c_header = read("ring.c")  # C: the same cuts as a .h as in a .c file
    assert spans(chunk_file("include/ring.h", c_header)) == spans(
        chunk_file("src/ring.c", c_header)
    )
    # and C++ that the C grammar reads differently (namespaces) is cut where C++ cuts
    c_spec = spec_for("c")
    assert c_spec is not None
    as_c = chunk_module._structured(c_spec, "c", cpp, chunk_module.split_lines(cpp))
    assert [(s.start, s.end, s.symbol) for s in as_c[0]] != spans(
        chunk_file("include/fmt/format.h", cpp)
    )


def test_junk_text_never_raises() -> None:
    rng = random.Random(20261201)
    samples = [
        "\x00" * 50 + "def \x00(:\n" * 30,
        "\r" * 900 + "x",
        "\ufeff\x0c\x0b\x1c\u2028\u2029\x85" * 200,
        "}" * 3000,
        "(" * 2000 + "\n" + "[" * 2000,
        "function f() {" * 300 + "}" * 300,
        "\n".join("#" * n for n in range(1, 12)) + "\n===\n---\n```\n# open fence",
        "\udcff\udc80 lone surrogates \ud800\n" * 40,
    ]
    for _ in range(10):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
        samples.append(data.decode("latin-1"))
        samples.append(data.decode("utf-8", "surrogateescape"))
    paths = ["a.py", "a.js", "a.ts", "a.tsx", "a.go", "a.rs", "a.java", "a.c", "a.cpp", "a.rb"]
    paths += ["a.kt", "a.scala", "a.swift", "a.cs", "a.php", "a.ex", "a.hs", "a.lua", "a.zig"]
    paths += ["a.sh", "a.h"]
    paths += ["a.md", "a.rst", "a.toml", "a.bin", "Makefile"]
    for text in samples:
        for path in paths:
            check(text, chunk_file(path, text))


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("src/a.py", "python"),
        ("types/a.pyi", "python"),
        ("web/app.js", "javascript"),
        ("web/app.jsx", "javascript"),
        ("web/app.mjs", "javascript"),
        ("web/app.ts", "typescript"),
        ("web/App.tsx", "tsx"),
        ("cmd/main.go", "go"),
        ("src/lib.rs", "rust"),
        ("src/Main.java", "java"),
        ("src/ring.c", "c"),
        ("include/ring.h", "c"),
        ("src/parse.cpp", "cpp"),
        ("src/parse.hpp", "cpp"),
        ("lib/shop.rb", "ruby"),
        ("Rakefile", "ruby"),
        ("src/Pipeline.kt", "kotlin"),
        ("build.gradle.kts", "kotlin"),
        ("core/Parser.scala", "scala"),
        ("Sources/Router.swift", "swift"),
        ("src/Cache.cs", "csharp"),
        ("src/Logger.php", "php"),
        ("lib/router.ex", "elixir"),
        ("test/router_test.exs", "elixir"),
        ("src/Shapes.hs", "haskell"),
        ("lua/plugin/config.lua", "lua"),
        ("src/args.zig", "zig"),
        ("bin/deploy.sh", "shell"),
        ("test/run.bats", "shell"),
        ("conf.d/env.fish", "fish"),
        ("README.md", "markdown"),
        ("docs/index.rst", "rst"),
        ("pyproject.toml", "toml"),
        (".github/workflows/ci.yml", "yaml"),
        ("package.json", "json"),
        ("setup.cfg", "ini"),
        ("Dockerfile", "dockerfile"),
        ("Makefile", "make"),
        ("requirements-dev.txt", "requirements"),
        (".env.local", "dotenv"),
        ("notes.txt", "text"),
        ("LICENSE", "text"),
        ("src/license.py", "python"),
        ("data/blob.xyz", None),
        ("bin/tool", None),
        ("SRC\\Windows.PY", "python"),
    ],
)
def test_language_for(path: str, language: str | None) -> None:
    assert language_for(path) == language


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("src/anekit/search/chunk.py", "code"),
        ("tests/search/test_chunk.py", "tests"),
        ("pkg/test_util.py", "tests"),
        ("pkg/util_test.py", "tests"),
        ("conftest.py", "tests"),
        ("server/handler_test.go", "tests"),
        ("web/app.test.ts", "tests"),
        ("web/app.spec.js", "tests"),
        ("web/__tests__/app.js", "tests"),
        ("src/test/java/FooTest.java", "tests"),
        ("app/FooTest.java", "tests"),
        ("spec/models/user_spec.rb", "tests"),
        ("tests/fixtures/data.json", "tests"),
        ("src/latest.py", "code"),
        ("src/contest.py", "code"),
        ("README.md", "docs"),
        ("CHANGELOG", "docs"),
        ("LICENSE", "docs"),
        ("docs/guide.rst", "docs"),
        ("docs/notes", "docs"),
        ("tests/README.md", "docs"),
        ("docs/conf.py", "code"),
        ("src/license.py", "code"),
        ("pyproject.toml", "config"),
        ("config/app.yaml", "config"),
        ("package.json", "config"),
        ("setup.cfg", "config"),
        ("Dockerfile", "config"),
        ("Makefile", "config"),
        ("requirements.txt", "config"),
        ("test_data.json", "config"),
        ("bin/tool", "code"),
    ],
)
def test_kind_for(path: str, kind: str) -> None:
    assert kind_for(path, language_for(path)) == kind


def test_chunks_carry_the_kind_of_their_file() -> None:
    text = read("session.py")
    assert {c.kind for c in chunk_file("tests/test_session.py", text)} == {"tests"}
    assert {c.kind for c in chunk_file("src/session.py", text)} == {"code"}
    assert {c.kind for c in chunk_file("pyproject.toml", "[tool]\nx = 1\n")} == {"config"}


def _long_docstring_function() -> str:
    doc = "".join(
        f"    Explains option number {i} of the parser at some length.\n" for i in range(40)
    )
    return (
        '"""Module docstring: what this file is for.\n\nMore words about it.\n"""\n\n'
        "import os\n\n\n"
        "def parse(text, strict=False):\n"
        '    """Parse the text.\n\n' + doc + '    """\n'
        "    tokens = text.split()\n"
        "    if strict and not tokens:\n"
        "        raise ValueError(text)\n"
        "    return [os.fspath(t) for t in tokens]\n"
    )


def test_prose_chunks_of_code_files_are_docs() -> None:
    """A long docstring split off its function is documentation, not the implementing
    code; the piece with the definition's first line stays code, as does its body."""
    text = _long_docstring_function()
    chunks = chunk_file("src/parser.py", text)
    assert len(chunks) >= 4
    head = next(c for c in chunks if "def parse(" in c.text)
    assert head.kind == "code" and head.symbol == "parse"
    body = next(c for c in chunks if "return [os.fspath" in c.text)
    assert body.kind == "code"
    middle = [c for c in chunks if head.start_line < c.start_line < body.start_line]
    assert middle and {c.kind for c in middle} == {"docs"}
    assert {c.symbol for c in middle} == {"parse"}  # still the function's
    assert all("Explains option" in c.text for c in middle)
    # The same file under tests/ is tests, prose or not.
    assert {c.kind for c in chunk_file("tests/test_parser.py", text)} == {"tests"}


def test_comment_blocks_are_prose_in_other_languages() -> None:
    comment = "".join(
        f"// note {i}: how the cache is evicted, at some length here.\n" for i in range(30)
    )
    text = "function evict(cache) {\n" + comment + "  return cache.pop();\n}\n"
    chunks = chunk_file("src/cache.js", text)
    kinds = [(c.kind, "function evict" in c.text, "cache.pop" in c.text) for c in chunks]
    assert ("code", True, False) in kinds and ("docs", False, False) in kinds
    assert all(kind == "code" for kind, _, has_code in kinds if has_code)
    # Strings that are values, not statements, are code.
    values = "".join(f'    "value number {i} of the table, which is data",\n' for i in range(40))
    table = "TABLE = [\n" + values + "]\n"
    assert {c.kind for c in chunk_file("src/table.py", table)} == {"code"}


def test_a_five_megabyte_generated_header_is_chunked_whole() -> None:
    """A generated C++ header of 5 MB (a table of inline functions in a namespace) is cut
    at its definitions like any other file, every line covered, nothing over budget."""
    body = "".join(
        f"inline int table_{n}(int x) {{ return x * {n % 97} + {n}; }}\n" for n in range(95_000)
    )
    text = f"// generated\n#pragma once\nnamespace gen {{\n{body}}}  // namespace gen\n"
    assert len(text) > 5_000_000
    chunks = chunk_file("include/gen/table.h", text)
    check(text, chunks)
    assert {c.symbol for c in chunks[1:-1]} == {"gen"}  # packed definitions inside gen
    assert len(chunks) > len(text) // MAX_CHARS
