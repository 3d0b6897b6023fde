"""Shims (anekit.search.shims): what a file that only forwards forwards to, and its
target listed beside it by rank.fuse."""

from __future__ import annotations

from anekit.search.rank import SHIM_FOLLOW, Candidate, fuse
from anekit.search.shims import forwards

FMT_CORE = """// Formatting library for C++ - the core API
#include "base.h"

// Using fmt::format via fmt/core.h has been deprecated since version 11
// and now requires an explicit opt in.
#ifdef FMT_DEPRECATED_HEAVY_CORE
#  include "format.h"
#endif
"""

VITEST_SUITE = """export { getBenchFn, getBenchOptions } from '../runtime/benchmark'
export {
  createTaskCollector,
  getCurrentSuite,
} from '@vitest/runner'
export type { VitestRunner } from '@vitest/runner'

console.warn('Importing from "vitest/suite" is deprecated since Vitest 4.1.')
"""


def test_a_cpp_shim_forwards_to_its_quoted_includes_beside_it() -> None:
    assert forwards("include/fmt/core.h", FMT_CORE) == [
        "include/fmt/base.h",
        "include/fmt/format.h",
    ]


def test_a_typescript_shim_forwards_to_its_relative_modules_not_packages() -> None:
    found = forwards("packages/vitest/src/public/suite.ts", VITEST_SUITE)
    assert found[0] == "packages/vitest/src/runtime/benchmark"
    assert "packages/vitest/src/runtime/benchmark.ts" in found
    assert "packages/vitest/src/runtime/benchmark/index.ts" in found
    assert not any("@vitest" in path for path in found)
    # only package names: nothing here to follow
    assert forwards("src/index.ts", "export * from 'lodash'\n") == []
    # './x.js' in TypeScript's ESM spelling is x.ts
    assert "src/v4/core.ts" in forwards("src/v4/index.ts", 'export * from "./core.js";\n')


def test_python_rust_and_ruby_shims() -> None:
    assert forwards("pkg/compat.py", '"""Old name."""\nfrom .models import *\n') == [
        "pkg/models.py",
        "pkg/models/__init__.py",
    ]
    assert forwards("pkg/sub/old.py", "from ..core.api import (\n    a,\n    b,\n)\n") == [
        "pkg/core/api.py",
        "pkg/core/api/__init__.py",
    ]
    assert forwards("src/extract/mod.rs", "mod path;\npub use path::Path;\n") == [
        "src/extract/path.rs",
        "src/extract/path/mod.rs",
    ]
    # a module file's submodules are in its own folder
    assert forwards("src/extract.rs", "pub mod path;\n")[0] == "src/extract/path.rs"
    assert forwards("lib/rack.rb", "require_relative 'rack/version'\n") == ["lib/rack/version.rb"]


def test_a_file_that_does_anything_else_is_not_a_shim() -> None:
    assert forwards("src/main.c", '#include "x.h"\n\nint main(void) { return 0; }\n') == []
    assert forwards("src/a.ts", "export * from './b'\nexport function c() {}\n") == []
    assert forwards("pkg/a.py", "from .b import c\n\nd = c()\n") == []
    assert forwards("pkg/empty.py", "# nothing here\n") == []
    long = "".join(f'#include "part{i}.h"\n' for i in range(60))
    assert forwards("all.h", long) == []  # an umbrella of 60 includes is a module, not a shim


def test_a_shims_target_is_listed_just_below_the_shim() -> None:
    shim = Candidate(1, "", "code", '#include "base.h"\n', "fmt/core.h", 1)
    other = Candidate(2, "format", "code", "int format();", "fmt/format.h", 10)
    target = Candidate(3, "", "code", "// base", "fmt/base.h", 1)
    candidates = {1: shim, 2: other}

    def forwarded(candidate: Candidate) -> list[Candidate]:
        return [target] if candidate.id == 1 else []

    ranked = fuse("core.h", [1, 2], [1, 2], candidates, 3, forwarded=forwarded)
    assert [chunk_id for chunk_id, _ in ranked] == [1, 3, 2]
    scores = dict(ranked)
    assert scores[3] == SHIM_FOLLOW * scores[1]
    # without the callback the target is not there
    assert [i for i, _ in fuse("core.h", [1, 2], [1, 2], candidates, 3)] == [1, 2]
