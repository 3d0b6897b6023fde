"""The int8 package's fidelity, and both packages' placement (a file of its own, so that
the int8 package is built on another test worker than the fp16 one)."""

from __future__ import annotations

import pytest

from anekit.analysis import analyze
from anekit.embedder import Embedder
from anekit.models import BUCKETS
from anekit.models.package import function_name
from package_checks import bucket_cosines

# Building the int8 package takes ~3 minutes of a CI worker; the int8 weight paths are
# checked on small programs in tests/test_package.py, and the fp16 package's placement
# by the selftest and demo tests. `make test-slow` runs these.
pytestmark = pytest.mark.slow


def test_placement_is_all_on_the_ane(fp16: Embedder, int8: Embedder) -> None:
    for embedder in (fp16, int8):
        report = analyze(embedder.package().path)
        assert sorted(function.name for function in report.functions) == sorted(
            function_name(size) for size in BUCKETS
        )
        assert report.all_on_ane, [
            (function.name, family, function.fallbacks(family))
            for function in report.functions
            for family in report.families
        ]


@pytest.mark.parametrize("size", [256, 512])
def test_int8_package_is_within_its_bound(int8: Embedder, size: int) -> None:
    cosines = bucket_cosines(int8, size)
    assert cosines.min() >= 0.99, (size, cosines.min())
    assert cosines.min() < 0.9999999  # the weights really are quantized
