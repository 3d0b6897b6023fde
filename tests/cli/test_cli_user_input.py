"""The command line as a new user meets it (issue 11 item 6): user text printed as
written, one-line errors instead of tracebacks, checks before the slow work."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

import anekit
from anekit import errors
from anekit.cli import cli

USER_FILE = textwrap.dedent(
    """\
    import numpy as np


    def raises(x):
        raise ValueError("boom [bold]x[/bold]")


    def two(x, y):
        return x + y


    def noisy(x):
        print("hello from the user's function")
        return np.tanh(x) * 2


    def masked(x):
        y = x[x > 0]  # [bold]c[/bold]
        return y
    """
)


@pytest.fixture
def user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``model.py`` in the working directory (so locations print as ``model.py:N``)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(USER_FILE)
    return "model.py"


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _no_traceback(result: Result) -> None:
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


# --- 1. rich markup in user text is printed as written ------------------------------------


def test_a_source_line_with_markup_is_printed_verbatim(user_file: str) -> None:
    result = _invoke("doctor", f"{user_file}:masked", "--shape", "4,32")
    assert result.exit_code == 2
    assert "\n      y = x[x > 0]  # [bold]c[/bold]\n" in result.stderr


def test_a_path_with_markup_is_printed_verbatim(tmp_path: Path) -> None:
    result = _invoke("doctor", str(tmp_path / "[red]nope[/red].mlpackage"))
    assert result.exit_code == 2
    assert result.stderr == (
        f"error (ProgramError): {tmp_path}/[red]nope[/red].mlpackage: no such file or directory\n"
    )


def test_an_error_message_with_markup_is_printed_verbatim(user_file: str) -> None:
    result = _invoke("doctor", f"{user_file}:raises", "--shape", "4,32")
    assert result.stderr.startswith(
        "error (TraceError): model.py:raises: raised ValueError: boom [bold]x[/bold]\n"
    )


def test_a_table_cell_with_markup_is_printed_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached model folder called ``[b]mine`` is listed under that name."""
    folder = tmp_path / "[b]home" / "models" / "[b]mine"
    folder.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (folder / name).write_text("")
    monkeypatch.setenv("ANEKIT_HOME", str(tmp_path / "[b]home"))
    result = _invoke("models", "list")
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.stdout.splitlines() if "local" in line]
    assert row.startswith("│ [b]mine ")


def test_a_package_path_with_markup_is_printed_verbatim(tmp_path: Path) -> None:
    program = anekit.compile(lambda x: np.tanh(x) * 2, np.zeros((4, 32), np.float16))
    package = program.save(tmp_path / "[b]m.mlpackage")
    result = _invoke("simulate", str(package))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{package} function 'main': ")


# --- 2. one-line errors, not tracebacks -----------------------------------------------------


def test_doctor_on_a_function_that_raises_names_the_exception_and_line(user_file: str) -> None:
    result = _invoke("doctor", f"{user_file}:raises", "--shape", "4,32")
    assert result.exit_code == 2
    _no_traceback(result)
    lines = result.stderr.splitlines()
    assert lines[:3] == [
        "error (TraceError): model.py:raises: raised ValueError: boom [bold]x[/bold]",
        "  at model.py:5, in raises",
        '      raise ValueError("boom [bold]x[/bold]")',
    ]


def test_doctor_on_a_function_that_raises_as_json(user_file: str) -> None:
    result = _invoke("doctor", f"{user_file}:raises", "--shape", "4,32", "--json")
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["error"] == "TraceError"
    assert payload["message"].startswith("model.py:raises: raised ValueError: boom")


def test_doctor_with_fewer_shapes_than_parameters(user_file: str) -> None:
    result = _invoke("doctor", f"{user_file}:two", "--shape", "4,32")
    assert result.exit_code == 2
    _no_traceback(result)
    assert result.stderr.splitlines()[:2] == [
        "error (TraceError): two(x, y) was given 1 example input(s) and none for y: every "
        "parameter without a default needs one",
        "  at model.py:8, in two",
    ]


def test_compile_with_too_few_example_inputs_is_a_trace_error() -> None:
    def two(x: Any, y: Any, scale: float = 1.0) -> Any:
        return (x + y) * scale

    with pytest.raises(errors.TraceError) as caught:
        anekit.compile(two, np.zeros((4, 32), np.float16))
    assert caught.value.message == (
        "test_compile_with_too_few_example_inputs_is_a_trace_error.<locals>.two(x, y, scale) "
        "was given 1 example input(s) and none for y: every parameter without a default "
        "needs one"
    )
    assert caught.value.location is not None and caught.value.location.function.endswith("two")


def test_compile_names_keyword_only_parameters_inputs_cannot_fill() -> None:
    def keyed(x: Any, *, mask: Any) -> Any:
        return x * mask

    with pytest.raises(errors.TraceError, match=r"keyword-only parameter\(s\) without a default"):
        anekit.compile(keyed, np.zeros((4, 32), np.float16))


def test_user_prints_go_to_stderr_and_json_stays_valid(user_file: str) -> None:
    Path("noisy.py").write_text(f"print('hello from the user\\'s module')\n{USER_FILE}")
    result = _invoke("doctor", "noisy.py:noisy", "--shape", "4,64", "--json")
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    assert report["source"] == "noisy.py:noisy"
    assert result.stderr == "hello from the user's module\nhello from the user's function\n"


# --- 4. convert checks --out before converting ----------------------------------------------


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (
            "model.pkg",
            "--out model.pkg: a package path must end in .mlpackage, e.g. model.mlpackage",
        ),
        (".", "--out .: a package path must end in .mlpackage, e.g. nomodel.mlpackage"),
        ("blocker/model.mlpackage", "--out blocker/model.mlpackage: {cwd}/blocker is a file"),
    ],
)
def test_convert_checks_out_before_loading_the_model(
    out: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model does not exist: an --out error proves the check comes first."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blocker").write_text("a file where a directory should be")
    result = _invoke("convert", "nomodel.pt", "--out", out, "--json")
    assert result.exit_code == 2
    payload = json.loads(result.stdout)
    assert payload["error"] == "ConversionError"
    assert payload["message"].startswith(message.format(cwd=tmp_path))


def test_convert_checks_the_default_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nomodel.mlpackage").write_text("a file, not a package")
    result = _invoke("convert", "nomodel.pt", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["message"] == (
        f"{tmp_path}/nomodel.mlpackage (the default for --out): exists and is a file, "
        "not a package directory"
    )


# --- 5. doctor on a .py file without :function ----------------------------------------------


def test_doctor_on_a_python_file_hints_at_file_colon_function(user_file: str) -> None:
    result = _invoke("doctor", user_file)
    assert result.exit_code == 2
    assert result.stderr == (
        "error (PlacementError): model.py: is a Python file; name the function to trace as "
        "model.py:FUNCTION, with a --shape for each of its inputs\n"
    )
