"""Shims: files that only forward to others, and the files they forward to.

A shim is a small file whose every statement includes or re-exports another file: fmt's
``core.h`` (``#include "base.h"``), vitest's ``public/suite.ts`` (``export { ... } from
'../runtime/benchmark'``), a Python compatibility module (``from .models import *``), a
Rust ``mod.rs`` of ``pub use`` lines, Ruby's ``require_relative``. A question about the
shim's name is answered by what it forwards to (rank.fuse lists the target beside the
shim). :func:`forwards` reads the relative paths a file's text forwards to; the index
keeps those it holds.

Only paths a reader can resolve without a build system are followed: quoted C/C++
includes and relative JavaScript/TypeScript, Python, Rust and Ruby specifiers (relative to
the shim's folder); a package name (``'@vitest/runner'``, ``<vector>``) is not a file of
this index.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

#: A shim is at most this many lines: a forwarding file, not a module with imports.
MAX_LINES = 40

# Lines a shim may hold besides forwarding ones: preprocessor guards, a deprecation notice.
_NEUTRAL = re.compile(
    r"^(?:#\s*(?:pragma|ifn?def|if|elif|else|endif|define|undef)\b.*"
    r"|(?:console\.warn|warnings\.warn|__all__\s*=)\b.*"
    r"|['\"]use strict['\"];?"
    r"|\"\"\".*|'''.*"  # a one-line docstring
    r")$"
)
_DIRECTIVE = re.compile(r"#\s*(?:include|pragma|ifn?def|if|elif|else|endif|define|undef)\b")
_C_INCLUDE = re.compile(r'^#\s*include\s+"([^"]+)"')
# export * from './x', export { a } from './x', export type { A } from './x', also across
# lines (the text is joined first), and import './x' for its effects.
_JS_FROM = re.compile(
    r"^export\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\})\s+from\s+['\"]([^'\"]+)['\"];?$"
    r"|^import\s+['\"]([^'\"]+)['\"];?$"
    r"|^module\.exports\s*=\s*require\(['\"]([^'\"]+)['\"]\);?$"
)
_PY_FROM = re.compile(r"^from\s+(\.+[\w.]*)\s+import\s+(?:\*|\(?[\w\s,]+\)?)$")
_RUST_USE = re.compile(r"^pub(?:\([^)]*\))?\s+use\s+(?:self::)?(\w+)(?:::[\w:{}*, ]+)?;$")
_RUST_MOD = re.compile(r"^(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+);$")
_RUBY = re.compile(r"^require_relative\s+['\"]([^'\"]+)['\"]$")

_JS_EXTENSIONS = (".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs", ".jsx")


def forwards(relpath: str, text: str) -> list[str]:
    """The relative paths (from the indexed root) that the file at ``relpath`` with
    ``text`` forwards to, each with its possible spellings (``x.ts``, ``x/index.ts``,
    ...), in order; empty when the file is not a shim."""
    statements = _statements(text)
    if not statements or len(text.splitlines()) > MAX_LINES:
        return []
    pure = PurePosixPath(relpath)
    folder = pure.parent
    if pure.suffix == ".rs" and pure.name not in ("mod.rs", "lib.rs", "main.rs"):
        folder = folder / pure.stem  # Rust: foo.rs's modules are in foo/
    found: list[str] = []
    forwarding = 0
    for line in statements:
        if _NEUTRAL.match(line):
            continue
        spellings = _spellings(folder, line)
        if spellings is None:
            return []  # a statement that does something: not a shim
        forwarding += 1
        found += spellings
    return list(dict.fromkeys(found)) if forwarding else []


def _spellings(folder: PurePosixPath, line: str) -> list[str] | None:
    """The paths one forwarding statement may mean (``[]`` for a package name), or
    ``None`` when ``line`` is not a forwarding statement."""
    if match := _C_INCLUDE.match(line):
        return [_join(folder, match.group(1))]
    if match := _JS_FROM.match(line):
        spec = next(group for group in match.groups() if group)
        if not spec.startswith("."):
            return []
        base = _join(folder, spec)
        stem = base.removesuffix(PurePosixPath(base).suffix) if base.endswith(".js") else base
        return [
            base,
            *(stem + ext for ext in _JS_EXTENSIONS),
            *(f"{base}/index{ext}" for ext in _JS_EXTENSIONS),
        ]
    if match := _PY_FROM.match(line):
        dots = len(match.group(1)) - len(match.group(1).lstrip("."))
        module = match.group(1).lstrip(".")
        package = folder
        for _ in range(dots - 1):
            package = package.parent
        target = _join(package, module.replace(".", "/")) if module else str(package)
        return [f"{target}.py", f"{target}/__init__.py"]
    if match := _RUST_USE.match(line) or _RUST_MOD.match(line):
        name = match.group(1)
        if name in {"crate", "super", "std", "core", "alloc"}:
            return []
        return [_join(folder, f"{name}.rs"), _join(folder, f"{name}/mod.rs")]
    if match := _RUBY.match(line):
        spec = match.group(1)
        return [_join(folder, spec if spec.endswith(".rb") else f"{spec}.rb")]
    return None


def _join(folder: PurePosixPath, spec: str) -> str:
    """``spec`` relative to ``folder``, normalized (``..`` taken back), as a posix path."""
    parts: list[str] = [part for part in folder.parts if part not in ("", ".")]
    for part in spec.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _statements(text: str) -> list[str]:
    """The text's statements: lines without comments, blank lines left out, a brace or a
    parenthesis left open joined with the lines that close it (``export {\\n a,\\n} from``)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    statements: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = re.sub(r"(?<![:\"'])//.*$", "", raw)  # a // comment, not a URL in a string
        if line.lstrip().startswith("#") and not _DIRECTIVE.match(line.strip()):
            continue  # a Python, Ruby or shell comment
        line = line.strip()
        if not line:
            continue
        pending = f"{pending} {line}".strip() if pending else line
        if pending.count("{") > pending.count("}") or pending.count("(") > pending.count(")"):
            continue
        statements.append(re.sub(r"\s+", " ", pending))
        pending = ""
    if pending:
        statements.append(re.sub(r"\s+", " ", pending))
    return statements
