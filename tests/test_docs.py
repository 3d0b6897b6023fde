"""Docs stay in step with the code: every traced function and env variable is documented."""

from __future__ import annotations

import re
from pathlib import Path

from anekit import config
from anekit.trace import numpy_api, ufuncs
from anekit.trace.lowering import numpy_name

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _cited_paths(text: str) -> set[str]:
    """Repository paths a Markdown page cites: relative link targets, `dir/file.ext` code
    spans, and bare words under src/anekit/ or shared/ (other bare paths, such as
    "MDX docs/ANE_INTERNALS.md", name files of the external sources)."""
    links = set(re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text))
    links = {link for link in links if not re.match(r"[a-z]+:", link)}
    spans = set(re.findall(r"`([\w.-]*/[\w./-]*\.\w+)`", text))  # `dir/file.ext`
    words = set(re.findall(r"(?<![\w/.-])((?:src/anekit|shared)/[\w./-]*\w)", text))
    return links | spans | words


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


def test_op_support_cites_only_what_exists() -> None:
    """`anekit ops --markdown` (docs/op-support.md) cites files of this repository or
    public URLs, never a path that is not here."""
    from anekit.analysis import load_op_table
    from anekit.analysis.docs import op_support_markdown

    cited = _cited_paths(op_support_markdown(load_op_table()))
    assert "src/anekit/analysis/data/ops.toml" in cited
    missing = sorted(path for path in cited if not (ROOT / path).exists())
    assert not missing, f"anekit ops --markdown cites {missing}, which are not in the repository"


def test_op_support_lists_its_sources_with_public_urls() -> None:
    from anekit.analysis import load_op_table
    from anekit.analysis.docs import SOURCES, op_support_markdown

    text = op_support_markdown(load_op_table())
    assert "## Sources" in text
    for key, where, _ in SOURCES:
        assert f"| {key} | {where} |" in text
        assert re.search(r"\]\(https://(github\.com|pypi\.org)/[\w./-]+\)", where), key


def test_placement_doc_cites_only_what_exists() -> None:
    cited = _cited_paths((DOCS / "placement.md").read_text())
    missing = sorted(
        path for path in cited if not (DOCS / path).exists() and not (ROOT / path).exists()
    )
    assert not missing, f"docs/placement.md cites {missing}, which are not in the repository"


def test_architecture_cites_files_that_exist() -> None:
    cited = _cited_paths((DOCS / "architecture.md").read_text())
    assert "src/anekit/ops/composites.py" in cited
    bases = (ROOT, DOCS, ROOT / "src" / "anekit")
    missing = sorted(path for path in cited if not any((base / path).exists() for base in bases))
    assert not missing, f"docs/architecture.md cites {missing}, which are not in the repository"


def test_architecture_lists_every_layer_of_the_import_contract() -> None:
    """The layer table names each package of the layers contract, in its order."""
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in settings["contracts"] if c["type"] == "layers"]
    table = (DOCS / "architecture.md").read_text().split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = [re.findall(r"`([\w.]+)`", row.split("|")[1]) for row in rows]
    order = [name for names in named for name in names]
    packages = [name.strip() for layer in layers for name in layer.split("|")]
    packages = [name for name in packages if not name.startswith("_")]
    for package in packages:
        if package in ("specs", "dtypes", "errors", "config"):
            assert package in table, f"docs/architecture.md's core row misses {package}"
            continue
        assert package in order, f"docs/architecture.md's layer table misses {package}"
    listed = [name for name in order if name in packages]
    expected = [name for name in packages if name in listed]
    assert listed == expected, "docs/architecture.md lists the layers in another order"
