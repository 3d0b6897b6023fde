"""`anekit index`, `search`, `status` and `forget` on wrong input: each refuses with a clear
error (exit 2), never a traceback, never a silent wrong result. One small repository is
indexed once (the CPU lane); tests work on copies, with the machine cache shared."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from anekit.cli import cli

MODULE = '''"""Durations."""


def parse_duration(text: str) -> float:
    """Seconds in a duration such as 1h30m."""
    return 0.0
'''


def _run(*args: str, **kwargs: Any) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kwargs)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, home: Path) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "pkg").mkdir()
    (root / "pkg" / "durations.py").write_text(MODULE)
    (root / "pkg" / "units.py").write_text("SECONDS_PER_HOUR = 3600\n")
    (root / "README.md").write_text("# durations\n\nParses 1h30m.\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANEKIT_HOME", str(home))
        result = _run("index", str(root), "--lane", "cpu", "--json")
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def repo(built: Path, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the indexed repository (its store too), the shared cache in reach."""
    monkeypatch.setenv("ANEKIT_HOME", str(home))
    copy = tmp_path / "repo"
    shutil.copytree(built, copy)
    with pytest.MonkeyPatch.context() as patch:  # the copy's store records its own root
        patch.chdir(copy)
        assert _run("index", "--lane", "cpu").exit_code == 0
    return copy


def _error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    return result.output


def test_a_store_that_does_not_exist_is_an_error_not_an_empty_store(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    typo = tmp_path / "TYPO"
    for command in (["search", "x"], ["status"], ["forget", "pkg"]):
        message = _error(_run(*command, "--store", str(typo)))
        assert "no search store here" in message and str(typo) in message
    assert not typo.exists()


def test_anekit_store_is_honoured_by_search_status_and_forget(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "stores" / "repo"
    shutil.move(repo / ".anekit", elsewhere)
    monkeypatch.setenv("ANEKIT_STORE", str(elsewhere))
    monkeypatch.chdir(tmp_path)  # neither inside the root nor above a store
    found = json.loads(_run("search", "parse_duration", "--json").output)
    assert found["hits"][0]["path"] == "pkg/durations.py"
    status = json.loads(_run("status", "--json").output)
    assert (status["store"], status["root"], status["files"]) == (str(elsewhere), str(repo), 3)
    forgot = json.loads(_run("forget", str(repo / "pkg" / "units.py"), "--json").output)
    assert forgot["removed"] == ["pkg/units.py"]


def test_forget_with_a_store_from_a_subfolder_uses_the_stores_root(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo / "pkg")
    result = _run("forget", "units.py", "--store", "../.anekit", "--json")
    assert json.loads(result.output)["removed"] == ["pkg/units.py"]


def test_forgetting_everything_needs_all(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    for whole in ("", ".", str(repo)):
        assert "anekit forget --all" in _error(_run("forget", whole))
    assert json.loads(_run("status", "--json").output)["files"] == 3  # nothing lost
    assert "give PATH or --all" in _error(_run("forget", "pkg", "--all"))
    assert "give PATH or --all" in _error(_run("forget"))
    forgot = json.loads(_run("forget", "--all", "--json").output)
    assert sorted(forgot["removed"]) == ["README.md", "pkg/durations.py", "pkg/units.py"]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--lang", "pyhton"], "unknown language 'pyhton'; the index holds: python (2)"),
        (["--path", "["], "is not a path glob"),
        (["--ext", "*.py"], "is not a file extension"),
        (["-k", "0"], "Invalid value for '-k'"),
    ],
)
def test_a_filter_that_can_match_nothing_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, option: list[str], message: str
) -> None:
    monkeypatch.chdir(repo)
    assert message in _error(_run("search", "duration", *option))


def test_a_query_over_the_limit_is_refused(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    assert "the limit is 1000" in _error(_run("search", "x" * 5000))


def test_status_lists_the_languages_and_the_health(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    status = json.loads(_run("status", "--json").output)
    assert (status["health"], status["languages"]) == ("ok", {"markdown": 1, "python": 2})
    text = _run("status").output
    assert "languages: python 2, markdown 1" in text


def test_a_damaged_store_is_called_damaged_and_index_rebuilds_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    database = repo / ".anekit" / "store.db"
    size = database.stat().st_size
    with open(database, "r+b") as raw:
        raw.seek(size // 2)
        raw.write(bytes(range(256)) * 128)  # 32 KiB of garbage in the middle
    status = _run("status", "--json")
    assert status.exit_code == 2
    assert json.loads(status.output)["error"] == "DamagedStoreError"
    searched = _run("search", "parse_duration", "--json")
    assert searched.exit_code in (0, 2)  # the damaged pages may not be on its way
    if searched.exit_code == 2:
        assert json.loads(searched.output)["error"] == "DamagedStoreError"
    rebuilt = _run("index", "--lane", "cpu")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "the index was damaged" in rebuilt.output and "rebuilt from the files" in rebuilt.output
    assert "0 embedded" in rebuilt.output  # every vector came back from the machine cache
    assert (repo / ".anekit" / "store.db.damaged").is_file()
    assert json.loads(_run("status", "--json").output)["health"] == "ok"
    found = json.loads(_run("search", "parse_duration", "--json").output)
    assert found["hits"][0]["path"] == "pkg/durations.py"


def test_a_read_only_folder_is_one_line_naming_store(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = tmp_path / "ro"
    fresh.mkdir()
    (fresh / "a.py").write_text("x = 1\n")
    real_mkdir = Path.mkdir

    def read_only(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.name == ".anekit":
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    result = _run("index", str(fresh), "--lane", "cpu")
    message = _error(result)
    assert "Read-only file system" in message and "--store DIR" in message
    assert "Traceback" not in message


def test_index_prints_progress_lines_in_a_log_and_no_verbose_hint_under_verbose(
    built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    # (anekit.cli.search is the module; the package's attribute of that name is the command)
    monkeypatch.setattr(sys.modules["anekit.cli.search"], "PROGRESS_EVERY_S", 0.0)
    fresh = tmp_path / "logged"
    shutil.copytree(built, fresh, ignore=shutil.ignore_patterns(".anekit"))
    (fresh / "blob.bin").write_bytes(b"\0\1")
    (fresh / "evil\n.bin").write_bytes(b"\0\1")  # a newline in a file name
    result = _run("index", str(fresh), "--lane", "cpu", "--verbose")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("indexing: ")]
    assert lines, result.output  # a fresh machine cache: every chunk is embedded
    assert ", 3/3 files, " in lines[-1] and " chunks/s, cpu" in lines[-1], lines
    assert "skipped: 2 binary" in result.output
    assert "--verbose lists them" not in result.output
    assert "skipped blob.bin: binary" in result.output
    assert "skipped 'evil\\n.bin': binary" in result.output  # escaped, on one line
    assert not any(line.startswith(".bin") for line in result.output.splitlines())


@pytest.mark.parametrize("damage", ["header", "truncated"])
def test_a_store_that_is_not_even_a_database_is_rebuilt_not_a_recursion(
    repo: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    monkeypatch.chdir(repo)
    database = repo / ".anekit" / "store.db"
    data = database.read_bytes()
    database.write_bytes(
        b"\xff" * 100 + data[100:] if damage == "header" else data[: len(data) // 3]
    )
    for command in (["search", "parse_duration"], ["status"]):
        result = _run(*command, "--json")
        assert result.exit_code == 2, result.output
        assert json.loads(result.output)["error"] == "DamagedStoreError"
    rebuilt = _run("index", "--lane", "cpu")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "the index was damaged" in rebuilt.output
    found = json.loads(_run("search", "parse_duration", "--json").output)
    assert found["hits"][0]["path"] == "pkg/durations.py"


def test_indexing_a_link_inside_an_indexed_root_writes_nothing_at_its_target(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "outside" / "etc"
    outside.mkdir(parents=True)
    (outside / "shadow").write_text("root:$6$secret\n")
    (repo / "etclink").symlink_to(outside)
    monkeypatch.chdir(repo)
    result = _run("index", "etclink", "--lane", "cpu", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["root"] == str(repo.resolve())
    assert summary["skipped_files"] == [
        {"path": "etclink", "reason": "symlink", "detail": f"-> {outside}"}
    ]
    assert not (outside / ".anekit").exists()


def test_usage_errors_under_json_are_json(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    for args in (
        ["search", "x", "-k", "0", "--json"],
        ["search", "x", "--mode", "fuzzy", "--json"],
        ["index", "/nonexistent/x", "--json"],
        ["search", "x", "-k", "99999999999999999999999", "--json"],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        payload = json.loads(result.output)
        assert payload["error"] == "UsageError" and "Invalid value" in payload["message"], args


def test_watch_with_a_lane_or_model_that_does_not_exist_stops_at_once(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    assert "unknown lane 'cpuu'" in _error(_run("watch", "--lane", "cpuu"))
    assert "no-such-model" in _error(_run("watch", "--model", "no-such-model"))


def test_a_ray_address_where_nothing_listens_is_refused_with_nothing_to_embed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)  # indexed and unchanged: nothing to embed
    message = _error(_run("index", "--ray", "127.0.0.1:1"))
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in message


def test_the_whole_index_named_through_a_link_still_needs_all(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(repo.parent)  # the root's folder reached through a link
    monkeypatch.chdir(repo)
    assert "anekit forget --all" in _error(_run("forget", str(alias / repo.name)))
    assert json.loads(_run("status", "--json").output)["files"] == 3
