"""``anekit --help`` and ``anekit version`` start without the heavy libraries: commands
import coremltools, torch and ONNX Runtime when they run, not when the CLI loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from anekit.cli import cli

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

    result = CliRunner().invoke(cli, ["version", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["coremltools"] == coremltools.__version__
    assert payload["numpy"] == numpy.__version__
    assert payload["backends"] == available_backends()
