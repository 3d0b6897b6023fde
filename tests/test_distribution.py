"""anekit as users install it: its requirements as ranges that the pins satisfy, and the
built sdist and wheel, checked and installed into a fresh virtual environment where the
command line is used as a user would (version, doctor, index and search, the MCP server).

The fresh environment takes the wheel alone (``--no-deps``) and finds its requirements in
this checkout's environment (a ``.pth`` line): no network in tests. That the pins satisfy
the wheel's own requirements is checked against its metadata here too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

CHECKOUT = Path(__file__).resolve().parents[1]
PYPROJECT = CHECKOUT / "pyproject.toml"


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (CHECKOUT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins


def _requirements(extra: str = "") -> list[Requirement]:
    """The base requirements, or those of ``extra``, as pyproject.toml states them."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    texts = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return [Requirement(text) for text in texts]


def test_requirements_are_ranges_the_pins_satisfy_each_upper_bound_with_its_reason() -> None:
    pins = _pins()
    lines = PYPROJECT.read_text().splitlines()
    # the search extra is installed beside the user's packages too: ranges as well
    for requirement in _requirements() + _requirements("search"):
        operators = {spec.operator for spec in requirement.specifier}
        assert ">=" in operators and "==" not in operators, requirement  # a range
        pinned = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(pinned), (requirement, pinned)
        if operators & {"<", "<="}:
            # the line before says why (a comment), as for every known break
            written = re.compile(rf'^\s*"{re.escape(requirement.name)}\s*[<>=!~]')
            at = next(i for i, line in enumerate(lines) if written.match(line))
            assert lines[at - 1].strip().startswith("#"), f"{requirement}: no reason given"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel), built from this checkout without build isolation (no network)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(CHECKOUT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("anekit-*.tar.gz")
    (wheel,) = out.glob("anekit-*.whl")
    return sdist, wheel


def test_the_sdist_and_wheel_pass_twine_check(built: tuple[Path, Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, built)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2


def test_the_wheel_holds_every_data_file_and_the_pins_satisfy_its_requirements(
    built: tuple[Path, Path],
) -> None:
    _, wheel = built
    tracked = subprocess.run(
        ["git", "-C", str(CHECKOUT), "ls-files", "src/anekit"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    wanted = {path.removeprefix("src/") for path in tracked}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    assert wanted - names == set()  # every module and data file (op tables, known answers)
    assert not {name for name in names if "__pycache__" in name or name.endswith(".pyc")}
    required = [
        Requirement(line.removeprefix("Requires-Dist: "))
        for line in text.splitlines()
        if line.startswith("Requires-Dist: ")
    ]
    pins = _pins()
    base = [r for r in required if r.marker is None or r.marker.evaluate({"extra": ""})]
    assert {canonicalize_name(r.name) for r in base} == {
        canonicalize_name(r.name) for r in _requirements() if r.marker is None
    }
    search = [
        r
        for r in required
        if r.marker is not None and r not in base and r.marker.evaluate({"extra": "search"})
    ]
    assert {canonicalize_name(r.name) for r in search} == {
        canonicalize_name(r.name) for r in _requirements("search")
    }
    for requirement in base + search:
        assert requirement.specifier.contains(pins[canonicalize_name(requirement.name)])


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the wheel, its requirements found in this
    checkout's environment; returns its ``bin`` folder."""
    _, wheel = built
    where = tmp_path_factory.mktemp("fresh-venv")
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    ours = sysconfig.get_paths()["purelib"]  # the requirements, not anekit: it is not there
    (site / "requirements-from-checkout.pth").write_text(ours + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return where / "bin"


def _anekit(bin_dir: Path, *args: str, cwd: Path, home: Path, stdin: str | None = None) -> Any:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV") and not key.startswith("PYTEST")
    }
    environment |= {"ANEKIT_HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [str(bin_dir / "anekit"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        input=stdin,
        timeout=600,
    )


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """A user's folder outside the checkout: nothing there imports this checkout's src."""
    folder = tmp_path / "user"
    folder.mkdir()
    return folder


def test_the_installed_command_works_as_a_user_runs_it(installed: Path, user: Path) -> None:
    home = user / "home"
    version = _anekit(installed, "version", "--json", cwd=user, home=home)
    assert version.returncode == 0, version.stderr
    report = json.loads(version.stdout)
    assert report["anekit"] == tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    # the package imported is the installed wheel's, not this checkout's src
    where = subprocess.run(
        [str(installed / "python"), "-c", "import anekit; print(anekit.__file__)"],
        capture_output=True,
        text=True,
        cwd=user,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(installed.parent)) and "site-packages" in where

    (user / "ffn.py").write_text(
        "import numpy as np\n\n"
        "def ffn(x, w1, w2, w3):\n"
        "    h = np.maximum(x @ w1, 0.0)\n"
        "    h = np.maximum(h @ w2, 0.0)\n"
        "    return h @ w3\n"
    )
    shapes = ["x=1,64", "w1=64,64", "w2=64,64", "w3=64,64"]
    doctor = _anekit(
        installed,
        "doctor",
        "ffn.py:ffn",
        *(part for shape in shapes for part in ("--shape", shape)),
        "--json",
        cwd=user,
        home=home,
    )
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr[-2000:]
    report = json.loads(doctor.stdout)  # the op table, read from the wheel's package data
    assert report["all_on_ane"] and len(report["functions"][0]["ops"]) > 3

    tree = user / "repo"
    (tree / "app").mkdir(parents=True)
    (tree / "app" / "retry.py").write_text(
        "def retry_request(send, attempts=3):\n"
        '    """Send again after a failure, up to ``attempts`` times."""\n'
        "    for _ in range(attempts):\n"
        "        if send():\n"
        "            return True\n"
        "    return False\n"
    )
    index = _anekit(installed, "index", str(tree), "--lane", "cpu", "--json", cwd=user, home=home)
    assert index.returncode == 0, index.stdout[-2000:] + index.stderr[-2000:]
    assert json.loads(index.stdout)["indexed"] == 1
    search = _anekit(
        installed,
        "search",
        "--store",
        str(tree / ".anekit"),
        "how are failed sends retried",
        "--json",
        cwd=user,
        home=home,
    )
    assert search.returncode == 0, search.stderr
    hits = json.loads(search.stdout)["hits"]
    assert hits[0]["path"] == "app/retry.py" and hits[0]["symbol"] == "retry_request"

    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "wheel-check", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    stdin = "".join(json.dumps(message) + "\n" for message in messages)
    mcp = _anekit(installed, "mcp", str(tree), cwd=user, home=home, stdin=stdin)
    answers = {item.get("id"): item for item in map(json.loads, mcp.stdout.splitlines())}
    tools = [tool["name"] for tool in answers[2]["result"]["tools"]]
    assert tools == ["search", "read", "files", "status", "index"], mcp.stderr[-2000:]
