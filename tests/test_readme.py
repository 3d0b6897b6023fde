"""The README's Python examples run as written (Core ML on a Mac, the simulator
elsewhere), and what their comments claim is what they print and do.

Each example runs statement by statement, as one script (``__name__ == "__main__"``,
file name ``README.md``, the README's own line numbers). A comment on a statement is a
claim: a comment that starts with a quoted string or ``<`` is the printed text itself
(``...`` stands for any text); other claims about a printed value or a result are
checked by the function :data:`CHECKS` lists for that statement. Every ``print`` in
the README must have its output checked one way or the other.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit._coremltools import ct
from anekit._runtime import core_ml_runtime_available

README = Path(__file__).resolve().parents[1] / "README.md"
ON_MAC = core_ml_runtime_available()
F32 = np.float32


@dataclass
class Claim:
    """A commented line of a README example, and what its statement printed."""

    line: int  # in README.md
    code: str  # the line without its comment
    comment: str
    printed: str  # the whole statement's stdout ("" when it printed nothing)
    checked: bool = False


Namespace = dict[str, Any]
Check = Callable[[Claim, Namespace], None]


def _blocks() -> list[tuple[int, str]]:
    """(line in README.md before the block's first line, code) of each python example."""
    text = README.read_text()
    return [
        (text[: match.start(1)].count("\n"), match.group(1))
        for match in re.finditer(r"```python\n(.*?)```", text, flags=re.DOTALL)
    ]


def _comments(code: str) -> dict[int, tuple[str, str]]:
    """Line number in ``code`` -> (the code before the comment, the comment)."""
    lines = code.splitlines()
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            found[row] = (lines[row - 1][:column].strip(), token.string[1:].strip())
    return found


def _matches(pattern: str, printed: str) -> bool:
    parts = (re.escape(part) for part in pattern.split("..."))
    return re.fullmatch(".*".join(parts), printed.strip(), flags=re.DOTALL) is not None


def _literal(comment: str) -> str | None:
    """The printed text a comment quotes: ``"text" rest`` -> text, ``<...>`` -> itself."""
    quoted = re.match(r'"([^"]*)"', comment)
    if quoted:
        return quoted.group(1)
    return comment if comment.startswith("<") else None


# Checks of the README's claims: statement (its commented line, without the comment)
# -> the check, run right after the statement (later statements rebind names).


def _plain_numpy(claim: Claim, ns: Namespace) -> None:
    # x: (tokens, channels), plain NumPy
    x = np.ones((3, 512), F32)
    assert type(ns["block"](x)) is np.ndarray and ns["block"](x).shape == (3, 512)


def _lands_on_the_ane(claim: Claim, ns: Namespace) -> None:
    # trace once; shapes and dtypes come from x -- and the quickstart lands on the ANE
    from anekit.analysis import analyze

    report = analyze(ns["program"])
    function = report.functions[0]
    assert report.all_on_ane, [function.summary(family) for family in report.families]
    assert [spec.describe() for spec in ns["program"].input_specs] == ["x: float16[256, 512]"]


def _mil_text_lines(claim: Claim, ns: Namespace) -> None:
    # every MIL op, with the line of your code that made it
    line = max(line for *_, line in ns["block"].__code__.co_lines() if line)  # its return
    ops = [text for text in claim.printed.splitlines() if " = " in text]
    program = ns["program"]
    compute = [op for op in program.ops() if op.op_type != "const"]
    assert len([op for op in ops if "= const(" not in op]) == len(compute)
    assert all(op.rstrip().endswith(f"# README.md:{line}") for op in ops), ops


def _saved_package(claim: Claim, ns: Namespace) -> None:
    # mlprogram, fp16 compute, macOS 15 / iOS 18 target
    from anekit.frontends.mlpackage import read_program

    program, spec = read_program("block.mlpackage")
    assert spec.WhichOneof("Type") == "mlProgram"
    assert spec.specificationVersion == 9  # Core ML 8: macOS 15 / iOS 18
    (function,) = program.functions.values()
    assert function.opset_version == ct.target.iOS18  # the same opset as macOS 15
    compute = [op for op in function.operations if op.op_type != "const"]
    assert {op.outputs[0].dtype.__name__ for op in compute} == {"fp16"}


def _ran_where_claimed(claim: Claim, ns: Namespace) -> None:
    # Core ML (CPU_AND_NE) on a Mac, the ANE simulator elsewhere
    run = ns["program"].last_run
    assert (run.backend, run.simulated) == (("coreml", False) if ON_MAC else ("sim", True))
    y, x = ns["y"], ns["x"]
    assert y.shape == (256, 512) and y.dtype == np.float16
    want = ns["block"](x.astype(F32))  # the same function, in NumPy float32
    scale = float(np.abs(want).max())
    assert scale > 0, "the example computes zeros"
    error = float(np.abs(y.astype(F32) - want).max()) / scale
    assert error < 1e-2, f"relative error {error}"


def _describes_the_run(claim: Claim, ns: Namespace) -> None:
    # which backend ran, and whether it was simulated
    run = ns["program"].last_run
    assert run.backend in claim.printed
    assert ("(simulated," in claim.printed) == run.simulated


def _loaded_package(claim: Claim, ns: Namespace) -> None:
    # coremltools' loader, any OS
    package = ns["package"]
    assert package.package_path == Path("block.mlpackage")
    assert [spec.describe() for spec in package.input_specs] == ["x: float16[256, 512]"]


def _numerics_summary(claim: Claim, ns: Namespace) -> None:
    # largest values, first inf/NaN, ANE cliffs
    assert "largest |value|" in claim.printed
    assert "no inf or NaN" in claim.printed
    got = ns["result"].outputs["output"]
    if not ON_MAC:  # the same simulator as program(x): the same numbers
        np.testing.assert_array_equal(got, ns["y"])


def _too_small(claim: Claim, ns: Namespace) -> None:
    # too small to be worth the ANE
    (finding,) = ns["tiny"].functions[0].findings
    assert finding.rule == "program.too_small" and finding.severity == "fallback"


def _default_backend(claim: Claim, ns: Namespace) -> None:
    # "coreml" on a Mac (the default there)
    from anekit.embedder import default_backend

    assert default_backend() == ("coreml" if ON_MAC else "numpy")


def _unit_vectors_in_input_order(claim: Claim, ns: Namespace) -> None:
    # (2, 384), unit length, input order -- and "any iterable of str" above
    vectors, texts, embedder = ns["vectors"], ns["texts"], ns["embedder"]
    assert claim.printed.strip() == "(2, 384)" == str(vectors.shape)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(vectors[0] @ vectors[1]) < 0.9  # two different texts, not one twice
    reversed_order = embedder.encode(text for text in reversed(texts))  # a generator
    np.testing.assert_allclose(reversed_order[::-1], vectors, atol=1e-6)


def _default_lanes(claim: Claim, ns: Namespace) -> None:
    # lanes=[]: the ANE on a Mac, else cpu
    from anekit.lanes.scheduler import default_lanes

    assert default_lanes() == (["ane"] if ON_MAC else ["cpu"])


def _worker_lane(claim: Claim, ns: Namespace) -> None:
    # ONNX Runtime int8 in a worker process
    (status,) = ns["embedder"].pool.status()
    assert status["lane"] == "cpu" and status["device"] == "CPU (ONNX Runtime int8)"
    assert status["pid"] not in (None, os.getpid())
    reference = anekit.Embedder(runtime="numpy").encode(ns["chunks"])
    cosines = (ns["vectors"] * reference).sum(1)
    assert cosines.min() >= status["floor"], cosines


def _admission_cosine(claim: Claim, ns: Namespace) -> None:
    # its admission cosine, >= the 0.98 floor
    (status,) = ns["embedder"].pool.status()
    assert status["floor"] == 0.98 and not status["below_floor"]
    assert float(claim.printed) == pytest.approx(status["min_cosine"], abs=1e-12)
    assert 0.98 <= float(claim.printed) < 1.0  # int8: close, not identical


CHECKS: dict[str, Check] = {
    "def block(x):": _plain_numpy,
    "program = anekit.compile(block, x)": _lands_on_the_ane,
    "print(program.mil_text())": _mil_text_lines,
    'program.save("block.mlpackage")': _saved_package,
    "y = program(x)": _ran_where_claimed,
    "print(program.last_run.describe())": _describes_the_run,
    'package = anekit.load("block.mlpackage")': _loaded_package,
    "print(result.report.summary())": _numerics_summary,
    "print(tiny.functions[0].findings[0].message)": _too_small,
    'embedder = anekit.Embedder(runtime="numpy")': _default_backend,
    "print(vectors.shape)": _unit_vectors_in_input_order,
    'with anekit.Embedder(lanes=["cpu"]) as embedder:': _default_lanes,
    "vectors = embedder.encode(chunks)": _worker_lane,
    'print(embedder.pool.status()[0]["min_cosine"])': _admission_cosine,
}


def _count_prints() -> int:
    return sum(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
        for _, code in _blocks()
        for node in ast.walk(ast.parse(code))
    )


def _run_readme() -> tuple[list[Claim], list[str]]:
    """Every example, statement by statement; each claim checked right after its
    statement ran. Returns the claims and the claims found false."""
    namespace: Namespace = {"__name__": "__main__"}
    claims: list[Claim] = []
    false: list[str] = []
    for offset, code in _blocks():
        comments = _comments(code)
        for statement in ast.parse(code).body:
            rows = range(statement.lineno, (statement.end_lineno or statement.lineno) + 1)
            module = ast.Module(body=[statement], type_ignores=[])
            ast.increment_lineno(module, offset)  # README.md's line numbers
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(module, "README.md", "exec"), namespace)
            for row in rows:
                if row not in comments:
                    continue
                before, comment = comments[row]
                claim = Claim(row + offset, before, comment, printed.getvalue())
                literal = _literal(comment) if before.startswith("print(") else None
                if literal is not None:
                    claim.checked = True
                    if not _matches(literal, claim.printed):
                        false.append(
                            f"README.md:{claim.line}: {before}  # {comment}\n"
                            f"  printed: {claim.printed.strip()!r}"
                        )
                if before in CHECKS:
                    claim.checked = True
                    try:
                        CHECKS[before](claim, namespace)
                    except Exception as error:  # every false claim, not the first
                        false.append(
                            f"README.md:{claim.line}: {before}  # {comment}\n  {error!r}"[:2000]
                        )
                claims.append(claim)
    return claims, false


@pytest.mark.filterwarnings("error::anekit.errors.NumericsWarning")  # no inf/NaN/zeros
def test_readme_examples_print_what_they_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _blocks(), "README has no python example"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANEKIT_LANES", raising=False)
    claims, false = _run_readme()
    assert not false, "README claims that are not so:\n" + "\n".join(false)
    prints = [claim for claim in claims if claim.code.startswith("print(")]
    unchecked = [(claim.line, claim.code) for claim in prints if not claim.checked]
    assert not unchecked, f"README prints whose claims no test checks: {unchecked}"
    assert len(prints) == _count_prints(), "a README print has no claim comment"
    stale = set(CHECKS) - {claim.code for claim in claims}
    assert not stale, f"checks of README lines that are gone: {sorted(stale)}"
    assert (tmp_path / "block.mlpackage").is_dir()


def test_claim_patterns() -> None:
    assert _literal('"12 of 12 compute ops ..." and more') == "12 of 12 compute ops ..."
    assert _literal("<CompiledProgram ...>") == "<CompiledProgram ...>"
    assert _literal("which backend ran") is None
    assert _matches("12 of 12 compute ops ...", "12 of 12 compute ops expected (a14)\n")
    assert not _matches("0 of 9 compute ops ...", "12 of 12 compute ops expected (a14)")
    assert not _matches("<CompiledProgram ...block(...)>", "<CompiledProgram main(x)>")
