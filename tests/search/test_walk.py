"""anekit.search.walk: which files code search reads, and why the others are left out."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anekit.errors import SearchError
from anekit.search.walk import (
    BINARY_PROBE_BYTES,
    MAX_FILE_BYTES,
    MINIFIED_MIN_BYTES,
    SKIP_REASONS,
    FileEntry,
    FileText,
    Skipped,
    check,
    read_file,
    walk,
)

needs_non_root = pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root reads files and directories whatever their permissions",
)


def make(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def relpaths(root: Path, paths: list[Path] | None = None) -> list[str]:
    return [f.relpath for f in walk(root, paths).files]


def skipped(root: Path) -> dict[str, str]:
    return {s.relpath: s.reason for s in walk(root).skipped}


def entry(root: Path, rel: str) -> FileEntry:
    st = (root / rel).stat()
    return FileEntry(root / rel, rel, st.st_size, st.st_mtime_ns)


# --- what is listed ---------------------------------------------------------------------------


def test_files_are_sorted_posix_relpaths_with_stat(tmp_path: Path) -> None:
    make(tmp_path, {"b.py": "bb", "a/z.py": "z", "a/b/c.py": "ccc", "a.py": ""})
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["a.py", "a/b/c.py", "a/z.py", "b.py"]
    c = result.files[1]
    assert c.path == tmp_path / "a" / "b" / "c.py" and c.path.is_absolute()
    st = c.path.stat()
    assert (c.size, c.mtime_ns) == (3, st.st_mtime_ns)
    assert result.skipped == [] and result.ignored == 0
    assert walk(tmp_path) == result


def test_empty_repository(tmp_path: Path) -> None:
    result = walk(tmp_path)
    assert (result.files, result.skipped, result.ignored) == ([], [], 0)
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("# nothing\n")
    result = walk(tmp_path)
    assert (result.files, result.skipped, result.ignored) == ([], [], 1)


def test_root_that_is_not_a_directory_raises(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("")
    for root in (tmp_path / "f.py", tmp_path / "missing"):
        with pytest.raises(SearchError, match=str(root)):
            walk(root)


# --- ignore rules -----------------------------------------------------------------------------


def test_gitignore_at_root_applies_at_every_depth(tmp_path: Path) -> None:
    make(tmp_path, {".gitignore": "*.log\n", "a.log": "", "x/y/b.log": "", "x/y/b.py": ""})
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["x/y/b.py"]
    assert result.ignored == 3  # .gitignore (hidden), a.log, x/y/b.log


def test_nested_gitignore_applies_only_below_its_directory(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "a/.gitignore": "*.txt\n",
            "a/x.txt": "",
            "a/sub/y.txt": "",
            "b/x.txt": "",
            "top.txt": "",
        },
    )
    assert relpaths(tmp_path) == ["b/x.txt", "top.txt"]


def test_negation_reincludes_in_same_file_and_from_deeper_file(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".gitignore": "*.txt\n!keep.txt\n",
            "keep.txt": "",
            "drop.txt": "",
            "sub/.gitignore": "!also.txt\n",
            "sub/also.txt": "",
            "sub/drop.txt": "",
            "other/also.txt": "",
        },
    )
    assert relpaths(tmp_path) == ["keep.txt", "sub/also.txt"]


def test_pattern_with_slash_is_anchored_to_its_gitignore_directory(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "a/.gitignore": "gen/out.py\n/top.py\n",
            "a/gen/out.py": "",
            "a/top.py": "",
            "a/x/gen/out.py": "",
            "a/x/top.py": "",
            "gen/out.py": "",
            "top.py": "",
        },
    )
    assert relpaths(tmp_path) == ["a/x/gen/out.py", "a/x/top.py", "gen/out.py", "top.py"]


def test_directory_pattern_matches_directories_not_files(tmp_path: Path) -> None:
    make(tmp_path, {".gitignore": "logs/\n", "logs/a.py": "", "src/logs": "file", "src/b.py": ""})
    assert relpaths(tmp_path) == ["src/b.py", "src/logs"]


def test_files_below_an_ignored_directory_cannot_be_reincluded(tmp_path: Path) -> None:
    make(tmp_path, {".gitignore": "gen/\n!gen/keep.py\n", "gen/keep.py": "", "gen/x.py": ""})
    result = walk(tmp_path)
    assert result.files == []
    assert result.ignored == 2  # .gitignore and gen/ (counted once)


def test_whitelist_idiom_reincludes_directories_but_not_their_other_files(tmp_path: Path) -> None:
    # "*" then "!*/": every directory is walked again, yet "*" still ignores files in them.
    make(tmp_path, {".gitignore": "*\n!*/\n!*.py\n", "a.txt": "", "src/m.py": "", "src/n.txt": ""})
    assert relpaths(tmp_path) == ["src/m.py"]


def test_double_star_ignores_the_contents_not_the_directory(tmp_path: Path) -> None:
    # "x/**" leaves x itself walked, so a file in it can be re-included (git's behaviour).
    make(tmp_path, {".gitignore": "x/**\n!x/keep.py\n", "x/keep.py": "", "x/drop.py": ""})
    assert relpaths(tmp_path) == ["x/keep.py"]


def test_anekitignore_applies_and_wins_over_gitignore_beside_it(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".gitignore": "*.md\n",
            ".anekitignore": "*.json\n!README.md\n",
            "README.md": "",
            "NOTES.md": "",
            "data.json": "",
            "sub/.anekitignore": "fixtures/\n",
            "sub/fixtures/f.py": "",
            "sub/m.py": "",
        },
    )
    assert relpaths(tmp_path) == ["README.md", "sub/m.py"]


def test_git_info_exclude_applies_from_root_and_loses_to_gitignore(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".git/info/exclude": "secret.py\n*.gen.py\n",
            ".git/config": "",
            "secret.py": "",
            "deep/secret.py": "",
            "a.gen.py": "",
            "ok/.gitignore": "!a.gen.py\n",
            "ok/a.gen.py": "",
            "main.py": "",
        },
    )
    assert relpaths(tmp_path) == ["main.py", "ok/a.gen.py"]


def test_invalid_gitignore_lines_are_dropped_not_fatal(tmp_path: Path) -> None:
    make(tmp_path, {".gitignore": "!\n[z-a]\n\\\n*.log\n", "a.log": "", "a.py": ""})
    assert relpaths(tmp_path) == ["a.py"]


def test_default_ignored_directories_at_any_depth(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "node_modules/x/index.js": "",
            "web/node_modules/y.js": "",
            "venv/lib/site.py": "",
            "pkg/__pycache__/m.cpython-311.pyc": "",
            "build/out.py": "",
            "dist/pkg.py": "",
            "target/debug/main.rs": "",
            "src/anekit.egg-info/PKG-INFO": "",
            "scripts/build": "#!/bin/sh\n",  # a file named like a default-ignored directory
            "src/main.py": "",
        },
    )
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["scripts/build", "src/main.py"]
    assert result.ignored == 8


def test_hidden_names_and_the_store_are_left_out(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            ".env": "SECRET=1",
            ".github/workflows/ci.yml": "",
            ".anekit/store.sqlite": "",
            "src/.hidden.py": "",
            "src/.cache/x.py": "",
            "src/ok.py": "",
        },
    )
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["src/ok.py"]
    assert result.ignored == 5


# --- skipped files ----------------------------------------------------------------------------


def test_too_large_is_skipped_from_stat(tmp_path: Path) -> None:
    with open(tmp_path / "big.txt", "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: cheap to make
    with open(tmp_path / "limit.txt", "wb") as f:
        f.truncate(MAX_FILE_BYTES)
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["limit.txt"]
    assert result.skipped == [Skipped("big.txt", "too large", f"{MAX_FILE_BYTES + 1} bytes")]


def test_non_regular_file_is_skipped_not_read(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tmp_path / "pipe")
    assert skipped(tmp_path) == {"pipe": "special file"}


def test_undecodable_file_name_is_skipped(tmp_path: Path) -> None:
    try:
        (tmp_path / os.fsdecode(b"bad\xff.py")).write_text("")
    except (OSError, UnicodeError):
        pytest.skip("the file system refuses non-UTF-8 names")
    (tmp_path / "ok.py").write_text("")
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["ok.py"]
    assert result.skipped == [Skipped("bad\\xff.py", "undecodable", "file name is not UTF-8")]


@needs_non_root
def test_unreadable_directory_and_file_with_chmod(tmp_path: Path) -> None:
    make(tmp_path, {"locked/a.py": "", "secret.py": "x", "ok.py": ""})
    (tmp_path / "locked").chmod(0)
    (tmp_path / "secret.py").chmod(0)
    try:
        result = walk(tmp_path)
        assert [s.reason for s in result.skipped] == ["unreadable"]
        assert result.skipped[0].relpath == "locked"
        assert [f.relpath for f in result.files] == ["ok.py", "secret.py"]  # stat still works
        outcome = read_file(result.files[1])
        assert isinstance(outcome, Skipped) and outcome.reason == "unreadable"
    finally:
        (tmp_path / "locked").chmod(0o755)
        (tmp_path / "secret.py").chmod(0o644)


def test_unreadable_directory_is_skipped_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(tmp_path, {"locked/a.py": "", "ok.py": ""})
    real_scandir = os.scandir
    locked = str(tmp_path / "locked")

    def scandir(path: str) -> Any:
        if path == locked:
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["ok.py"]
    assert result.skipped == [Skipped("locked", "unreadable", "Permission denied")]


def test_unreadable_root_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def scandir(path: str) -> Any:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(SearchError, match="Permission denied"):
        walk(tmp_path)


# --- symbolic links: never followed ----------------------------------------------------------


def test_symlinks_are_set_aside_whatever_they_point_at(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    make(outside, {"secret.txt": "password", "lib.py": "", "home/serve/token": "ab" * 32})
    make(root, {"real.py": "abc", "z/m.py": "", ".env": "TOKEN=1"})
    links = {
        "etc": outside,  # a folder out of the root
        "creds.txt": outside / "secret.txt",  # a file out of the root
        "everything": Path("/"),
        "alias.py": Path("real.py"),  # inside: found under its own path already
        "dotenv": Path(".env"),  # inside, but hidden: never shown
        "store": Path(".anekit"),
        "token": outside / "home" / "serve" / "token",  # the daemon's bearer token
        "a_link": Path("z"),
        "up": Path(".."),
        "self": Path("self"),  # a loop
        "broken.py": Path("missing.py"),
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    result = walk(root)
    assert [f.relpath for f in result.files] == ["real.py", "z/m.py"]
    assert {s.relpath: s.reason for s in result.skipped} == dict.fromkeys(links, "symlink")
    assert Skipped("etc", "symlink", f"-> {outside}") in result.skipped


def test_a_symlink_named_in_paths_or_above_them_is_set_aside(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    make(outside, {"sub/secret.py": "x"})
    make(root, {"ok.py": ""})
    (root / "ext").symlink_to(outside)
    result = walk(root, [root / "ext"])
    assert (result.files, result.skipped) == ([], [Skipped("ext", "symlink", f"-> {outside}")])
    result = walk(root, [root / "ext" / "sub" / "secret.py"])
    assert (result.files, [s.relpath for s in result.skipped]) == ([], ["ext"])


def test_a_root_reached_through_a_symlink_is_walked(tmp_path: Path) -> None:
    make(tmp_path / "real", {"a.py": ""})
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert relpaths(tmp_path / "alias") == ["a.py"]
    assert relpaths(tmp_path / "alias", [tmp_path / "real" / "a.py"]) == ["a.py"]


def test_ignored_symlinks_are_not_reported(tmp_path: Path) -> None:
    # git matches a link as a file: "loop" ignores the link, "loop/" would not
    make(tmp_path, {".gitignore": "broken.py\nloop\n", "d/m.py": ""})
    (tmp_path / "broken.py").symlink_to("missing.py")
    (tmp_path / "loop").symlink_to(".")
    result = walk(tmp_path)
    assert (result.skipped, result.ignored) == ([], 3)


def test_a_symlinked_ignore_file_is_not_read(tmp_path: Path) -> None:
    make(tmp_path, {"rules": "*.py\n", "a.py": ""})
    (tmp_path / ".gitignore").symlink_to("rules")
    assert relpaths(tmp_path) == ["a.py", "rules"]


def test_read_file_refuses_a_file_swapped_for_a_link_after_the_walk(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    make(outside, {"secret.txt": "password", "d/secret.txt": "password"})
    make(root, {"a.txt": "fine", "d/secret.txt": "fine"})
    found = {f.relpath: f for f in walk(root).files}
    (root / "a.txt").unlink()
    (root / "a.txt").symlink_to(outside / "secret.txt")
    (root / "d" / "secret.txt").unlink()
    (root / "d").rmdir()
    (root / "d").symlink_to(outside / "d")
    for rel in ("a.txt", "d/secret.txt"):
        outcome = read_file(found[rel])
        assert isinstance(outcome, Skipped) and outcome.reason == "symlink", outcome


# --- files that change during the walk --------------------------------------------------------


@pytest.fixture
def vanishing(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Names that os.scandir lists and then deletes before the walker looks at them."""
    names: set[str] = set()
    real_scandir = os.scandir

    class Listing:
        def __init__(self, path: str) -> None:
            with real_scandir(path) as it:
                self.entries = list(it)
            for e in self.entries:
                if e.name in names:
                    if e.is_dir(follow_symlinks=False):
                        os.rmdir(e.path)
                    else:
                        os.remove(e.path)

        def __enter__(self) -> Iterator[os.DirEntry[str]]:
            return iter(self.entries)

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(os, "scandir", Listing)
    return names


def test_file_and_directory_that_disappear_mid_walk(tmp_path: Path, vanishing: set[str]) -> None:
    make(tmp_path, {"gone.py": "", "stays.py": ""})
    (tmp_path / "gonedir").mkdir()
    vanishing.update({"gone.py", "gonedir"})
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["stays.py"]
    assert {s.relpath: s.reason for s in result.skipped} == {
        "gone.py": "vanished",
        "gonedir": "vanished",
    }


def test_file_that_disappears_before_it_is_read(tmp_path: Path) -> None:
    make(tmp_path, {"a.py": "x"})
    (found,) = walk(tmp_path).files
    (tmp_path / "a.py").unlink()
    outcome = read_file(found)
    assert isinstance(outcome, Skipped)
    assert (outcome.relpath, outcome.reason) == ("a.py", "vanished")


# --- read_file --------------------------------------------------------------------------------


def test_read_file_returns_exact_bytes_and_text_without_bom(tmp_path: Path) -> None:
    data = b"\xef\xbb\xbfx = '\xc3\xa9'\r\n"
    make(tmp_path, {"a.py": data})
    assert read_file(entry(tmp_path, "a.py")) == FileText(data=data, text="x = 'é'\r\n")


def test_read_file_binary_only_by_nul_within_probe(tmp_path: Path) -> None:
    make(
        tmp_path,
        {
            "in.bin": b"a" * (BINARY_PROBE_BYTES - 1) + b"\0",
            "after.txt": b"a" * BINARY_PROBE_BYTES + b"\0",
        },
    )
    assert read_file(entry(tmp_path, "in.bin")) == Skipped("in.bin", "binary", "NUL byte")
    outcome = read_file(entry(tmp_path, "after.txt"))
    assert isinstance(outcome, FileText) and outcome.text.endswith("a\0")


def test_read_file_undecodable_names_the_byte_offset(tmp_path: Path) -> None:
    make(tmp_path, {"latin1.txt": b"caf" + "é".encode("latin-1")})
    outcome = read_file(entry(tmp_path, "latin1.txt"))
    assert outcome == Skipped("latin1.txt", "undecodable", "not UTF-8 at byte 3")


def test_read_file_grown_past_the_limit_is_too_large(tmp_path: Path) -> None:
    make(tmp_path, {"log.txt": "small"})
    found = entry(tmp_path, "log.txt")
    with open(tmp_path / "log.txt", "ab") as f:
        f.truncate(MAX_FILE_BYTES + 1)
    outcome = read_file(found)
    assert isinstance(outcome, Skipped) and outcome.reason == "too large"


def test_read_file_os_error_is_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make(tmp_path, {"a.py": "x"})

    def denied(path: Any, flags: int, **options: Any) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", denied)
    assert read_file(entry(tmp_path, "a.py")) == Skipped("a.py", "unreadable", "Permission denied")


def test_read_file_of_a_fifo_does_not_hang(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tmp_path / "pipe")
    fake = FileEntry(tmp_path / "pipe", "pipe", 0, 0)
    assert read_file(fake) == Skipped("pipe", "special file", "not a regular file")


def test_skipped_by_reason_counts_every_reason(tmp_path: Path) -> None:
    make(tmp_path, {"ok.py": ""})
    (tmp_path / "b1").symlink_to("x")
    (tmp_path / "b2").symlink_to("y")
    (tmp_path / "up").symlink_to(".")
    counts = walk(tmp_path).skipped_by_reason()
    assert list(counts) == list(SKIP_REASONS)
    assert counts == dict.fromkeys(SKIP_REASONS, 0) | {"symlink": 3}


# --- restricting the walk to paths ------------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    make(
        tmp_path,
        {
            ".gitignore": "*.log\ngen/\n",
            "src/a.py": "",
            "src/b.log": "",
            "src/sub/.gitignore": "skip.py\n",
            "src/sub/skip.py": "",
            "src/sub/c.py": "",
            "src/gen/g.py": "",
            "docs/d.md": "",
            "node_modules/n.js": "",
        },
    )
    return tmp_path


def test_paths_restrict_the_walk_and_keep_ancestor_rules(repo: Path) -> None:
    assert relpaths(repo, [repo / "src"]) == ["src/a.py", "src/sub/c.py"]
    assert relpaths(repo, [repo / "src" / "sub"]) == ["src/sub/c.py"]
    assert relpaths(repo, [repo / "docs", repo / "src" / "a.py"]) == ["docs/d.md", "src/a.py"]


def test_named_files_that_are_ignored_are_left_out(repo: Path) -> None:
    named = [
        repo / "src" / "b.log",
        repo / "src" / "sub" / "skip.py",
        repo / "src" / "gen" / "g.py",
        repo / "node_modules" / "n.js",
        repo / ".gitignore",
    ]
    result = walk(repo, named)
    assert (result.files, result.ignored) == ([], 5)


def test_overlapping_and_relative_paths_give_each_file_once(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo / "src")
    assert relpaths(repo, [Path("."), Path("sub/c.py"), repo / "src" / "a.py"]) == [
        "src/a.py",
        "src/sub/c.py",
    ]
    assert relpaths(repo, [repo, repo / "docs"]) == relpaths(repo)


def test_path_outside_root_or_missing_raises_naming_it(repo: Path, tmp_path_factory: Any) -> None:
    outside = tmp_path_factory.mktemp("elsewhere")
    with pytest.raises(SearchError, match=str(outside)):
        walk(repo, [outside])
    with pytest.raises(SearchError, match=r"nope\.py"):
        walk(repo, [repo / "src" / "nope.py"])


# --- check: the rule for one path -------------------------------------------------------------


def test_check_applies_the_walks_rule_to_one_file(repo: Path, tmp_path_factory: Any) -> None:
    outside = tmp_path_factory.mktemp("outside")
    make(outside, {"secret.txt": "x"})
    make(repo, {".env": "TOKEN=1", ".anekit/store.db": "", "inner/.anekit/store.db": ""})
    (repo / "link.txt").symlink_to(outside / "secret.txt")
    found = check(repo, "src/a.py")
    assert isinstance(found, FileEntry) and found.path == repo / "src" / "a.py"
    for ignored in (".env", ".anekit/store.db", "inner/.anekit/store.db", "src/b.log"):
        assert check(repo, ignored) is None, ignored
    assert check(repo, "src/gen/g.py") is None  # below an ignored folder
    assert check(repo, "link.txt") == Skipped("link.txt", "symlink", f"-> {outside / 'secret.txt'}")


def test_check_refuses_paths_that_leave_the_root_folders_and_missing_files(repo: Path) -> None:
    for bad in ("../x", "/etc/passwd", "src/../../x", "src//a.py", "./src/a.py"):
        with pytest.raises(SearchError, match="not a path inside the root"):
            check(repo, bad)
    with pytest.raises(SearchError, match="a folder"):
        check(repo, "src")
    with pytest.raises(SearchError, match="no such file"):
        check(repo, "src/nope.py")


# --- minified and generated text --------------------------------------------------------------


def test_minified_files_are_skipped_by_average_line_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one_line = "var a=1;" * (MINIFIED_MIN_BYTES // 8 + 1)
    code = "x = 1\n" * (MINIFIED_MIN_BYTES // 6 + 1)
    short_one_line = "var a=1;" * 100  # under the size: a small one-line file is kept
    make(tmp_path, {"app.min.js": one_line, "big.py": code, "small.js": short_one_line})
    outcome = read_file(entry(tmp_path, "app.min.js"))
    assert isinstance(outcome, Skipped) and outcome.reason == "minified"
    assert f"{len(one_line)} bytes in 1 line(s)" in outcome.detail
    assert isinstance(read_file(entry(tmp_path, "big.py")), FileText)
    assert isinstance(read_file(entry(tmp_path, "small.js")), FileText)
    monkeypatch.setenv("ANEKIT_MINIFIED_LINE", "0")  # 0 keeps them
    assert isinstance(read_file(entry(tmp_path, "app.min.js")), FileText)
    monkeypatch.setenv("ANEKIT_MINIFIED_LINE", "many")
    with pytest.raises(SearchError, match="ANEKIT_MINIFIED_LINE"):
        read_file(entry(tmp_path, "app.min.js"))


# --- ignore files are matched in linear time --------------------------------------------------


def test_a_backtracking_ignore_pattern_is_matched_in_linear_time(tmp_path: Path) -> None:
    # Python's re takes minutes on these (catastrophic backtracking); RE2 does not.
    make(tmp_path, {".gitignore": "**/" + "*" * 50 + "x\n*a*a*a*a*a*a*a*a*a*a*a*a*b\n"})
    make(tmp_path, {"a" * 60 + ".py": "", "y" * 80: "", "dir/" + "a" * 40 + "b": ""})
    assert relpaths(tmp_path) == ["a" * 60 + ".py", "y" * 80]


def test_the_walk_lists_the_folders_it_entered(repo: Path) -> None:
    (repo / "src" / "linked").symlink_to(repo / "docs")
    assert walk(repo).directories == ["", "docs", "src", "src/sub"]  # not gen/, node_modules/
    assert walk(repo, [repo / "src"]).directories == ["src", "src/sub"]


def test_read_file_reads_a_few_bytes_that_are_not_utf8_as_replacement_characters(
    tmp_path: Path,
) -> None:
    """An old Latin-1 comment in a UTF-8 file: the file is read, its stray byte as U+FFFD,
    its lines where they are, and a note says where; a file mostly in another encoding
    stays set aside."""
    body = "def total(rows):\n    return sum(rows)\n" * 40
    data = ("# Résumé: sums\n" + body).encode("utf-8").replace("é".encode(), b"\xe9", 1)
    make(tmp_path, {"old.py": data})
    outcome = read_file(entry(tmp_path, "old.py"))
    assert isinstance(outcome, FileText) and outcome.data == data
    assert outcome.text.startswith("# R\ufffdsum\u00e9: sums\n")
    assert outcome.text.count("\n") == data.count(b"\n")
    assert outcome.note == "not UTF-8 at byte 3: 1 byte sequence(s) read as U+FFFD"
    make(tmp_path, {"ok.py": "x = 'é'\n"})
    assert read_file(entry(tmp_path, "ok.py")) == FileText("x = 'é'\n".encode(), "x = 'é'\n")
    make(tmp_path, {"cp1252.txt": ("caf\xe9 cr\xe8me br\xfbl\xe9e\n" * 20).encode("latin-1")})
    assert read_file(entry(tmp_path, "cp1252.txt")) == Skipped(
        "cp1252.txt", "undecodable", "not UTF-8 at byte 3"
    )
