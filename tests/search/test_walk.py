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
    SKIP_REASONS,
    FileEntry,
    FileText,
    Skipped,
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
    assert skipped(tmp_path) == {"pipe": "unreadable"}


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


# --- symbolic links ---------------------------------------------------------------------------


def test_symlink_to_an_ancestor_is_a_loop(tmp_path: Path) -> None:
    make(tmp_path, {"a/b/m.py": ""})
    (tmp_path / "a" / "b" / "up").symlink_to("..")
    (tmp_path / "a" / "root").symlink_to(tmp_path)
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["a/b/m.py"]
    assert {s.relpath: s.reason for s in result.skipped} == {
        "a/b/up": "symlink loop",
        "a/root": "symlink loop",
    }


def test_symlink_to_a_walked_directory_is_skipped_whatever_its_name(tmp_path: Path) -> None:
    make(tmp_path, {"z/m.py": ""})
    (tmp_path / "a_link").symlink_to("z")  # sorts before its target
    result = walk(tmp_path)
    assert [f.relpath for f in result.files] == ["z/m.py"]
    assert result.skipped == [Skipped("a_link", "symlink loop", "-> z")]


def test_symlink_to_an_outside_directory_is_walked_once(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    make(outside, {"lib.py": "", "skip.log": ""})
    make(root, {".gitignore": "*.log\n"})
    (root / "ext1").symlink_to(outside)
    (root / "ext2").symlink_to(outside)
    result = walk(root)
    assert [f.relpath for f in result.files] == ["ext1/lib.py"]
    assert result.files[0].path == root / "ext1" / "lib.py"
    assert result.skipped == [Skipped("ext2", "symlink loop", f"-> {outside}")]


def test_file_symlink_is_listed_broken_and_self_loops_are_skipped(tmp_path: Path) -> None:
    make(tmp_path, {"real.py": "abc"})
    (tmp_path / "alias.py").symlink_to("real.py")
    (tmp_path / "broken.py").symlink_to("missing.py")
    (tmp_path / "self").symlink_to("self")
    result = walk(tmp_path)
    assert [(f.relpath, f.size) for f in result.files] == [("alias.py", 3), ("real.py", 3)]
    assert result.files[0].path == tmp_path / "alias.py"
    assert {s.relpath: s.reason for s in result.skipped} == {
        "broken.py": "unreadable",
        "self": "symlink loop",
    }
    assert "missing.py" in result.skipped[0].detail


def test_ignored_symlinks_are_not_reported(tmp_path: Path) -> None:
    make(tmp_path, {".gitignore": "broken.py\nloop/\n", "d/m.py": ""})
    (tmp_path / "broken.py").symlink_to("missing.py")
    (tmp_path / "loop").symlink_to(".")
    result = walk(tmp_path)
    assert (result.skipped, result.ignored) == ([], 3)


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

    def denied(path: Any, flags: int) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", denied)
    assert read_file(entry(tmp_path, "a.py")) == Skipped("a.py", "unreadable", "Permission denied")


def test_read_file_of_a_fifo_does_not_hang(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tmp_path / "pipe")
    fake = FileEntry(tmp_path / "pipe", "pipe", 0, 0)
    assert read_file(fake) == Skipped("pipe", "unreadable", "not a regular file")


def test_skipped_by_reason_counts_every_reason(tmp_path: Path) -> None:
    make(tmp_path, {"ok.py": ""})
    (tmp_path / "b1").symlink_to("x")
    (tmp_path / "b2").symlink_to("y")
    (tmp_path / "up").symlink_to(".")
    counts = walk(tmp_path).skipped_by_reason()
    assert list(counts) == list(SKIP_REASONS)
    assert counts == dict.fromkeys(SKIP_REASONS, 0) | {"unreadable": 2, "symlink loop": 1}


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
