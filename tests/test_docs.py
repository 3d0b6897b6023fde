"""Docs stay in step with the code: every traced function and env variable is documented."""

from __future__ import annotations

from pathlib import Path

from anekit import config
from anekit.trace import numpy_api, ufuncs
from anekit.trace.lowering import numpy_name

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_tracing_doc_lists_every_supported_function() -> None:
    text = (DOCS / "tracing.md").read_text()
    names = {numpy_name(func) for func in numpy_api.FUNCTIONS}
    names |= {f"np.{ufunc.__name__}" for ufunc in ufuncs.BINARY_OPS}
    names |= {f"np.{ufunc.__name__}" for ufunc in ufuncs.UNARY_OPS}
    names |= {f"np.{ufunc.__name__}" for ufunc in ufuncs.SPECIAL_UNARY}
    names |= {numpy_name(func) for func in numpy_api.DATA_DEPENDENT}
    missing = sorted(name for name in names if f"`{name}`" not in text and f"{name}`" not in text)
    assert not missing, f"docs/tracing.md does not mention {missing}"


def test_environment_doc_lists_every_variable() -> None:
    text = (DOCS / "environment.md").read_text()
    for variable in config.ENVIRONMENT:
        assert f"`{variable}`" in text


def test_passes_doc_lists_every_pass() -> None:
    from anekit.passes import ANE_PIPELINE, OPTIONAL_PASSES

    text = (DOCS / "passes.md").read_text()
    for name in (*ANE_PIPELINE, *OPTIONAL_PASSES):
        assert f"| `{name.split('::')[1]}`" in text, name


def test_lanes_doc_lists_every_lane_and_fault() -> None:
    from anekit.lanes import LANES, faults

    text = (DOCS / "lanes.md").read_text()
    for lane in LANES:
        assert f"| `{lane}` |" in text, lane
    kinds = ["load", "batch:N", "hang:MS", "poison:nan", "poison:zero"]
    kinds += ["nan-after:N", "malformed:N"]
    for kind in kinds:
        assert f"| `{kind}` |" in text and f"``{kind}``" in (faults.__doc__ or ""), kind
