"""``anekit --help`` and ``anekit version`` start without the heavy libraries: commands
import coremltools, torch and ONNX Runtime when they run, not when the CLI loads; each
command's module is loaded when that command is asked for."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from anekit.cli import COMMANDS, cli, load_command

HEAVY = ("coremltools", "torch", "onnx", "onnxruntime")

# Runs the CLI in a fresh interpreter and prints which heavy packages it imported.
PROBE = """
import json, sys
from anekit.cli import cli
for args in {commands!r}:
    try:
        cli.main(args, prog_name="anekit", standalone_mode=False)
    except SystemExit:
        pass
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}} & set({heavy!r}))))
"""


@pytest.mark.parametrize(
    "commands",
    [[], [["--help"]], [["version"], ["version", "--json"]], [["doctor", "--help"]]],
    ids=["import", "help", "version", "doctor-help"],
)
def test_the_cli_starts_without_heavy_imports(commands: list[list[str]]) -> None:
    probe = PROBE.format(commands=commands, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    imported = json.loads(done.stdout.splitlines()[-1])
    assert imported == [], f"{commands} imported {imported}"


def test_version_reports_what_the_libraries_report() -> None:
    """The cheap answers of ``anekit version`` (installed metadata, backend checks without
    imports) equal what importing the libraries says."""
    import coremltools
    import numpy

    from anekit.backends import available_backends
    from anekit.runtimes import RUNTIMES

    result = CliRunner().invoke(cli, ["version", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["coremltools"] == coremltools.__version__
    assert payload["numpy"] == numpy.__version__
    assert payload["backends"] == available_backends()
    rows = {row["name"]: row for row in payload["runtimes"]}
    assert list(rows) == list(RUNTIMES)
    for name, row in rows.items():
        assert row["available"] == RUNTIMES[name].available()
        assert row["reason"] == RUNTIMES[name].unavailable_reason()
        assert row["device"] == RUNTIMES[name].device
    assert rows["numpy"]["available"] and not rows["numpy"]["runs_programs"]


def test_every_command_loads_under_its_name_and_help_lists_them_all() -> None:
    for name in COMMANDS:
        assert load_command(name).name == name
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = [
        line.split()[0]
        for line in result.output.split("Commands:", 1)[1].splitlines()
        if line.strip()
    ]
    assert listed == sorted(COMMANDS)


def test_search_does_not_import_the_other_commands() -> None:
    """``anekit search --help`` in a fresh process: the search commands' module and
    nothing of the converter, the probe, the server or the bench; no progress bars."""
    code = (
        "import sys\n"
        "from anekit.cli import cli\n"
        "try:\n"
        "    cli(['search', '--help'], prog_name='anekit')\n"
        "except SystemExit:\n"
        "    pass\n"
        "wanted = ('anekit.cli', 'rich.progress')\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(wanted))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = done.stdout.strip().splitlines()[-1].split()  # after the help text
    assert "anekit.cli.search" in loaded
    for other in ("anekit.cli.convert", "anekit.cli.probe", "anekit.cli.serve", "anekit.cli.bench"):
        assert other not in loaded
    assert "rich.progress" not in loaded


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["serch", "x"])
    assert result.exit_code == 2
    assert "No such command 'serch'" in result.output
