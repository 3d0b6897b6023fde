"""HTML pages of anekit's reports: one self-contained file each (inline CSS and script, no
network), rendered with Jinja2 (autoescaped) from the reports' own JSON
(:meth:`PlacementReport.to_json`, :meth:`NumericsReport.to_json`, :meth:`PassReport.to_json`,
the bench JSON), so a page shows what ``--json`` prints and nothing else.

:func:`program_page` (``anekit doctor --html``, ``anekit simulate --html``),
:func:`bench_page` (``anekit bench --html``, ``anekit bench plot``) and :func:`search_page`
(``GET /`` of ``anekit serve``).
"""

from anekit.pages.bench import BenchFileError, bench_page, check_bench_json
from anekit.pages.program import program_page
from anekit.pages.search import search_page

__all__ = ["BenchFileError", "bench_page", "check_bench_json", "program_page", "search_page"]
