"""``anekit models info`` lists the buckets ``anekit build-model`` builds."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from click.testing import CliRunner

from anekit.cli import cli
from anekit.models.batching import BUCKETS, buckets_for
from anekit.models.package import build_package
from tinybert import tiny_bert


def test_models_info_lists_the_buckets_build_model_builds(tmp_path: Path) -> None:
    """The tiny model truncates at 128 tokens: the embedder runs the 128 bucket, the
    package holds all of them (``build_package``'s default, what build-model builds)."""
    folder = tiny_bert(tmp_path / "tiny")
    result = CliRunner().invoke(cli, ["models", "info", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    built = inspect.signature(build_package).parameters["buckets"].default
    assert built == BUCKETS
    assert [item["sequence"] for item in payload["buckets"]] == list(built)
    assert {item["batch"] for item in payload["buckets"]} == {4}
    assert payload["max_length"] == 128
    assert [item["sequence"] for item in payload["buckets_in_use"]] == list(buckets_for(128))


def test_models_info_text_shows_both_lists(tmp_path: Path) -> None:
    folder = tiny_bert(tmp_path / "tiny")
    result = CliRunner().invoke(cli, ["models", "info", str(folder)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "buckets            " + ", ".join(f"4x{size}" for size in BUCKETS) in lines
    assert "buckets_in_use     4x128" in lines


def test_build_model_help_names_the_buckets() -> None:
    result = CliRunner().invoke(cli, ["build-model", "--help"])
    assert result.exit_code == 0
    sizes = ", ".join(str(size) for size in BUCKETS[:-1]) + f" and {BUCKETS[-1]}"
    assert f"(batch 4 x sequence {sizes})" in " ".join(result.stdout.split())
