"""File names with a newline or control characters are printed escaped, never raw (issue
32 item 4): one place (:func:`anekit.cli._common.esc_path`, and the arguments in an error
message) so that every command shows ``'a\\nb.py'``, not a broken line or a terminal
escape sequence; ``--json`` keeps the name as it is (JSON escapes it)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

import anekit
from anekit.cli import cli
from anekit.cli._common import esc, esc_path, shown


def _printed(markup: str) -> str:
    """What rich writes for ``markup``."""
    out = io.StringIO()
    Console(file=out, highlight=False, soft_wrap=True).print(markup)
    return out.getvalue()


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_a_name_is_shown_as_written_unless_it_holds_an_unprintable_character() -> None:
    assert shown("model [b].py") == "model [b].py"
    assert shown("a\nb.py") == "'a\\nb.py'"
    assert shown(Path("tab\there")) == "'tab\\there'"
    assert _printed(esc_path("[red]x\n\x1b[2J.py")) == "'[red]x\\n\\x1b[2J.py'\n"


def test_esc_keeps_newlines_but_never_prints_a_control_character() -> None:
    """Messages keep their lines (a trace error's "at" line); an escape sequence, a
    carriage return or a bell is shown, not sent to the terminal."""
    assert _printed(esc("one\ntwo [b]\x1b[31mred\r\x07")) == "one\ntwo [b]\\x1b[31mred\\r\\x07\n"


def test_a_missing_file_with_a_newline_is_named_on_one_line(tmp_path: Path) -> None:
    package = tmp_path / "a\nb.mlpackage"
    result = _invoke("simulate", str(package))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error (ProgramError): '{tmp_path}/a\\nb.mlpackage': no such file or directory\n"
    )
    as_json = _invoke("simulate", str(package), "--json")
    assert json.loads(as_json.stdout)["message"] == f"{package}: no such file or directory"


def test_the_file_of_a_function_reference_is_named_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _invoke("doctor", "my\nmodel.py:f", "--shape", "2")
    assert result.exit_code == 2
    assert result.stderr == "error (ProgramError): 'my\\nmodel.py': no such Python file\n"


def test_a_terminal_escape_in_a_file_name_is_not_sent_to_the_terminal(tmp_path: Path) -> None:
    result = _invoke("run", str(tmp_path / "x\x1b[2Jy.mlpackage"))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error (ProgramError): '{tmp_path}/x\\x1b[2Jy.mlpackage': no such file or directory\n"
    )


def test_embed_names_an_input_file_escaped_in_its_warnings(tmp_path: Path) -> None:
    source = tmp_path / "in\nput.txt"
    source.write_text("\n")  # one empty line: skipped, so no lane is started
    result = _invoke("embed", "--lane", "numpy", str(source))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        f"warning: '{tmp_path}/in\\nput.txt', line 1: empty line; skipped"
    )
    assert result.stdout == "null\n"
    strict = _invoke("embed", "--strict", str(source))
    assert strict.exit_code == 2
    assert strict.stderr.startswith(f"error (ModelError): '{tmp_path}/in\\nput.txt', line 1: ")
    assert strict.stderr.count("\n") == 1


def test_a_package_name_with_a_newline_is_printed_escaped(tmp_path: Path) -> None:
    program = anekit.compile(lambda x: np.tanh(x) * 2, np.zeros((4, 32), np.float16))
    package = program.save(tmp_path / "two\nlines.mlpackage")
    result = _invoke("simulate", str(package))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"'{tmp_path}/two\\nlines.mlpackage' function 'main': ")
