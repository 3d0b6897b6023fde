"""The ``search`` extra: the compiler side runs without it, and code search says what to
install instead of failing on an import deep inside.

The run without the extra hides its packages in a child process: every distribution the
extra brings that the base install does not (mcp's uvicorn and starlette included), as
this environment's metadata names them, becomes unimportable and uninstalled there."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from anekit import extras
from anekit.errors import MissingExtraError


def _closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require here (extras of theirs left out)."""
    seen: set[str] = set()
    todo = [canonicalize_name(name) for name in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


def _anekit_requirements() -> list[Requirement]:
    return [Requirement(text) for text in importlib.metadata.requires("anekit") or []]


def _only_the_search_extra() -> tuple[set[str], set[str]]:
    """(distributions, top-level modules) that only the search extra brings."""
    requirements = _anekit_requirements()
    base = {r.name for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})}
    search = {
        r.name
        for r in requirements
        if r.marker is not None
        and r.marker.evaluate({"extra": "search"})
        and not r.marker.evaluate({"extra": ""})
    }
    only = _closure(search) - _closure(base | {"anekit"})
    modules = {
        module
        for module, owners in importlib.metadata.packages_distributions().items()
        if any(canonicalize_name(owner) in only for owner in owners)
    }
    return only, modules


HIDE = textwrap.dedent(
    """
    import importlib.abc, importlib.metadata, sys
    hidden_dists, hidden_modules = {dists!r}, {modules!r}

    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in hidden_modules:
                raise ModuleNotFoundError(f"No module named {{name!r}} (hidden)", name=name)
            return None

    sys.meta_path.insert(0, Hide())
    version = importlib.metadata.version
    def hidden_version(name):
        if name.lower().replace("_", "-").replace(".", "-") in hidden_dists:
            raise importlib.metadata.PackageNotFoundError(name)
        return version(name)
    importlib.metadata.version = hidden_version

    from anekit.cli import main
    sys.argv = ["anekit", *sys.argv[1:]]
    main()
    """
)


@pytest.fixture(scope="module")
def without_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dists, modules = _only_the_search_extra()
    # the split is real: the extra's own packages and mcp's web server are in it
    assert {"mcp", "tree-sitter-language-pack", "usearch", "uvicorn"} <= dists, dists
    assert {"mcp", "tree_sitter", "re2", "watchfiles", "usearch", "uvicorn"} <= modules
    script = tmp_path_factory.mktemp("hide") / "anekit_without_search.py"
    script.write_text(HIDE.format(dists=dists, modules=modules))
    return script


def _run(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "ANEKIT_HOME": str(cwd / "home")},
        timeout=300,
    )


def test_the_compiler_side_runs_without_the_search_extra(
    without_search: Path, tmp_path: Path
) -> None:
    (tmp_path / "ffn.py").write_text(
        "import numpy as np\n\n"
        "def ffn(x, w1, w2, w3):\n"
        "    h = np.maximum(x @ w1, 0.0)\n"
        "    h = np.maximum(h @ w2, 0.0)\n"
        "    return h @ w3\n"
    )
    shapes = ["x=1,64", "w1=64,64", "w2=64,64", "w3=64,64"]
    doctor = _run(
        without_search,
        "doctor",
        "ffn.py:ffn",
        *(part for shape in shapes for part in ("--shape", shape)),
        "--json",
        cwd=tmp_path,
    )
    assert doctor.returncode == 0, doctor.stderr[-3000:]
    assert json.loads(doctor.stdout)["all_on_ane"]
    listed = _run(without_search, "--help", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert "index" in listed.stdout.split() and "doctor" in listed.stdout.split()
    for args in (["version", "--json"], ["ops", "--json"], ["lanes", "--help"]):
        done = _run(without_search, *args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr[-3000:])


@pytest.mark.parametrize(
    "command", [["index", "."], ["search", "retry"], ["mcp", "."], ["serve", "."], ["watch", "."]]
)
def test_code_search_without_the_extra_names_what_to_install(
    without_search: Path, tmp_path: Path, command: list[str]
) -> None:
    done = _run(without_search, *command, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "error (MissingExtraError)" in done.stderr
    assert "pip install 'anekit[search]'" in done.stderr
    assert "Traceback" not in done.stderr and "hidden" not in done.stderr


def test_missing_lists_the_extras_distributions_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert extras.missing("search") == []  # the dev install has the extra
    version = importlib.metadata.version

    def without_usearch(name: str) -> str:
        if name == "usearch":
            raise importlib.metadata.PackageNotFoundError(name)
        return version(name)

    monkeypatch.setattr(importlib.metadata, "version", without_usearch)
    assert extras.missing("search") == ["usearch"]
    with pytest.raises(
        MissingExtraError, match=r"usearch is not installed: pip install 'anekit\[search\]'"
    ):
        extras.require("search", "code search")
    # an extra whose packages are all here, and one that names none: nothing is missing
    assert extras.missing("torch") == [] and extras.missing("no-such-extra") == []
