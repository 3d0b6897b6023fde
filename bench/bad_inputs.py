"""Bad inputs and attacks on anekit's code-search surfaces (issue 32), re-run in a sandbox.

A user reported some 150 bad inputs and a security attack on ``anekit index``, ``search``,
``status``, ``forget``, ``watch``, ``embed``, ``mcp`` (MCP over stdio) and ``serve`` (MCP
over streamable HTTP). This script builds a sandbox under a temporary folder, runs every
case against the real commands and a real daemon, and classifies each outcome:

- ``ok``: a clear error (exit status 2, one ``error`` line, or the tool's error message),
  or the right result;
- ``TRACEBACK``: a Python traceback in any output;
- ``SILENT-WRONG``: exit 0 (or a tool result) with a wrong or empty result where an error
  or another result is due;
- ``WRONG``: an error, but not the one due (exit 1 for a usage error, a message that
  names nothing, plain text where ``--json`` asked for a JSON error object);
- ``LEAK``: a marker string planted outside the root (``outside/etc/shadow``,
  ``outside/.ssh``, ``outside/credentials``), in a hidden or ignored file (``.env``,
  ``.git/config``), in the store (SQLite's ``SQLite format 3`` header), the bearer token,
  or the host's own ``/etc/passwd`` first line (a walk of ``/``), appears in any output of
  any surface (the token is allowed only where it is asked for: ``serve --show-token``);
- ``HANG``: no answer within the case's (generous) time limit;
- ``DOWN``: the daemon stopped answering ``GET /health``;
- ``skip``: the case could not be set up here (said why); not a failure.

The sandbox (``--workdir``, else a fresh temporary folder, removed unless ``--keep``):

    home/                 ANEKIT_HOME for every process (model package, cache, serve/token)
    outside/              fake targets "outside the root": etc/shadow, .ssh/id_rsa,
                          credentials, watch_secret.py, victim files (each holds a marker)
    n/                    the main root: real code (Python, JS, Go, Markdown), tests, a
                          .gitignore'd secret, .env, .git/config, links (etclink, ssh,
                          creds.txt, root -> /, loop -> ., storelink -> .anekit, tokenlink
                          -> home/serve/token, innerstore, 'bad\\nlink'), a FIFO, a 20 MB
                          text file, a binary, a 2.7 MB one-line .js, a 1.2 MB one-line .py,
                          a file named 'weird\\nname.py', and a nested root inner/
    w/ s/ wl/ ro*/ nc/    small roots (some of n's files under the same paths, so their
                          vectors come from the machine cache): the WAL case, forget, the
                          watcher with links, read-only folders, a store that cannot be made
    dmg-*/                copies of n's files, their stores damaged three ways
    elsewhere/            a folder with no index

One ``anekit serve n n/inner w`` daemon serves the MCP cases and watches the roots. The
lane-fault and ``embed`` cases run in a background thread meanwhile. About 6-8 minutes on
a 2-core machine. Linux only (``/proc``, ``mkfifo``; ``chattr`` for the read-only cases).

    .venv/bin/python bench/bad_inputs.py [--workdir DIR] [--keep] [--only TEXT]
        [--json PATH] [--no-save]

Prints a table (case, surface, expected, got, verdict), the totals and, for each case that
is not ok, its command and the relevant output lines; writes a JSON record (date, command,
machine, source state, every case with its output excerpt) to ``--json`` (default
``bench/results/bad_inputs-<date>-<commit>.json``). Exit status 1 when any case is not ok.
Nothing is written outside the sandbox: every "outside the root" target is a fake folder
in it, and ``ANEKIT_HOME`` is the sandbox's own.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import itertools
import json
import math
import os
import platform
import queue
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
sys.path.insert(0, str(BENCH))

from benchmachine import machine, redacted, source_state  # noqa: E402

_console = Path(sys.executable).with_name("anekit")
ANEKIT = [str(_console)] if _console.exists() else [sys.executable, "-m", "anekit"]
HOST = "127.0.0.1"
TRACEBACK = "Traceback (most recent call last)"
NOT_OK = ("LEAK", "DOWN", "HANG", "TRACEBACK", "SILENT-WRONG", "WRONG")
PROTOCOL = "2025-06-18"

Check = Callable[["Outcome"], tuple[str, str]]
#: One CLI case of a table (``Runner.run_table``): name, surface, expected, arguments, check,
#: and, where this case's differ from the table's, keyword arguments of ``Runner.run``.
Row = (
    tuple[str, str, str, Sequence[str], Check]
    | tuple[str, str, str, Sequence[str], Check, dict[str, Any]]
)


def say(message: str) -> None:
    print(message.replace("\n", "\\n"), file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """What one case produced: an exit status (or HTTP status, or 0/1 for an MCP tool's
    result/error), its outputs, and how long it took."""

    rc: int | None = None
    out: str = ""
    err: str = ""
    seconds: float = 0.0
    timed_out: bool = False
    limit: float = 0.0
    down: bool = False
    data: Any = None
    note: str = ""

    @property
    def text(self) -> str:
        return f"{self.out}\n{self.err}"

    def json(self) -> Any:
        try:
            return json.loads(self.out)
        except ValueError:
            return None


@dataclass
class Case:
    name: str
    surface: str
    expected: str
    command: str
    verdict: str = ""
    got: str = ""
    seconds: float = 0.0
    rc: int | None = None
    excerpt: list[str] = field(default_factory=list)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def first_line(o: Outcome) -> str:
    """The line that says most: an error line first, else the first line of stderr or
    stdout, cut to 220 characters."""
    candidates = _lines(o.err) + _lines(o.out)
    for line in candidates:
        if re.search(r"\berror\b|refused|not served|outside|denied|no such|damaged", line, re.I):
            return line.strip()[:220]
    return (candidates[0].strip()[:220]) if candidates else "(no output)"


def traceback_block(text: str) -> list[str]:
    """The first traceback in ``text``: its lines up to and including the exception's."""
    lines = text[text.index(TRACEBACK) :].splitlines()
    for number, line in enumerate(lines[1:], 1):
        if line.strip() and not line.startswith((" ", "\t")) and not line.startswith("Traceback"):
            return [line.rstrip() for line in lines[: number + 1] if line.strip()]
    return [line.rstrip() for line in lines if line.strip()]


def strip_echo(text: str, echoes: Iterable[str]) -> str:
    """``text`` without the ``"query": ...`` fields that echo the case's own query back (a
    marker sent as a query is not a leak when it comes back as the query; in a hit it is)."""
    for echo in echoes:
        escaped = re.escape(json.dumps(echo)[1:-1])
        pattern = r'\\?"query\\?"\s*:\s*\\?"' + escaped + r'\\?"'
        text = re.sub(pattern, '"query": "<the query>"', text)
    return text


def _has(text: str, needle: str | tuple[str, ...]) -> bool:
    options = needle if isinstance(needle, tuple) else (needle,)
    return any(option.lower() in text.lower() for option in options)


def refused(
    *needles: str | tuple[str, ...],
    rc: int | None = 2,
    json_error: bool = False,
    one_line: bool = False,
) -> Check:
    """A CLI refusal: exit ``rc`` (any non-zero when None), the message naming each of
    ``needles`` (a tuple: any of them), a JSON error object on stdout with ``json_error``,
    at most one line on stderr with ``one_line``."""

    def check(o: Outcome) -> tuple[str, str]:
        if o.rc == 0:
            return "SILENT-WRONG", f"exit 0: {first_line(o)}"
        if rc is not None and o.rc != rc:
            return "WRONG", f"exit {o.rc} (not {rc}): {first_line(o)}"
        if json_error:
            parsed = o.json()
            if not (isinstance(parsed, dict) and "error" in parsed):
                return "WRONG", f"exit {o.rc}, not a JSON error object: {first_line(o)}"
        missing = [n for n in needles if not _has(o.text, n)]
        if missing:
            return "WRONG", f"exit {o.rc}, the message lacks {missing}: {first_line(o)}"
        if one_line and len(_lines(o.err)) > 1:
            return "WRONG", f"exit {o.rc}, {len(_lines(o.err))} lines, not one: {first_line(o)}"
        return "ok", f"exit {o.rc}: {first_line(o)}"

    return check


def succeeded(predicate: Callable[[Outcome], tuple[bool, str]] | None = None) -> Check:
    """Exit 0 and ``predicate`` true (else SILENT-WRONG with its description)."""

    def check(o: Outcome) -> tuple[str, str]:
        if o.rc != 0:
            return "WRONG", f"exit {o.rc}: {first_line(o)}"
        if predicate is not None:
            good, got = predicate(o)
            return ("ok" if good else "SILENT-WRONG"), f"exit 0: {got}"
        return "ok", f"exit 0: {first_line(o)}"

    return check


def either(*checks: Check) -> Check:
    """ok when any of ``checks`` is; else the first one's verdict."""

    def check(o: Outcome) -> tuple[str, str]:
        results = [c(o) for c in checks]
        for verdict, got in results:
            if verdict == "ok":
                return verdict, got
        return results[0]

    return check


def tool_refused(*needles: str | tuple[str, ...]) -> Check:
    """An MCP tool call refused: the tool's error (or a JSON-RPC error) naming ``needles``."""

    def check(o: Outcome) -> tuple[str, str]:
        if o.rc == 0:
            return "SILENT-WRONG", f"answered: {_brief(o.data)}"
        if o.rc != 1:
            return "WRONG", f"HTTP/transport {o.rc}: {o.out[:200]}"
        missing = [n for n in needles if not _has(o.text, n)]
        if missing:
            return "WRONG", f"refused, but the message lacks {missing}: {o.note[:200]}"
        return "ok", f"refused: {o.note[:200]}"

    return check


def tool_ok(predicate: Callable[[Any], tuple[bool, str]] | None = None) -> Check:
    def check(o: Outcome) -> tuple[str, str]:
        if o.rc != 0:
            return "WRONG", f"error {o.rc}: {o.note[:200] or o.out[:200]}"
        if predicate is not None:
            good, got = predicate(o.data)
            return ("ok" if good else "SILENT-WRONG"), got
        return "ok", _brief(o.data)

    return check


def _brief(data: Any) -> str:
    if isinstance(data, dict):
        if "hits" in data:
            return f"{len(data['hits'])} hit(s): " + ", ".join(
                f"{h.get('path')}:{h.get('start_line')}" for h in data["hits"][:4]
            )
        if "text" in data:
            return f"text of {data.get('path')} ({len(data['text'])} chars)"
        if "files" in data:
            return f"{data.get('count')} file(s)"
    return json.dumps(data)[:200] if data is not None else "(nothing)"


# --------------------------------------------------------------------------- the sandbox

LINKS = ("etclink", "ssh", "creds.txt", "root", "loop", "storelink", "tokenlink", "innerstore")
NEWLINE_LINK = "bad\nlink"
NEWLINE_FILE = "weird\nname.py"
SMALL_ROOT_FILES = ("src/ledger.py", "src/http_retry.py", "pkg/sub/mod.py", "docs/guide.md")

LEDGER = '''"""Ledger reconciliation: a book of entries checked against a bank statement."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LedgerEntry:
    """One booked amount on one account, in cents."""

    account: str
    cents: int


@dataclass
class LedgerBook:
    """The entries of a period; balances are summed on demand."""

    entries: list[LedgerEntry] = field(default_factory=list)

    def add(self, entry: LedgerEntry) -> None:
        self.entries.append(entry)

    def balance(self, account: str) -> int:
        return sum(entry.cents for entry in self.entries if entry.account == account)


def reconcile_ledger_entries(book: LedgerBook, statement: dict[str, int]) -> dict:
    """The accounts whose booked balance differs from the bank statement's."""
    return {
        account: (book.balance(account), cents)
        for account, cents in statement.items()
        if book.balance(account) != cents
    }
'''

HTTP_RETRY = '''"""Retrying a request when the connection drops."""

import random
import time


class RetryPolicy:
    """How often and how long to wait between attempts."""

    def __init__(self, attempts=5, base=0.2, cap=10.0):
        self.attempts = attempts
        self.base = base
        self.cap = cap

    def delay(self, attempt):
        """Exponential backoff with full jitter."""
        return random.uniform(0, min(self.cap, self.base * 2**attempt))


def retry_with_backoff(send, request, policy=None):
    """Send the request, retrying on ConnectionError with exponential backoff."""
    policy = policy or RetryPolicy()
    for attempt in range(policy.attempts):
        try:
            return send(request)
        except ConnectionError:
            if attempt == policy.attempts - 1:
                raise
            time.sleep(policy.delay(attempt))
'''

MOD = '''def forgettable_module_function(values):
    """Sum the squares of values (a module that the forget cases drop)."""
    return sum(value * value for value in values)
'''

GUIDE = """# Sandbox guide

## Reconciling a ledger

Call `reconcile_ledger_entries` with a book and the bank statement; it returns the accounts
whose balances differ.

## Retries

`retry_with_backoff` sends a request again when the connection drops, waiting longer each
time (exponential backoff with jitter).
"""

APP_JS = """// Invoice table rendering for the sandbox web app.
export function renderInvoiceTable(invoices, element) {
  const rows = invoices.map((invoice) =>
    `<tr><td>${invoice.number}</td><td>${invoice.total.toFixed(2)}</td></tr>`);
  element.innerHTML = `<table>${rows.join("")}</table>`;
}

export function totalOfInvoices(invoices) {
  return invoices.reduce((sum, invoice) => sum + invoice.total, 0);
}
"""

MAIN_GO = """package main

import (
\t"fmt"
\t"strconv"
\t"strings"
)

// ParseDuration reads "1h30m"-style durations into seconds.
func ParseDuration(text string) (int, error) {
\ttotal := 0
\tfor _, part := range strings.SplitAfter(text, "m") {
\t\tif part == "" {
\t\t\tcontinue
\t\t}
\t\tvalue, err := strconv.Atoi(strings.TrimRight(part, "hm"))
\t\tif err != nil {
\t\t\treturn 0, fmt.Errorf("bad duration %q: %w", text, err)
\t\t}
\t\ttotal += value
\t}
\treturn total, nil
}
"""

TEST_LEDGER = """from src.ledger import LedgerBook, LedgerEntry, reconcile_ledger_entries


def test_reconcile_reports_differences():
    book = LedgerBook()
    book.add(LedgerEntry("cash", 100))
    assert reconcile_ledger_entries(book, {"cash": 90}) == {"cash": (100, 90)}
"""

INNER = '''def inner_only_function_xyz(items):
    """A function of the nested root (served as a root of its own)."""
    return sorted(set(items))
'''

NEWLINE_SOURCE = '''def newline_named_function_qq():
    """Lives in a file whose name holds a newline."""
    return "newline"
'''


def _head_source(relpath: str) -> str:
    """A real source file of this repository as committed (the working tree is being
    edited by others meanwhile), else as it is on disk."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "show", f"HEAD:{relpath}"], capture_output=True, text=True
    )
    return done.stdout if done.returncode == 0 else (REPO / relpath).read_text()


class Sandbox:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.home = base / "home"
        self.outside = base / "outside"
        self.n = base / "n"
        self.inner = self.n / "inner"
        self.w = base / "w"
        self.s = base / "s"
        self.elsewhere = base / "elsewhere"
        tag = uuid.uuid4().hex[:12]
        names = (
            "shadow",
            "ssh",
            "credentials",
            "env",
            "gitconfig",
            "ignored",
            "watch",
            "victim",
            "victim2",
            "innerenv",
            "passwd-link",
        )
        self.markers: dict[str, str] = {name: f"LEAKMARK-{name}-{tag}" for name in names}
        self.markers["store-header"] = "SQLite format 3"
        with contextlib.suppress(OSError):
            first = Path("/etc/passwd").read_text().splitlines()[0]
            if first.startswith("root:"):
                self.markers["host-passwd"] = first
        self.files: dict[str, str] = {}

    def env(self, **extra: str | None) -> dict[str, str]:
        drop = ("ANEKIT_STORE", "ANEKIT_LANES", "ANEKIT_FAULT", "ANEKIT_MINIFIED_LINE")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env.update(
            ANEKIT_HOME=str(self.home),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            PYTHONUNBUFFERED="1",
        )
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def build(self) -> None:
        m = self.markers
        for folder in (self.home, self.outside / "etc", self.outside / ".ssh", self.elsewhere):
            folder.mkdir(parents=True, exist_ok=True)
        (self.outside / "etc" / "shadow").write_text(f"root:{m['shadow']}:19000:0:99999:7:::\n")
        (self.outside / "etc" / "passwd.py").write_text(f"PASSWORD = '{m['passwd-link']}'\n")
        (self.outside / ".ssh" / "id_rsa").write_text(
            f"-----BEGIN OPENSSH PRIVATE KEY-----\n{m['ssh']}\n-----END OPENSSH PRIVATE KEY-----\n"
        )
        (self.outside / "credentials").write_text(
            f"[default]\naws_access_key_id = AKIA{m['credentials']}\n"
            f"aws_secret_access_key = {m['credentials']}\n"
        )
        (self.outside / "watch_secret.py").write_text(
            f"def watch_outside_identifier_vv():\n    return '{m['watch']}'\n"
        )
        (self.outside / "victim").write_text(f"victim file {m['victim']}\n")
        (self.outside / "victim2").write_text(f"victim file {m['victim2']}\n")
        self.elsewhere.joinpath("loose.py").write_text("def loose(): return 1\n")

        n = self.n
        self.files = {
            "src/ledger.py": LEDGER,
            "src/http_retry.py": HTTP_RETRY,
            "src/terms.py": _head_source("src/anekit/search/terms.py"),
            "src/globs.py": _head_source("src/anekit/search/globs.py"),
            "src/lock.py": _head_source("src/anekit/search/lock.py"),
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/mod.py": MOD,
            "docs/guide.md": GUIDE,
            "web/app.js": APP_JS,
            "go/main.go": MAIN_GO,
            "tests/test_ledger.py": TEST_LEDGER,
            "config.toml": '[tool.sandbox]\nname = "sandbox"\nretries = 5\n',
            "inner/inner_mod.py": INNER,
            NEWLINE_FILE: NEWLINE_SOURCE,
        }
        for relpath, text in self.files.items():
            path = n / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (n / ".gitignore").write_text("ignored_secret.txt\n")
        (n / "ignored_secret.txt").write_text(f"api_key = '{m['ignored']}'\n")
        (n / ".env").write_text(f"DATABASE_PASSWORD={m['env']}\n")
        (n / ".git").mkdir()
        (n / ".git" / "config").write_text(
            f'[remote "origin"]\n\turl = https://user:{m["gitconfig"]}@example.invalid/r.git\n'
        )
        (n / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
        (self.inner / ".env").write_text(f"INNER_PASSWORD={m['innerenv']}\n")
        (n / "big").mkdir()
        line = "the quick brown fox jumps over the lazy dog " * 2 + "\n"  # 89 chars
        with (n / "big" / "huge.txt").open("w") as out:
            out.write(line * (20 * 1024 * 1024 // len(line)))
        (n / "assets").mkdir()
        (n / "assets" / "blob.dat").write_bytes(b"\x00\x01\x02BINARY\x00" * 4000)
        (n / "gen").mkdir()
        bundle = "var a=1;" + "".join(f"function f{i}(x){{return x*{i}+a}};" for i in range(200000))
        (n / "gen" / "bundle.js").write_text(bundle[:2_700_000] + "\n")
        table = "TABLE = [" + ",".join(str(i * 7919 % 100003) for i in range(250000))
        (n / "gen" / "generated_table.py").write_text(table[:1_200_000] + "]\n")
        os.mkfifo(n / "pipe.fifo")
        # links inside the root, each to something that must never be served
        (n / "etclink").symlink_to(self.outside / "etc")
        (n / "ssh").symlink_to(self.outside / ".ssh")
        (n / "creds.txt").symlink_to(self.outside / "credentials")
        (n / "root").symlink_to("/")
        (n / "loop").symlink_to(".")
        (n / "storelink").symlink_to(".anekit")
        (n / "tokenlink").symlink_to(self.home / "serve" / "token")
        (n / "innerstore").symlink_to("inner/.anekit")
        (n / NEWLINE_LINK).symlink_to(self.outside / "etc")
        for relpath in self.files:
            for marker in self.markers.values():
                assert marker not in self.files[relpath], (relpath, marker)
        for root in (self.w, self.s):
            self.small_root(root)
        (self.s / "pkg" / "sub" / "deeper").mkdir(parents=True)

    def small_root(self, root: Path) -> Path:
        """A root of a few of n's files under the same paths (so their vectors come from
        the machine cache, no lane started)."""
        for relpath in SMALL_ROOT_FILES:
            path = root / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.files[relpath])
        return root


# --------------------------------------------------------------------------- processes


class Runner:
    """Runs the cases, classifies and records them."""

    def __init__(self, sandbox: Sandbox, only: str | None) -> None:
        self.sb = sandbox
        self.only = only
        self.cases: list[Case] = []
        self.lock = threading.Lock()
        self.allowed_everywhere: set[str] = set()
        #: Paths made immutable (chattr +i), made mutable again at the end whatever happens.
        self.immutable: list[Path] = []

    def add_marker(self, label: str, marker: str) -> None:
        with self.lock:
            self.sb.markers[label] = marker

    # processes ---------------------------------------------------------------

    def cli(
        self,
        args: Sequence[str],
        cwd: Path | None = None,
        env: dict[str, str | None] | None = None,
        timeout: float = 60,
        stdin: bytes | None = None,
    ) -> Outcome:
        started = time.monotonic()
        process = subprocess.Popen(
            [*ANEKIT, *args],
            cwd=cwd or self.sb.n,
            env=self.sb.env(**(env or {})),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, err = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
        return Outcome(
            rc=process.returncode,
            out=out.decode("utf-8", "backslashreplace"),
            err=err.decode("utf-8", "backslashreplace"),
            seconds=time.monotonic() - started,
            timed_out=timed_out,
            limit=timeout,
        )

    def shown(
        self, args: Sequence[str], cwd: Path | None = None, env: dict[str, str | None] | None = None
    ) -> str:
        """The command as a shell line (long arguments shortened)."""
        words = [a if len(a) <= 120 else f"<{len(a)} characters: {a[:20]!r}...>" for a in args]
        prefix = "".join(f"{k}={shlex.quote(v or '')} " for k, v in (env or {}).items())
        where = cwd or self.sb.n
        return f"(cd {where} && {prefix}anekit {shlex.join(words)})"

    # recording ---------------------------------------------------------------

    def wanted(self, name: str) -> bool:
        return self.only is None or self.only in name

    def judge(
        self,
        o: Outcome,
        check: Check,
        allow: Iterable[str] = (),
        hang_ok: bool = False,
        echo: Iterable[str] = (),
    ) -> tuple[str, str, list[str]]:
        with self.lock:
            markers = dict(self.sb.markers)
        allowed = set(allow) | self.allowed_everywhere
        scanned = strip_echo(o.text, echo)
        leaks = [
            (label, m) for label, m in markers.items() if label not in allowed and m in scanned
        ]
        if leaks:
            lines = [
                line[:300] for line in scanned.splitlines() if any(m in line for _, m in leaks)
            ][:6]
            return "LEAK", f"marker(s) {[label for label, _ in leaks]} in the output", lines
        if o.down:
            return "DOWN", o.note or "GET /health did not answer", _lines(o.text)[-8:]
        if o.timed_out and not hang_ok:
            return "HANG", f"no answer within {o.limit:.0f} s", _lines(o.text)[-8:]
        if TRACEBACK in o.text:
            lines = traceback_block(o.text)
            raised = [
                line.rstrip()
                for line in o.text.splitlines()
                if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b", line)
            ]
            got = raised[-1] if raised else (lines[-1] if lines else "")
            if raised and raised[0] != raised[-1]:
                count = o.text.count(TRACEBACK)
                got = f"{raised[-1][:150]} ({count} tracebacks; the first: {raised[0][:150]})"
            shown = lines if len(lines) <= 8 else [*lines[:2], "...", *lines[-6:]]
            if raised and raised[-1] not in shown:
                shown.append(f"... {raised[-1]}")
            return "TRACEBACK", got[:400], shown
        try:
            verdict, got = check(o)
        except (KeyError, TypeError, AttributeError, IndexError) as error:
            verdict, got = (
                "WRONG",
                f"an answer of unexpected shape ({type(error).__name__}: {error}): {first_line(o)}",
            )
        return verdict, got, [line[:300] for line in _lines(o.text)[:10]]

    def record(
        self,
        name: str,
        surface: str,
        expected: str,
        command: str,
        outcome: Outcome,
        check: Check,
        allow: Iterable[str] = (),
        hang_ok: bool = False,
        echo: Iterable[str] = (),
    ) -> Case:
        verdict, got, excerpt = self.judge(outcome, check, allow, hang_ok, echo)
        case = Case(
            name=name,
            surface=surface,
            expected=expected,
            command=command,
            verdict=verdict,
            got=got,
            seconds=round(outcome.seconds, 2),
            rc=outcome.rc,
            excerpt=excerpt,
        )
        if not self.wanted(name):  # ran for its side effects only (--only)
            return case
        with self.lock:
            self.cases.append(case)
        mark = "  " if verdict == "ok" else "!!"
        say(f"{mark} {verdict:<12} {name} ({outcome.seconds:.1f} s): {got[:150]}")
        return case

    def skip(self, name: str, surface: str, expected: str, why: str) -> None:
        with self.lock:
            self.cases.append(Case(name, surface, expected, "-", "skip", why))
        say(f"   skip         {name}: {why}")

    def run(
        self,
        name: str,
        surface: str,
        expected: str,
        args: Sequence[str],
        check: Check,
        cwd: Path | None = None,
        env: dict[str, str | None] | None = None,
        timeout: float = 60,
        stdin: bytes | None = None,
        allow: Iterable[str] = (),
        hang_ok: bool = False,
        echo: Iterable[str] = (),
        setup: bool = False,
    ) -> Outcome | None:
        """One CLI case (a ``setup`` one runs even when ``--only`` leaves it out)."""
        if not self.wanted(name):
            return self.cli(args, cwd, env, timeout, stdin) if setup else None
        outcome = self.cli(args, cwd, env, timeout, stdin)
        self.record(
            name,
            surface,
            expected,
            self.shown(args, cwd, env),
            outcome,
            check,
            allow,
            hang_ok,
            echo,
        )
        return outcome

    def run_table(self, rows: Iterable[Row], **shared: Any) -> None:
        """The CLI cases of ``rows``, one after the other: each with the keyword arguments
        ``shared`` (``cwd``, ``timeout`` ...), those of its own row over them."""
        for name, surface, expected, args, check, *own in rows:
            self.run(name, surface, expected, args, check, **{**shared, **(own[0] if own else {})})


# --------------------------------------------------------------------------- MCP clients


def _tool_outcome(message: dict[str, Any] | None, raw: str, seconds: float) -> Outcome:
    """A tools/call answer as an Outcome: rc 0 with the result's data, rc 1 for the tool's
    error or a JSON-RPC error (its text in ``note``)."""
    if message is None:
        return Outcome(rc=-1, out=raw, seconds=seconds, note="no JSON-RPC answer")
    if "error" in message:
        error = message["error"]
        return Outcome(rc=1, out=raw, seconds=seconds, note=f"{error.get('message')}", data=error)
    result = message.get("result") or {}
    texts = " ".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))
    if result.get("isError"):
        return Outcome(rc=1, out=raw, seconds=seconds, note=texts)
    data = result.get("structuredContent")
    if data is None:
        with contextlib.suppress(ValueError):
            data = json.loads(texts)
    return Outcome(rc=0, out=raw, seconds=seconds, data=data, note=texts[:200])


class HttpMcp:
    """A plain-HTTP MCP client (the SDK's JSON responses: ``json_response=True``)."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.session: str | None = None
        self.ids = itertools.count(1)

    def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body or None, headers=headers or {})
            response = connection.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            connection.close()

    def headers(self, authorization: str | None = "default") -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
        }
        if authorization == "default":
            headers["Authorization"] = f"Bearer {self.token}"
        elif authorization is not None:
            headers["Authorization"] = authorization
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        return headers

    def rpc(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        timeout: float = 60,
        notify: bool = False,
    ) -> tuple[int, str, dict[str, Any] | None]:
        payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            payload["params"] = params
        if not notify:
            payload["id"] = next(self.ids)
        status, _, data = self.request(
            "POST", "/mcp", json.dumps(payload).encode(), self.headers(), timeout
        )
        text = data.decode("utf-8", "backslashreplace")
        message = None
        with contextlib.suppress(ValueError):
            message = json.loads(text)
        if message is None and "data:" in text:  # an event stream
            for line in text.splitlines():
                if line.startswith("data:"):
                    with contextlib.suppress(ValueError):
                        message = json.loads(line[5:])
        return status, text, message

    def initialize(
        self, authorization: str | None = "default"
    ) -> tuple[int, dict[str, str], bytes]:
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bad_inputs", "version": "1"},
            },
        }
        saved, self.session = self.session, None
        try:
            return self.request(
                "POST", "/mcp", json.dumps(body).encode(), self.headers(authorization), 30
            )
        finally:
            self.session = saved

    def open(self) -> None:
        status, headers, data = self.initialize()
        if status != 200:
            raise RuntimeError(f"initialize: HTTP {status}: {data[:300]!r}")
        self.session = headers.get("mcp-session-id")
        self.rpc("notifications/initialized", notify=True)

    def tool(self, name: str, arguments: dict[str, Any], timeout: float = 60) -> Outcome:
        started = time.monotonic()
        try:
            status, text, message = self.rpc(
                "tools/call", {"name": name, "arguments": arguments}, timeout
            )
        except TimeoutError:
            return Outcome(rc=-1, seconds=time.monotonic() - started, timed_out=True, limit=timeout)
        except OSError as error:
            return Outcome(rc=-1, out=str(error), seconds=time.monotonic() - started)
        seconds = time.monotonic() - started
        if status != 200:
            return Outcome(
                rc=status, out=text, seconds=seconds, note=f"HTTP {status}: {text[:200]}"
            )
        return _tool_outcome(message, text, seconds)


class StdioMcp:
    """``anekit mcp ROOTS`` with JSON-RPC lines on its stdin and stdout."""

    def __init__(self, args: Sequence[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log.open("wb")
        self.process = subprocess.Popen(
            [*ANEKIT, "mcp", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw: list[str] = []
        self.ids = itertools.count(1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, payload: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode() + b"\n"
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def wait_for(self, number: int, timeout: float) -> tuple[dict[str, Any] | None, str]:
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if not line:
                break
            text = line.decode("utf-8", "backslashreplace")
            seen.append(text)
            self.raw.append(text)
            with contextlib.suppress(ValueError):
                message = json.loads(text)
                if isinstance(message, dict) and message.get("id") == number:
                    return message, "".join(seen)
        return None, "".join(seen)

    def initialize(self, timeout: float = 90) -> bool:
        number = next(self.ids)
        self.send(
            {
                "jsonrpc": "2.0",
                "id": number,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "bad_inputs", "version": "1"},
                },
            }
        )
        message, _ = self.wait_for(number, timeout)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return message is not None

    def tool(self, name: str, arguments: dict[str, Any], timeout: float = 60) -> Outcome:
        number = next(self.ids)
        started = time.monotonic()
        try:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": number,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments},
                }
            )
        except OSError as error:
            return Outcome(rc=-1, out=str(error), note="the server's stdin is closed")
        message, raw = self.wait_for(number, timeout)
        outcome = _tool_outcome(message, raw, time.monotonic() - started)
        if message is None and self.process.poll() is None:
            outcome.timed_out, outcome.limit = True, timeout
        return outcome

    def close(self) -> str:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()
        return Path(self.log.name).read_text(errors="backslashreplace")


class Daemon:
    """``anekit serve ROOTS --port P``, its log, its /health."""

    def __init__(self, sb: Sandbox, roots: Sequence[Path], port: int, log: Path) -> None:
        self.sb = sb
        self.roots = roots
        self.port = port
        self.log_path = log
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, timeout: float = 120) -> float:
        started = time.monotonic()
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [*ANEKIT, "serve", *map(str, self.roots), "--port", str(self.port)],
            cwd=self.sb.n,
            env=self.sb.env(ANEKIT_LANE_IDLE="60"),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        self.starts += 1
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"anekit serve exited {self.process.returncode}: {self.log()[-2000:]}"
                )
            if self.health(2)[0]:
                return time.monotonic() - started
            time.sleep(0.2)
        raise RuntimeError(
            f"anekit serve did not answer /health in {timeout} s: {self.log()[-2000:]}"
        )

    def health(self, timeout: float = 5) -> tuple[bool, float]:
        started = time.monotonic()
        try:
            connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
            connection.request("GET", "/health")
            response = connection.getresponse()
            good = response.status == 200 and b"ok" in response.read()
            connection.close()
        except OSError:
            good = False
        return good, time.monotonic() - started

    def rss_mb(self) -> float:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return math.nan

    def log(self) -> str:
        return self.log_path.read_text(errors="backslashreplace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


# --------------------------------------------------------------------------- checks on results


def hits_of(o: Outcome) -> list[dict[str, Any]]:
    parsed = o.json() if o.data is None else o.data
    if isinstance(parsed, dict) and isinstance(parsed.get("hits"), list):
        return parsed["hits"]
    return []


def text_hits(o: Outcome) -> list[str]:
    """The hit lines of ``anekit search``'s text output (``path:start-end ...``)."""
    return [line for line in o.out.splitlines() if re.match(r"^\S.*:\d+-\d+", line)]


def nonempty(o: Outcome) -> tuple[bool, str]:
    found = text_hits(o) or hits_of(o)
    return bool(found), f"{len(found)} hit(s)" if found else "no hits (exit 0)"


def no_hits_or_refused(o: Outcome) -> tuple[str, str]:
    """For a filter that can match nothing: exit 0 with no hits, or a clear refusal."""
    if o.rc == 0:
        found = text_hits(o) or hits_of(o)
        if found:
            return "SILENT-WRONG", f"exit 0 with {len(found)} hit(s): {str(found[0])[:120]}"
        return "ok", "exit 0, no hits"
    return refused()(o)


def results_or_refused(o: Outcome) -> tuple[str, str]:
    """For a filter that should either work or be refused: exit 0 with hits (the filter
    understood), or a clear refusal; exit 0 with no hits is silently wrong."""
    if o.rc == 0:
        found = text_hits(o) or hits_of(o)
        if found:
            return "ok", f"exit 0 with {len(found)} hit(s): {str(found[0])[:100]}"
        return "SILENT-WRONG", "exit 0 with no hits: the filter matched nothing, silently"
    return refused()(o)


def completes_within(seconds: float, inner: Check) -> Check:
    def check(o: Outcome) -> tuple[str, str]:
        if o.seconds > seconds:
            return "HANG", f"took {o.seconds:.2f} s (limit {seconds} s)"
        verdict, got = inner(o)
        return verdict, f"{got} in {o.seconds:.2f} s"

    return check


BAD_PREFIXES = (
    tuple(f"{link}/" for link in LINKS) + LINKS + (".env", ".git", ".anekit", "ignored_secret")
)


def clean_paths(paths: Iterable[str]) -> list[str]:
    return [p for p in paths if p.startswith(BAD_PREFIXES) or "/." in p or p.startswith(".")]


# --------------------------------------------------------------------------- the cases


def fast_start(r: Runner) -> None:
    sb = r.sb
    missing = {
        "doctor": ["doctor", "missing.py"],
        "simulate": ["simulate", "missing.py"],
        "run": ["run", "missing.py"],
        "convert": ["convert", "missing.pt"],
    }
    for command, args in missing.items():
        name = f"fast-start-{command}-missing"
        if not r.wanted(name):
            continue
        outcome = r.cli(args, cwd=sb.elsewhere, timeout=60)
        check = refused(
            args[-1],
            ("no such file", "no such python file", "does not exist", "not found", "missing: "),
        )

        def timed(o: Outcome, check: Check = check) -> tuple[str, str]:
            verdict, got = check(o)
            return verdict, f"{got} [wall {o.seconds:.2f} s]"

        r.record(
            name,
            f"cli:{command}",
            "exit 2 naming the file as missing, fast",
            r.shown(args, sb.elsewhere),
            outcome,
            timed,
        )


def docs_check(r: Runner) -> None:
    if not r.wanted("docs-search-md-next-step"):
        return
    text = (REPO / "docs" / "search.md").read_text()
    found = [line for line in text.splitlines() if "next step" in line.lower()]
    outcome = Outcome(rc=0, out="\n".join(found))
    r.record(
        "docs-search-md-next-step",
        "docs",
        'docs/search.md does not call the HTTP daemon "the next step"',
        "grep -i 'next step' docs/search.md",
        outcome,
        lambda o: ("WRONG", f"says: {found[0][:200]}") if found else ("ok", "not there"),
    )


def index_cases(r: Runner) -> dict[str, Any]:
    """Index the roots (n, its nested root, the small ones) and check what was set aside."""
    sb = r.sb
    summary: dict[str, Any] = {}
    r.run(
        "index-nested-root",
        "cli:index",
        "exit 0",
        ["index"],
        succeeded(),
        cwd=sb.inner,
        timeout=240,
        setup=True,
    )
    o = r.cli(["index", "--json"], cwd=sb.n, timeout=240)
    command = r.shown(["index", "--json"], sb.n)
    parsed = o.json() or {}
    summary = parsed
    skipped = {
        item.get("path", item.get("relpath")): item for item in parsed.get("skipped_files", [])
    }

    def reason_of(relpath: str) -> str | None:
        item = skipped.get(relpath)
        return None if item is None else item.get("reason")

    def set_aside(relpaths: Sequence[str], reason: str) -> Check:
        def check(o: Outcome) -> tuple[str, str]:
            if o.rc != 0:
                return "WRONG", f"exit {o.rc}: {first_line(o)}"
            wrong = {p: reason_of(p) for p in relpaths if reason_of(p) != reason}
            if wrong:
                return "SILENT-WRONG", f"not set aside as {reason!r}: {wrong}"
            return "ok", f"{len(relpaths)} set aside as {reason!r}"

        return check

    r.record(
        "index-root",
        "cli:index",
        "exit 0, a summary in JSON, no walk of / (240 s limit)",
        command,
        o,
        succeeded(
            lambda o: (
                bool(parsed),
                f"{parsed.get('files')} files, {parsed.get('chunks')} chunks, "
                f"skipped {parsed.get('skipped')}",
            )
        ),
    )
    r.record(
        "index-links-set-aside",
        "cli:index",
        "every link in the root set aside as 'symlink'",
        command,
        o,
        set_aside([*LINKS, NEWLINE_LINK], "symlink"),
    )

    def not_walked(o: Outcome) -> tuple[str, str]:
        files = parsed.get("files")
        if not isinstance(files, int):
            return "WRONG", f"no file count: {first_line(o)}"
        expected = len(sb.files)
        if files > expected + 10:
            return (
                "SILENT-WRONG",
                f"{files} files indexed (the tree has {expected}): a link was followed",
            )
        return "ok", f"{files} files indexed, index took {o.seconds:.1f} s"

    r.record(
        "index-root-link-not-walked",
        "cli:index",
        "root -> / not walked (few files, in time)",
        command,
        o,
        not_walked,
    )
    r.record(
        "index-minified",
        "cli:index",
        "2.7 MB one-line .js and 1.2 MB one-line .py set aside as 'minified', "
        "not thousands of chunks",
        command,
        o,
        lambda o: (
            set_aside(["gen/bundle.js", "gen/generated_table.py"], "minified")(o)
            if (parsed.get("chunks") or 0) < 600
            else ("SILENT-WRONG", f"{parsed.get('chunks')} chunks")
        ),
    )
    r.record(
        "index-20mb-too-large",
        "cli:index",
        "big/huge.txt set aside as 'too large'",
        command,
        o,
        set_aside(["big/huge.txt"], "too large"),
    )
    r.record(
        "index-fifo",
        "cli:index",
        "pipe.fifo set aside as 'special file', no hang",
        command,
        o,
        set_aside(["pipe.fifo"], "special file"),
    )
    r.record(
        "index-binary",
        "cli:index",
        "assets/blob.dat set aside as 'binary'",
        command,
        o,
        set_aside(["assets/blob.dat"], "binary"),
    )

    o = r.cli(["index", "--verbose"], cwd=sb.n, timeout=120)
    command = r.shown(["index", "--verbose"], sb.n)
    r.record(
        "index-verbose-no-hint",
        "cli:index",
        "--verbose lists the skipped files and does not say '(--verbose lists them)'",
        command,
        o,
        succeeded(
            lambda o: (
                "--verbose lists them" not in o.text and "skipped etclink: symlink" in o.text,
                "says '(--verbose lists them)'"
                if "--verbose lists them" in o.text
                else (
                    "lists 'skipped etclink: symlink'"
                    if "skipped etclink: symlink" in o.text
                    else "does not list etclink"
                ),
            )
        ),
    )
    raw = "bad\nlink"
    r.record(
        "index-verbose-newline-name",
        "cli:index",
        "the link named 'bad\\nlink' printed escaped, never with a raw newline",
        command,
        o,
        succeeded(
            lambda o: (
                raw not in o.text and "bad\\nlink" in o.text,
                "raw newline printed"
                if raw in o.text
                else ("escaped" if "bad\\nlink" in o.text else "not listed"),
            )
        ),
    )
    for root in (sb.w, sb.s):
        r.run(
            f"index-small-root-{root.name}",
            "cli:index",
            "exit 0 (vectors from the cache)",
            ["index"],
            succeeded(),
            cwd=root,
            timeout=240,
            setup=True,
        )
    return summary


def more_index_cases(r: Runner) -> None:
    sb = r.sb
    X = "cli:index"
    r.run_table(
        [
            ("index-nonexistent", X, "exit 2 naming the path", ["index", "/nonexistent/x"],
             refused("/nonexistent/x")),
            ("index-empty-string", X, "exit 2", ["index", ""], refused()),
            ("index-file-in-root", X, "exit 0 (updates that file)", ["index", "src/ledger.py"],
             succeeded()),
            ("index-file-unindexed", X, "exit 2: no index holds it",
             ["index", str(sb.elsewhere / "loose.py")], refused(("no index", "index a folder")),
             {"cwd": sb.n}),
            ("index-dev-null", X, "exit 2 (a device, no index holds it)", ["index", "/dev/null"],
             refused()),
        ]
    )  # fmt: skip

    if r.wanted("index-link-arg"):
        o = r.cli(["index", "etclink"], cwd=sb.n, timeout=120)
        made = (sb.outside / "etc" / ".anekit").exists()

        def link_arg(o: Outcome) -> tuple[str, str]:
            if made:
                return (
                    "WRONG",
                    f"exit {o.rc}: made a new index at the link's target outside the root "
                    f"({sb.outside / 'etc' / '.anekit'}): {first_line(o)}",
                )
            if o.rc in (0, 2):
                return "ok", f"exit {o.rc}: {first_line(o)}"
            return "WRONG", f"exit {o.rc}: {first_line(o)}"

        r.record(
            "index-link-arg",
            "cli:index",
            "the link set aside (exit 0) or refused (exit 2); "
            "never an index made at its target outside the root",
            r.shown(["index", "etclink"]),
            o,
            link_arg,
        )
        shutil.rmtree(sb.outside / "etc" / ".anekit", ignore_errors=True)
    r.skip(
        "index-root-link-arg",
        "cli:index",
        "`anekit index root` (root -> /) refused",
        "not run: it would index the real / (and write /.anekit) "
        "if it behaved as `index etclink` does",
    )
    r.run(
        "index-lane-typo",
        "cli:index",
        "exit 2 naming the lanes (even with nothing to embed)",
        ["index", "--lane", "cpuu"],
        refused("cpu"),
        cwd=sb.n,
    )
    if r.wanted("index-model-typo"):
        before = r.cli(["status", "--json"], cwd=sb.s).json() or {}
        o = r.cli(["index", "--model", "no-such-model-xyz"], cwd=sb.s, timeout=120)
        after = r.cli(["status", "--json"], cwd=sb.s).json() or {}

        def model_typo(o: Outcome) -> tuple[str, str]:
            lost = (
                f"; store chunks {before.get('chunks')} -> {after.get('chunks')}"
                if before.get("chunks") != after.get("chunks")
                else ""
            )
            verdict, got = refused("no-such-model-xyz")(o)
            if lost and verdict == "ok":
                return "WRONG", got + lost
            return verdict, got + lost

        r.record(
            "index-model-typo",
            "cli:index",
            "exit 2 naming the model; the store untouched",
            r.shown(["index", "--model", "no-such-model-xyz"], sb.s),
            o,
            model_typo,
        )
        r.cli(["index"], cwd=sb.s, timeout=240)
    r.run_table(
        [
            ("index-wait-negative", X, "exit 2 (usage)", ["index", "--wait", "-1"],
             refused("--wait")),
            ("index-wait-text", X, "exit 2 (usage)", ["index", "--wait", "soon"],
             refused("--wait")),
            ("index-store-is-file", X, "exit 2: the store is a file",
             ["index", "--store", "src/ledger.py"], refused("src/ledger.py")),
            ("index-store-under-file", X, "exit 2, one line naming the store",
             ["index", "--store", str(sb.n / "src" / "ledger.py" / "store")],
             refused("ledger.py", one_line=True), {"cwd": sb.s}),
            ("index-ray-nowhere-unchanged", X,
             "exit 2: nothing listens there, even with nothing to embed "
             "(as an unknown --lane is refused)",
             ["index", "--ray", "127.0.0.1:1"], refused(("ray", "Ray")),
             {"cwd": sb.s, "timeout": 120}),
        ]
    )  # fmt: skip
    if r.wanted("index-ray-nowhere-changed"):
        (sb.s / "src" / "ledger.py").write_text(LEDGER + "\n# changed for the --ray case\n")
        r.run(
            "index-ray-nowhere-changed",
            "cli:index",
            "exit 2 at once: nothing listens there (a file to embed)",
            ["index", "--ray", "127.0.0.1:1"],
            refused(("ray", "Ray")),
            cwd=sb.s,
            timeout=180,
        )
        (sb.s / "src" / "ledger.py").write_text(LEDGER)
        r.cli(["index"], cwd=sb.s, timeout=240)
    r.run_table(
        [
            ("index-json-nonexistent", X, "--json: a JSON error object, exit 2",
             ["index", "--json", "/nonexistent/x"], refused(json_error=True)),
            ("index-option-typo", X, "exit 2 (no such option)", ["index", "--verbse"],
             refused("--verbse")),
        ]
    )  # fmt: skip


def late_index_cases(r: Runner) -> None:
    """Run after the daemon's cases: these may put odd paths into n's store."""
    sb = r.sb

    def two_roots(o: Outcome) -> tuple[str, str]:
        if o.rc == 0:
            parsed = o.json() or {}
            return (
                "SILENT-WRONG",
                f"exit 0, root {parsed.get('root')}: "
                "the path in the other root was not indexed nor refused",
            )
        return refused()(o)

    r.run(
        "index-two-roots",
        "cli:index",
        "exit 2 (paths in two indexes) or both updated",
        ["index", "--json", str(sb.n / "src"), str(sb.s / "src")],
        two_roots,
    )


def search_cases(r: Runner) -> None:
    sb = r.sb
    run = r.run
    S = "cli:search"

    def empty_query(o: Outcome) -> tuple[str, str]:
        if o.rc == 0:
            found = text_hits(o) or hits_of(o)
            return (
                ("SILENT-WRONG", f"exit 0 with {len(found)} arbitrary hit(s)")
                if found
                else ("ok", "exit 0, no hits")
            )
        return refused()(o)

    r.run_table(
        [
            ("search-ok", S, "exit 0, src/ledger.py first", ["search", "reconcile ledger entries"],
             succeeded(
                 lambda o: (
                     bool(text_hits(o)) and text_hits(o)[0].startswith("src/ledger.py"),
                     (text_hits(o) or ["no hits"])[0][:120],
                 )
             )),
            ("search-json-ok", S, "exit 0, valid JSON with hits",
             ["search", "retry with backoff", "--json"],
             succeeded(lambda o: (bool(hits_of(o)), f"{len(hits_of(o))} hit(s)"))),
            ("search-empty-query", S, "exit 2 (empty query) or no hits", ["search", ""],
             empty_query),
            ("search-blank-query", S, "exit 2 (blank query) or no hits", ["search", "   "],
             empty_query),
            ("search-k0", S, "exit 2 (usage)", ["search", "x", "-k", "0"], refused("-k")),
            ("search-k-negative", S, "exit 2 (usage)", ["search", "x", "-k", "-5"],
             refused("-k")),
            ("search-k-text", S, "exit 2 (usage)", ["search", "x", "-k", "ten"], refused("ten")),
            ("search-k-huge", S, "exit 0 (every chunk at most) or a refusal",
             ["search", "ledger", "-k", "100000"], either(succeeded(), refused())),
            ("search-k-overflow", S, "exit 0 or a refusal, no traceback",
             ["search", "ledger", "-k", "99999999999999999999999"],
             either(succeeded(), refused())),
            ("search-mode-typo", S, "exit 2 (usage)", ["search", "x", "--mode", "fuzzy"],
             refused("fuzzy")),
            ("search-lang-typo", S, "exit 2 listing the languages",
             ["search", "ledger", "--lang", "pyhton"], refused("pyhton", "python")),
            ("search-lang-empty", S, "exit 2", ["search", "ledger", "--lang", ""], refused()),
            ("search-lang-bang", S, "exit 2", ["search", "ledger", "--lang", "!"], refused()),
            ("search-lang-case", S, "hits (case ignored) or a refusal naming 'python'",
             ["search", "ledger", "--lang", "Python"], results_or_refused),
            ("search-lang-comma", S, "hits for both, or a refusal",
             ["search", "ledger", "--lang", "python,go"], results_or_refused),
            ("search-lang-contradiction", S, "no hits or a refusal",
             ["search", "ledger", "--lang", "python", "--lang", "!python"], no_hits_or_refused),
            ("search-path-bracket", S, "exit 2: an invalid glob",
             ["search", "ledger", "--path", "["], refused("[")),
            ("search-path-empty", S, "exit 2, or the filter ignored (hits)",
             ["search", "ledger", "--path", ""], results_or_refused),
            ("search-path-bang", S, "exit 2, or the filter ignored (hits)",
             ["search", "ledger", "--path", "!"], results_or_refused),
            ("search-path-nomatch", S, "exit 0 no hits, or a refusal",
             ["search", "ledger", "--path", "nosuchdir/"], no_hits_or_refused),
            ("search-path-absolute", S, "no hits or a refusal",
             ["search", "shadow root", "--path", "/etc/**"], no_hits_or_refused),
            ("search-path-dotdot", S, "no hits or a refusal",
             ["search", "shadow root", "--path", "../**"], no_hits_or_refused),
            ("search-path-through-link", S, "no hits or a refusal",
             ["search", "shadow", "--path", "etclink/**"], no_hits_or_refused),
        ]
    )  # fmt: skip
    for label, glob in (("12-stars", "**/************x"), ("50-stars", "**/" + "*" * 50)):
        run(
            f"search-path-glob-{label}",
            S,
            "answers in seconds (RE2), exit 0",
            ["search", "ledger", "--path", glob],
            completes_within(8, either(succeeded(), refused())),
            timeout=120,
        )
    big = "retry " * (100 * 1024 // 6)

    def not_echoed(inner: Check) -> Check:
        def check(o: Outcome) -> tuple[str, str]:
            verdict, got = inner(o)
            if len(o.text) > 5000:
                return "WRONG", f"{got}; {len(o.text)} characters of output (the query echoed back)"
            return verdict, got

        return check

    r.run_table(
        [
            ("search-ext-glob", S, "exit 2 (a glob, not an extension) or only .py hits",
             ["search", "ledger", "--ext", "*.py"], results_or_refused),
            ("search-ext-empty", S, "exit 2 or the filter ignored",
             ["search", "ledger", "--ext", ""], results_or_refused),
            ("search-ext-upper", S, "hits (case ignored) or a refusal",
             ["search", "ledger", "--ext", "PY"], results_or_refused),
            ("search-ext-comma", S, "hits for both or a refusal",
             ["search", "ledger", "--ext", "py,js"], results_or_refused),
            ("search-ext-nomatch", S, "no hits or a refusal",
             ["search", "ledger", "--ext", "zzz"], no_hits_or_refused),
            ("search-store-typo", S, "exit 2 naming TYPO",
             ["search", "ledger", "--store", "TYPO"], refused("TYPO")),
            ("search-store-root-folder", S,
             "hits (the root's store) or exit 2 saying what to name",
             ["search", "ledger", "--store", str(sb.n)], results_or_refused,
             {"cwd": sb.elsewhere}),
            ("search-store-file", S, "exit 2", ["search", "ledger", "--store", "src/ledger.py"],
             refused()),
            ("search-store-other-root", S, "exit 0, hits of w",
             ["search", "ledger", "--store", str(sb.w / ".anekit")], succeeded(nonempty)),
            ("search-no-index", S, "exit 2: no index", ["search", "ledger"],
             refused("anekit index"), {"cwd": sb.elsewhere}),
            ("search-no-index-json", S, "a JSON error object, exit 2",
             ["search", "ledger", "--json"], refused(json_error=True), {"cwd": sb.elsewhere}),
            ("search-lang-typo-json", S, "a JSON error object, exit 2",
             ["search", "ledger", "--lang", "pyhton", "--json"], refused(json_error=True)),
            ("search-k0-json", S, "a JSON error object, exit 2",
             ["search", "ledger", "-k", "0", "--json"], refused(json_error=True)),
            ("search-mode-typo-json", S, "a JSON error object, exit 2",
             ["search", "ledger", "--mode", "fuzzy", "--json"], refused(json_error=True)),
            ("search-query-100kb", S, "exit 2, the query not echoed", ["search", big],
             not_echoed(refused("1000"))),
            ("search-query-100kb-json", S, "a JSON error object, the query not echoed",
             ["search", big, "--json"], not_echoed(refused(json_error=True))),
            ("search-query-1001", S, "exit 2 (over 1,000 characters)", ["search", "x" * 1001],
             refused("1000", ("1001", "1,001"))),
            ("search-query-1000", S, "exit 0 (at the limit)", ["search", "ledger " + "y" * 993],
             succeeded()),
            ("search-unicode", S, "exit 0", ["search", "日本語のクエリ 😀 naïve ledger"],
             succeeded()),
            ("search-control-chars", S, "exit 0, no raw escape in the output",
             ["search", "\x1b[31mledger\x07"],
             succeeded(
                 lambda o: (
                     "\x1b" not in o.text, "raw ESC printed" if "\x1b" in o.text else "clean"
                 )
             )),
        ]
    )  # fmt: skip
    fts = [
        '"unbalanced',
        "AND OR NOT",
        "NEAR(a b",
        "*",
        "col:value",
        "-x",
        "^start",
        "a'b",
        "((((",
        "{}",
        "ledger*",
        "\\",
    ]
    for number, query in enumerate(fts):
        run(
            f"search-fts-syntax-{number}",
            S,
            f"exit 0 for query {query!r} (keyword mode)",
            ["search", "--mode", "keyword", "--", query],
            succeeded(),
        )
    run(
        "search-newline-path",
        S,
        "the file 'weird\\nname.py' printed escaped, no raw newline",
        ["search", "newline_named_function_qq"],
        succeeded(
            lambda o: (
                "weird\nname" not in o.out and "weird\\nname" in o.out,
                "raw newline in the path"
                if "weird\nname" in o.out
                else ("escaped" if "weird\\nname" in o.out else "not found"),
            )
        ),
    )
    m = sb.markers
    for label, query in (
        ("shadow", "root shadow password hash"),
        ("ssh", "BEGIN OPENSSH PRIVATE KEY"),
        ("credentials", "aws_secret_access_key"),
        ("marker", m["shadow"]),
        ("env", "DATABASE_PASSWORD"),
        ("gitconfig", "remote origin url"),
        ("ignored", "api_key"),
        ("passwd", "root:x:0:0"),
    ):
        for mode in ("keyword", "hybrid"):
            run(
                f"search-leak-{label}-{mode}",
                S,
                "no marker in any hit",
                ["search", "--mode", mode, "--json", "-k", "50", "--", query],
                succeeded(
                    lambda o: (
                        not clean_paths(h["path"] for h in hits_of(o)),
                        f"{len(hits_of(o))} hit(s), "
                        f"bad paths {clean_paths(h['path'] for h in hits_of(o))}",
                    )
                ),
                echo=[query],
            )
        run(
            f"search-leak-{label}-text",
            S,
            "no marker in the text output",
            ["search", "-k", "50", "--", query],
            either(succeeded(), refused()),
        )
    env_store = {"ANEKIT_STORE": str(sb.n / ".anekit")}
    T = "cli:status"
    r.run_table(
        [
            ("search-env-store", S, "ANEKIT_STORE from another folder: hits of n",
             ["search", "reconcile ledger"], succeeded(nonempty),
             {"cwd": sb.elsewhere, "env": env_store}),
            ("search-env-store-typo", S, "exit 2 naming the store", ["search", "ledger"],
             refused("nope"),
             {"cwd": sb.elsewhere, "env": {"ANEKIT_STORE": str(sb.base / "nope")}}),
            ("search-env-store-empty", S, "empty ANEKIT_STORE taken as unset (exit 0) or exit 2",
             ["search", "ledger"], either(succeeded(nonempty), refused()),
             {"env": {"ANEKIT_STORE": ""}}),
            ("search-option-typo", S, "exit 2 (no such option)",
             ["search", "x", "--langg", "python"], refused("--langg")),
            ("search-no-query", S, "exit 2 (usage)", ["search"], refused("QUERY")),
            ("status-ok", T, "exit 0, health ok", ["status"],
             succeeded(lambda o: ("health: ok" in o.out, first_line(o)))),
            ("status-json", T, "valid JSON, health ok", ["status", "--json"],
             succeeded(
                 lambda o: (
                     (o.json() or {}).get("health") == "ok", str((o.json() or {}).get("health"))
                 )
             )),
            ("status-no-index", T, "exit 2", ["status"], refused("anekit index"),
             {"cwd": sb.elsewhere}),
            ("status-no-index-json", T, "a JSON error object", ["status", "--json"],
             refused(json_error=True), {"cwd": sb.elsewhere}),
            ("status-store-typo", T, "exit 2 naming TYPO", ["status", "--store", "TYPO"],
             refused("TYPO")),
            ("status-extra-arg", T, "exit 2 (usage)", ["status", "foo"], refused("foo")),
            ("status-store-from-elsewhere", T, "exit 0, the root is n",
             ["status", "--json", "--store", str(sb.n / ".anekit")],
             succeeded(
                 lambda o: (
                     (o.json() or {}).get("root") == str(sb.n),
                     f"root {(o.json() or {}).get('root')}",
                 )
             ),
             {"cwd": sb.elsewhere}),
            ("status-env-store", T, "ANEKIT_STORE from another folder: the root is n",
             ["status", "--json"],
             succeeded(
                 lambda o: (
                     (o.json() or {}).get("root") == str(sb.n),
                     f"root {(o.json() or {}).get('root')}",
                 )
             ),
             {"cwd": sb.elsewhere, "env": env_store}),
        ]
    )  # fmt: skip


def forget_cases(r: Runner) -> None:
    sb = r.sb
    F = "cli:forget"

    def zero_or_refused(o: Outcome) -> tuple[str, str]:
        if o.rc == 0:
            return (
                ("ok", f"exit 0: {first_line(o)}")
                if re.search(r"\b0 file", o.text) or '"removed": []' in o.out
                else ("SILENT-WRONG", first_line(o))
            )
        return refused()(o)

    r.run_table(
        [
            ("forget-empty", F, "exit 2 naming --all", ["forget", ""], refused("--all")),
            ("forget-dot-at-root", F, "exit 2 naming --all", ["forget", "."], refused("--all")),
            ("forget-root-absolute", F, "exit 2 naming --all", ["forget", str(sb.s)],
             refused("--all")),
            ("forget-no-args", F, "exit 2 (usage)", ["forget"], refused("--all")),
            ("forget-all-and-path", F, "exit 2 (usage)", ["forget", "--all", "x"],
             refused("--all")),
            ("forget-json-empty", F, "a JSON error object", ["forget", "", "--json"],
             refused(json_error=True)),
            ("forget-wait-negative", F, "exit 2 (usage)", ["forget", "x", "--wait", "-1"],
             refused("--wait")),
            ("forget-missing", F, "says nothing was there (0 files) or exit 2",
             ["forget", "nosuch.py"], zero_or_refused),
            ("forget-outside-root", F, "exit 2: outside the index's root",
             ["forget", "../n/src/ledger.py"], refused()),
            ("forget-absolute-outside", F, "exit 2: outside the index's root",
             ["forget", "/etc"], refused()),
        ],
        cwd=sb.s,
    )  # fmt: skip

    def removed(expected: list[str]) -> Check:
        def predicate(o: Outcome) -> tuple[bool, str]:
            got = (o.json() or {}).get("removed")
            return got == expected, f"removed {got}"

        return succeeded(predicate)

    r.run(
        "forget-from-subfolder-store",
        F,
        "the file dropped (path taken from the current folder)",
        ["forget", "mod.py", "--store", "../../.anekit", "--json"],
        removed(["pkg/sub/mod.py"]),
        cwd=sb.s / "pkg" / "sub",
    )
    r.cli(["index"], cwd=sb.s, timeout=240)
    r.run(
        "forget-from-deeper-subfolder-store",
        F,
        "the file dropped",
        ["forget", "../mod.py", "--store", "../../../.anekit", "--json"],
        removed(["pkg/sub/mod.py"]),
        cwd=sb.s / "pkg" / "sub" / "deeper",
    )
    r.cli(["index"], cwd=sb.s, timeout=240)
    env_store = {"ANEKIT_STORE": str(sb.s / ".anekit")}
    r.run(
        "forget-env-store-absolute",
        F,
        "ANEKIT_STORE from another folder: the file dropped",
        ["forget", str(sb.s / "pkg" / "sub" / "mod.py"), "--json"],
        removed(["pkg/sub/mod.py"]),
        cwd=sb.elsewhere,
        env=env_store,
    )
    r.cli(["index"], cwd=sb.s, timeout=240)

    def relative_elsewhere(o: Outcome) -> tuple[str, str]:
        got = (o.json() or {}).get("removed") if o.rc == 0 else None
        if o.rc == 0 and not got:
            return (
                "SILENT-WRONG",
                "exit 0, nothing removed: the relative path was taken "
                "from neither the root nor refused",
            )
        return either(removed(["pkg/sub/mod.py"]), refused())(o)

    r.run(
        "forget-env-store-relative",
        F,
        "a path relative to the current folder outside the root: exit 2 (or taken from the root)",
        ["forget", "pkg/sub/mod.py", "--json"],
        relative_elsewhere,
        cwd=sb.elsewhere,
        env=env_store,
    )
    r.cli(["index"], cwd=sb.s, timeout=240)


def watch_embed_cli_cases(r: Runner) -> None:
    sb = r.sb
    W = "cli:watch"

    def still_running_is_wrong(o: Outcome) -> tuple[str, str]:
        if o.timed_out:
            if re.search(r"\berror\b", o.text):
                return (
                    "WRONG",
                    f"prints the error but keeps running, retrying ({o.limit:.0f} s, killed): "
                    f"{first_line(o)}",
                )
            return (
                "SILENT-WRONG",
                f"accepted it and kept watching ({o.limit:.0f} s, killed): {first_line(o)}",
            )
        return refused()(o)

    def keeps_watching(o: Outcome) -> tuple[str, str]:
        if o.timed_out:
            return "ok", f"still watching after {o.limit:.0f} s (then killed): {first_line(o)}"
        return "WRONG", f"exit {o.rc} before {o.limit:.0f} s: {first_line(o)}"

    r.run_table(
        [
            ("watch-nonexistent", W, "exit 2", ["watch", "/nonexistent/x"],
             refused("/nonexistent/x")),
            ("watch-quiet-zero", W, "exit 2 (usage)", ["watch", "--quiet", "0"],
             refused("--quiet")),
            ("watch-lane-typo", W, "exit 2 naming the lanes", ["watch", "--lane", "cpuu"],
             still_running_is_wrong, {"cwd": sb.w, "timeout": 25, "hang_ok": True}),
            ("watch-model-typo", W, "exit 2 naming the model",
             ["watch", "--model", "no-such-model-xyz"], still_running_is_wrong,
             {"cwd": sb.w, "timeout": 40, "hang_ok": True}),
            ("watch-tree-with-root-link", W,
             "keeps watching (no link followed, / not walked), no traceback", ["watch"],
             keeps_watching, {"cwd": sb.n, "hang_ok": True}),
        ],
        timeout=30,
    )  # fmt: skip
    if r.wanted("watch-tree-with-loop-and-out-links"):
        wl = sb.small_root(sb.base / "wl")
        (wl / "loop").symlink_to(".")
        (wl / "etclink").symlink_to(sb.outside / "etc")
        r.cli(["index"], cwd=wl, timeout=240)
        r.run(
            "watch-tree-with-loop-and-out-links",
            W,
            "keeps watching (loop -> . and a link out of the root), no traceback",
            ["watch"],
            keeps_watching,
            cwd=wl,
            timeout=20,
            hang_ok=True,
        )
    M = "cli:mcp"
    V = "cli:serve"
    r.run_table(
        [
            ("mcp-nonexistent", M, "exit 2", ["mcp", "/nonexistent/x"],
             refused("/nonexistent/x")),
            ("mcp-file-root", M, "exit 2 (a file, not a folder)",
             ["mcp", str(sb.n / "src" / "ledger.py")], refused("ledger.py")),
            ("serve-port-zero", V, "exit 2 (usage)", ["serve", "--port", "0"],
             refused("--port")),
            ("serve-port-huge", V, "exit 2 (usage)", ["serve", "--port", "70000"],
             refused("--port")),
            ("serve-nonexistent", V, "exit 2", ["serve", "/nonexistent/x"],
             refused("/nonexistent/x")),
            ("serve-file-root", V, "exit 2", ["serve", str(sb.n / "src" / "ledger.py")],
             refused("ledger.py")),
        ],
        timeout=30,
    )  # fmt: skip


def embed_and_lane_cases(r: Runner) -> None:
    """Run in a background thread: every case here starts a lane worker."""
    sb = r.sb
    E = "cli:embed"
    work = sb.base / "embed"
    work.mkdir(exist_ok=True)
    lines300 = work / "lines300.txt"
    lines300.write_text(
        "".join(f"def function_{i}(value): return value * {i}  # line {i}\n" for i in range(300))
    )
    bad_utf8 = work / "bad_utf8.txt"
    bad_utf8.write_bytes(
        b"first line\nsecond line\nbad \xff\xfe bytes here\nfourth line\nfifth line\n"
    )
    jsonl = work / "bad.jsonl"
    jsonl.write_text('{"text": 5}\n[1, 2]\nnot json\n"\\ud800"\n{"text": "ok"}\n')
    empty = work / "empty.txt"
    empty.write_text("")

    def vectors(count: int, nulls: Sequence[int] = ()) -> Check:
        def predicate(o: Outcome) -> tuple[bool, str]:
            rows = o.out.splitlines()
            if len(rows) != count:
                return False, f"{len(rows)} output line(s), not {count}"
            bad = []
            for number, row in enumerate(rows, 1):
                try:
                    value = json.loads(row)
                except ValueError:
                    bad.append(f"{number}: not JSON")
                    continue
                if number in nulls:
                    if value is not None:
                        bad.append(f"{number}: not null")
                elif not (
                    isinstance(value, list)
                    and value
                    and all(isinstance(x, float) and math.isfinite(x) for x in value)
                ):
                    bad.append(f"{number}: {str(value)[:30]}")
            return (
                not bad,
                f"{count} line(s), nulls at {list(nulls)}" if not bad else f"bad rows: {bad[:5]}",
            )

        return succeeded(predicate)

    faults = (("nan-after:2", []), ("malformed:2", []), ("hang:40000", ["--deadline", "5"]))
    for fault, extra in faults:
        name = f"lane-fault-{fault.split(':')[0]}"
        r.run(
            name,
            "cli:embed",
            f"ANEKIT_FAULT=cpu:{fault}: every row embedded, exit 0, no null rows (3 min)",
            ["embed", str(lines300), "--lane", "cpu", *extra],
            vectors(300),
            cwd=work,
            env={"ANEKIT_FAULT": f"cpu:{fault}"},
            timeout=180,
        )
    r.run_table(
        [
            ("embed-invalid-utf8", E, "exit 0, the bad line null, the others vectors",
             ["embed", str(bad_utf8)], vectors(5, [3])),
            ("embed-invalid-utf8-strict", E, "exit 2 naming line 3, nothing embedded",
             ["embed", str(bad_utf8), "--strict"], refused("3")),
            ("embed-jsonl-bad-lines", E, "exit 0, the four bad lines null", ["embed", str(jsonl)],
             vectors(5, [1, 2, 3, 4])),
            ("embed-stdin", E, "exit 0, 2 vectors", ["embed", "-"], vectors(2),
             {"stdin": b"alpha\nbeta\n"}),
            ("embed-empty-file", E, "exit 0, no output", ["embed", str(empty)],
             either(vectors(0), refused())),
            ("embed-dev-null", E, "exit 0 no output, or exit 2", ["embed", "/dev/null"],
             either(vectors(0), refused())),
            ("embed-nonexistent", E, "exit 2 naming the file", ["embed", "/nonexistent/x.txt"],
             refused("x.txt"), {"timeout": 60}),
            ("embed-folder", E, "exit 2", ["embed", str(sb.n / "src")], refused("src"),
             {"timeout": 60}),
            ("embed-max-length-zero", E, "exit 2", ["embed", str(bad_utf8), "--max-length", "0"],
             refused("max")),
            ("embed-max-length-negative", E, "exit 2",
             ["embed", str(bad_utf8), "--max-length", "-1"], refused("max")),
            ("embed-max-length-huge", E, "exit 2 (max 512)",
             ["embed", str(bad_utf8), "--max-length", "100000"], refused("512")),
            ("embed-deadline-zero", E, "exit 2", ["embed", str(bad_utf8), "--deadline", "0"],
             refused("deadline")),
            ("embed-deadline-negative", E, "exit 2", ["embed", str(bad_utf8), "--deadline", "-1"],
             refused("deadline")),
            ("embed-deadline-nan", E, "exit 2", ["embed", str(bad_utf8), "--deadline", "nan"],
             refused("deadline")),
            ("embed-lane-typo", E, "exit 2 naming the lanes",
             ["embed", str(bad_utf8), "--lane", "cpuu"], refused("cpu")),
            ("embed-model-typo", E, "exit 2 naming the model",
             ["embed", str(bad_utf8), "--model", "no-such-model-xyz"],
             refused("no-such-model-xyz")),
            ("embed-format-typo", E, "exit 2 (usage)", ["embed", str(bad_utf8), "--format", "xml"],
             refused("xml"), {"timeout": 60}),
        ],
        cwd=work,
        timeout=120,
    )  # fmt: skip


# --------------------------------------------------------------------------- the daemon's cases


class Served:
    """The cases that need ``anekit serve``: one daemon for all of them."""

    def __init__(self, r: Runner, daemon: Daemon, token: str) -> None:
        self.r = r
        self.sb = r.sb
        self.daemon = daemon
        self.client = HttpMcp(daemon.port, token)
        self.client.open()

    def ensure_up(self) -> None:
        if (
            self.daemon.process is None
            or self.daemon.process.poll() is not None
            or not self.daemon.health(5)[0]
        ):
            say("   the daemon is down: starting it again")
            self.daemon.stop()
            self.daemon.start()
            self.client.session = None
            self.client.open()

    def tool_case(
        self,
        name: str,
        surface: str,
        expected: str,
        tool: str,
        arguments: dict[str, Any],
        check: Check,
        timeout: float = 60,
    ) -> Outcome | None:
        if not self.r.wanted(name):
            return None
        outcome = self.client.tool(tool, arguments, timeout)
        up, _ = self.daemon.health(10)
        if not up:
            outcome.down, outcome.note = True, "GET /health did not answer after this call"
        shown = json.dumps(arguments)
        if len(shown) > 300:
            shown = shown[:200] + f"... ({len(shown)} characters)"
        echo = [arguments["query"]] if isinstance(arguments.get("query"), str) else []
        self.r.record(
            name, surface, expected, f"tools/call {tool} {shown}", outcome, check, echo=echo
        )
        if not up:
            self.ensure_up()
        return outcome

    def http_case(
        self, name: str, expected: str, command: str, work: Callable[[], Outcome], check: Check
    ) -> None:
        if not self.r.wanted(name):
            return
        try:
            outcome = work()
        except TimeoutError as error:
            outcome = Outcome(rc=-1, timed_out=True, limit=60, note=str(error))
        except OSError as error:
            outcome = Outcome(rc=-1, out=f"{type(error).__name__}: {error}")
        up, _ = self.daemon.health(10)
        if not up:
            outcome.down, outcome.note = True, "GET /health did not answer after this request"
        self.r.record(name, "http", expected, command, outcome, check)
        if not up:
            self.ensure_up()

    # -- HTTP and auth --------------------------------------------------------

    def auth_cases(self) -> None:
        c = self.client
        token = c.token

        def status_is(*codes: int) -> Check:
            def check(o: Outcome) -> tuple[str, str]:
                if o.rc in codes:
                    return "ok", f"HTTP {o.rc}"
                if o.rc == 200:
                    return "SILENT-WRONG", f"HTTP 200: {o.out[:150]}"
                return "WRONG", f"HTTP {o.rc}: {o.out[:150]}"

            return check

        def init(authorization: str | None) -> Callable[[], Outcome]:
            def work() -> Outcome:
                started = time.monotonic()
                status, _, data = c.initialize(authorization)
                return Outcome(
                    rc=status, out=data.decode(errors="replace"), seconds=time.monotonic() - started
                )

            return work

        def raw(
            method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
        ) -> Callable[[], Outcome]:
            def work() -> Outcome:
                started = time.monotonic()
                status, _, data = c.request(method, path, body, headers or {}, 30)
                return Outcome(
                    rc=status, out=data.decode(errors="replace"), seconds=time.monotonic() - started
                )

            return work

        self.http_case("http-health", "200", "GET /health", raw("GET", "/health"), status_is(200))
        self.http_case(
            "http-no-token",
            "401",
            "POST /mcp initialize, no Authorization",
            init(None),
            status_is(401),
        )
        self.http_case(
            "http-wrong-token",
            "401",
            "POST /mcp initialize, Bearer <wrong>",
            init("Bearer " + "0" * 64),
            status_is(401),
        )
        self.http_case(
            "http-token-prefix",
            "401",
            "Bearer <first 32 hex of the token>",
            init("Bearer " + token[:32]),
            status_is(401),
        )
        self.http_case(
            "http-basic-scheme",
            "401",
            "Authorization: Basic <token>",
            init("Basic " + token),
            status_is(401),
        )
        self.http_case(
            "http-token-no-scheme", "401", "Authorization: <token>", init(token), status_is(401)
        )
        self.http_case(
            "http-token-in-query",
            "401",
            "POST /mcp?token=<token>, no header",
            lambda: raw(
                "POST", f"/mcp?token={token}", b"{}", {"Content-Type": "application/json"}
            )(),
            status_is(401),
        )
        self.http_case(
            "http-lowercase-bearer",
            "200 (the scheme in any case)",
            "Authorization: bearer <token>",
            init("bearer " + token),
            status_is(200),
        )
        self.http_case(
            "http-uppercase-bearer",
            "200",
            "Authorization: BEARER <token>",
            init("BEARER " + token),
            status_is(200),
        )
        self.http_case(
            "http-get-mcp-no-token",
            "401",
            "GET /mcp, no Authorization",
            raw("GET", "/mcp"),
            status_is(401),
        )
        self.http_case(
            "http-path-traversal",
            "404 or 401, nothing served",
            "GET /../../etc/passwd",
            raw("GET", "/../../etc/passwd"),
            status_is(401, 404, 400),
        )
        self.http_case(
            "http-health-post",
            "401 or 405 (only GET /health is open)",
            "POST /health, no token",
            raw("POST", "/health", b"{}"),
            status_is(401, 405),
        )
        headers = c.headers()
        self.http_case(
            "http-malformed-json",
            "400 (JSON-RPC parse error), then normal answers",
            "POST /mcp with body '{not json'",
            raw("POST", "/mcp", b"{not json", headers),
            status_is(400),
        )
        self.http_case(
            "http-after-malformed",
            "a normal search answer",
            "tools/call search after the malformed body",
            lambda: c.tool("search", {"query": "ledger", "root": str(self.sb.n)}),
            tool_ok(lambda d: (bool(d and d.get("hits")), _brief(d))),
        )
        self.http_case(
            "http-body-too-large",
            "413",
            "POST /mcp with a 2 MiB body",
            raw("POST", "/mcp", b'{"x": "' + b"a" * (2 << 20) + b'"}', headers),
            status_is(413),
        )
        self.http_case(
            "http-unknown-tool",
            "a JSON-RPC or tool error, the server goes on",
            "tools/call no_such_tool",
            lambda: c.tool("no_such_tool", {}),
            tool_refused("no_such_tool"),
        )

        def unknown_method() -> Outcome:
            _, text, message = c.rpc("no/such", {})
            return _tool_outcome(message, text, 0)

        self.http_case(
            "http-unknown-method",
            "a JSON-RPC error",
            "method no/such",
            unknown_method,
            tool_refused(),
        )

    def slow_body(self) -> None:
        """Headers, then 10 bytes of a 1,000-byte body and nothing more: 408 within ~31 s."""
        name = "http-slow-body"
        if not self.r.wanted(name):
            return
        started = time.monotonic()
        body = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/list"}).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {HOST}:{self.daemon.port}\r\n"
            f"Authorization: Bearer {self.client.token}\r\n"
            f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"Content-Length: 1000\r\n\r\n"
        ).encode()
        answer = b""
        with socket.create_connection((HOST, self.daemon.port), timeout=60) as sock:
            sock.sendall(head + body[:10])
            with contextlib.suppress(OSError):
                while True:
                    data = sock.recv(4096)
                    if not data:
                        break
                    answer += data
                    if b"\r\n\r\n" in answer:
                        break
        seconds = time.monotonic() - started
        status = re.match(rb"HTTP/1\.[01] (\d+)", answer)
        code = int(status.group(1)) if status else -1
        outcome = Outcome(
            rc=code,
            out=answer.decode(errors="replace")[:300],
            seconds=seconds,
            timed_out=seconds >= 59,
            limit=60,
        )

        def check(o: Outcome) -> tuple[str, str]:
            if o.rc == 408:
                return "ok", f"408 after {o.seconds:.1f} s"
            return (
                "WRONG",
                f"{'no answer' if o.rc == -1 else f'HTTP {o.rc}'} after {o.seconds:.1f} s: "
                f"{o.out[:100]!r}",
            )

        self.r.record(
            name,
            "http",
            "408 within about 30 s",
            "POST /mcp, Content-Length 1000, 10 bytes sent, then nothing",
            outcome,
            check,
        )

    # -- MCP tools ----------------------------------------------------------

    def tool_cases(self) -> None:
        sb = self.sb
        n = str(sb.n)
        T = self.tool_case
        s = "mcp-http:search"
        T(
            "mcp-search-ok",
            s,
            "hits, src/ledger.py first",
            "search",
            {"query": "reconcile ledger entries", "root": n},
            tool_ok(
                lambda d: (
                    bool(d and d["hits"]) and d["hits"][0]["path"] == "src/ledger.py",
                    _brief(d),
                )
            ),
        )
        T(
            "mcp-search-no-root",
            s,
            "refused naming the roots (three are served)",
            "search",
            {"query": "ledger"},
            tool_refused("root"),
        )
        T(
            "mcp-search-root-name",
            s,
            "hits of the nested root by its folder's name",
            "search",
            {"query": "inner only function", "root": "inner"},
            tool_ok(lambda d: (bool(d and d["hits"]), _brief(d))),
        )
        T(
            "mcp-search-root-typo",
            s,
            "refused",
            "search",
            {"query": "ledger", "root": "nosuch"},
            tool_refused("nosuch"),
        )
        for k in (0, -1, 101, 100000):
            T(
                f"mcp-search-k-{k}",
                s,
                "refused, not clamped",
                "search",
                {"query": "ledger", "k": k, "root": n},
                tool_refused("k"),
            )
        T(
            "mcp-search-k-100",
            s,
            "hits",
            "search",
            {"query": "ledger", "k": 100, "root": n},
            tool_ok(),
        )
        T(
            "mcp-search-k-string",
            s,
            "refused (k is an integer)",
            "search",
            {"query": "ledger", "k": "ten", "root": n},
            tool_refused(),
        )
        T(
            "mcp-search-k-float",
            s,
            "refused or taken as 2",
            "search",
            {"query": "ledger", "k": 2.5, "root": n},
            lambda o: (
                ("ok", "refused")
                if o.rc == 1
                else tool_ok(lambda d: (len(d["hits"]) <= 3, _brief(d)))(o)
            ),
        )
        big = "retry " * (100 * 1024 // 6)

        def not_echoed(o: Outcome) -> tuple[str, str]:
            verdict, got = tool_refused("1000")(o)
            if len(o.out) > 5000:
                return (
                    "WRONG" if verdict == "ok" else verdict
                ), f"{got}; the answer has {len(o.out)} characters (the query echoed back)"
            return verdict, f"{got}; answer {len(o.out)} characters"

        T(
            "mcp-search-query-100kb",
            s,
            "refused, the query not echoed back whole",
            "search",
            {"query": big, "root": n},
            not_echoed,
        )

        def empty(o: Outcome) -> tuple[str, str]:
            if o.rc == 0 and o.data and o.data.get("hits"):
                return "SILENT-WRONG", f"{len(o.data['hits'])} arbitrary hit(s) for an empty query"
            return (
                ("ok", "refused" if o.rc == 1 else "no hits")
                if o.rc in (0, 1)
                else ("WRONG", str(o.rc))
            )

        T(
            "mcp-search-empty-query",
            s,
            "refused or no hits",
            "search",
            {"query": "", "root": n},
            empty,
        )
        T(
            "mcp-search-mode-typo",
            s,
            "refused",
            "search",
            {"query": "ledger", "mode": "fuzzy", "root": n},
            tool_refused(),
        )
        T(
            "mcp-search-path-bracket",
            s,
            "refused (invalid glob)",
            "search",
            {"query": "ledger", "path": ["["], "root": n},
            tool_refused(),
        )
        T(
            "mcp-search-lang-typo",
            s,
            "refused listing the languages",
            "search",
            {"query": "ledger", "lang": ["pyhton"], "root": n},
            tool_refused("python"),
        )

        def ext_glob(o: Outcome) -> tuple[str, str]:
            if o.rc == 0:
                paths = [h["path"] for h in (o.data or {}).get("hits", [])]
                if paths and all(p.endswith(".py") for p in paths):
                    return "ok", f"{len(paths)} .py hit(s)"
                return "SILENT-WRONG", f"{len(paths)} hit(s): {paths[:3]}"
            return tool_refused()(o)

        T(
            "mcp-search-ext-glob",
            s,
            "refused or only .py hits",
            "search",
            {"query": "ledger", "ext": ["*.py"], "root": n},
            ext_glob,
        )
        T(
            "mcp-search-path-string",
            s,
            "refused (a list is due) or taken as one glob",
            "search",
            {"query": "ledger", "path": "src/**", "root": n},
            lambda o: (
                ("ok", "refused")
                if o.rc == 1
                else tool_ok(
                    lambda d: (
                        all(h["path"].startswith("src/") for h in d["hits"]) and bool(d["hits"]),
                        _brief(d),
                    )
                )(o)
            ),
        )
        T(
            "search-warm",
            s,
            "hits (warms the query model)",
            "search",
            {"query": "ledger", "root": n},
            tool_ok(),
        )
        for label, glob in (("12-stars", "**/************x"), ("50-stars", "**/" + "*" * 50)):
            T(
                f"mcp-search-glob-{label}",
                s,
                "an answer in well under a second",
                "search",
                {"query": "ledger", "path": [glob], "root": n},
                completes_within(
                    1.0, lambda o: ("ok", "answered") if o.rc in (0, 1) else ("WRONG", str(o.rc))
                ),
                timeout=120,
            )
        m = sb.markers
        queries = (
            "root shadow password hash",
            "BEGIN OPENSSH PRIVATE KEY",
            "aws_secret_access_key",
            m["shadow"],
            "DATABASE_PASSWORD",
            "remote origin url",
            "api_key",
            "SQLite format 3",
            "root:x:0:0",
            "watch_outside_identifier_vv",
        )
        for number, query in enumerate(queries):
            for mode in ("keyword", "hybrid"):
                for root in (n, "inner"):
                    T(
                        f"mcp-search-leak-{number}-{mode}-{Path(root).name}",
                        s,
                        "no marker, no path through a link or hidden",
                        "search",
                        {"query": query, "mode": mode, "k": 50, "root": root},
                        tool_ok(
                            lambda d: (
                                not clean_paths(h["path"] for h in d["hits"]),
                                f"{len(d['hits'])} hit(s), "
                                f"bad {clean_paths(h['path'] for h in d['hits'])}",
                            )
                        ),
                    )
        f = "mcp-http:files"

        def files_clean(d: Any) -> tuple[bool, str]:
            bad = clean_paths(d["files"])
            return not bad, f"{d['count']} file(s), bad {bad}"

        T(
            "mcp-files-all",
            f,
            "no link, hidden or store path",
            "files",
            {"root": n},
            tool_ok(files_clean),
        )
        T(
            "mcp-files-inner",
            f,
            "no hidden or store path",
            "files",
            {"root": "inner"},
            tool_ok(files_clean),
        )
        for prefix in (
            "etclink",
            "root/",
            "loop/",
            "storelink",
            "tokenlink",
            "../",
            ".anekit",
            ".env",
            ".git",
            "/",
        ):
            T(
                f"mcp-files-prefix-{prefix.strip('/.') or 'dot'}",
                f,
                "nothing listed",
                "files",
                {"prefix": prefix, "root": n},
                tool_ok(lambda d: (d["count"] == 0, f"{d['count']} file(s): {d['files'][:3]}")),
            )
        T("mcp-files-root-typo", f, "refused", "files", {"root": "nosuch"}, tool_refused("nosuch"))
        T(
            "mcp-status",
            "mcp-http:status",
            "each root, no marker",
            "status",
            {},
            tool_ok(lambda d: (len(d["roots"]) == 3, f"{len(d['roots'])} roots")),
        )
        x = "mcp-http:index"
        T(
            "mcp-index-budget-negative",
            x,
            "refused",
            "index",
            {"budget_seconds": -1, "root": str(sb.w)},
            tool_refused("budget"),
        )
        T(
            "mcp-index-budget-huge",
            x,
            "refused",
            "index",
            {"budget_seconds": 1000, "root": str(sb.w)},
            tool_refused("budget"),
        )
        T(
            "mcp-index-budget-nan",
            x,
            "refused",
            "index",
            {"budget_seconds": "nan", "root": str(sb.w)},
            tool_refused(),
        )
        T(
            "mcp-index-w",
            x,
            "done or running",
            "index",
            {"budget_seconds": 20, "root": str(sb.w)},
            tool_ok(lambda d: (d.get("state") in ("done", "running"), str(d.get("state")))),
            timeout=60,
        )
        self.read_cases(self.client.tool, "mcp-http")

    def read_cases(
        self, call: Callable[[str, dict[str, Any]], Outcome], surface: str, short: bool = False
    ) -> None:
        sb = self.sb
        rd = f"{surface}:read"
        refusals = [
            (".env", ".env"),
            ("gitconfig", ".git/config"),
            ("store-db", ".anekit/store.db"),
            ("inner-store-db", "inner/.anekit/store.db"),
            ("inner-env", "inner/.env"),
            ("dotdot", "../x"),
            ("dotdot-shadow", "../outside/etc/shadow"),
            ("src-dotdot", "src/../../outside/etc/shadow"),
            ("abs-outside-shadow", str(sb.outside / "etc" / "shadow")),
            ("abs-host-passwd", "/etc/passwd"),
            ("abs-through-link", str(sb.n / "etclink" / "shadow")),
            ("etclink-shadow", "etclink/shadow"),
            ("etclink-passwd-py", "etclink/passwd.py"),
            ("ssh-key", "ssh/id_rsa"),
            ("creds-link", "creds.txt"),
            ("root-link-passwd", "root/etc/passwd"),
            ("loop-link", "loop/src/ledger.py"),
            ("storelink-db", "storelink/store.db"),
            ("tokenlink", "tokenlink"),
            ("innerstore-db", "innerstore/store.db"),
            ("newline-link", "bad\nlink/shadow"),
            ("huge-20mb", "big/huge.txt"),
            ("binary", "assets/blob.dat"),
            ("minified", "gen/bundle.js"),
            ("ignored", "ignored_secret.txt"),
            ("fifo", "pipe.fifo"),
            ("folder", "src"),
            ("empty-path", ""),
            ("dot", "."),
            ("slash", "/"),
            ("home-tilde", "~/.ssh/id_rsa"),
            ("nul-byte", "src/ledger.py\x00.txt"),
            ("abs-home-token", str(sb.home / "serve" / "token")),
        ]
        if short:
            refusals = [
                item
                for item in refusals
                if item[0]
                in (
                    ".env",
                    "store-db",
                    "etclink-shadow",
                    "tokenlink",
                    "huge-20mb",
                    "fifo",
                    "abs-outside-shadow",
                )
            ]
        for label, path in refusals:
            name = f"{surface}-read-{label}"
            if not self.r.wanted(name):
                continue
            before = (
                self.daemon.rss_mb() if label == "huge-20mb" and surface == "mcp-http" else None
            )
            outcome = call("read", {"path": path}, 60)
            if surface == "mcp-http":
                up, _ = self.daemon.health(10)
                if not up:
                    outcome.down, outcome.note = True, "GET /health did not answer after this call"
            check = tool_refused()
            if before is not None:
                after = self.daemon.rss_mb()

                def memory(
                    o: Outcome, before: float = before, after: float = after
                ) -> tuple[str, str]:
                    verdict, got = tool_refused(("too large", "large"))(o)
                    grown = after - before
                    if grown > 40:
                        return (
                            "WRONG" if verdict == "ok" else verdict
                        ), f"{got}; the daemon's RSS grew {grown:.0f} MB"
                    return verdict, f"{got}; RSS {before:.0f} -> {after:.0f} MB"

                check = memory
            self.r.record(
                name, rd, "refused", f"tools/call read {json.dumps({'path': path})}", outcome, check
            )
            if outcome.down:
                self.ensure_up()
        if short:
            return
        good = [
            (
                "ok",
                {"path": "src/ledger.py"},
                lambda d: ("reconcile_ledger_entries" in d["text"], f"{d['total_lines']} lines"),
            ),
            (
                "inner-file",
                {"path": "inner/inner_mod.py"},
                lambda d: ("inner_only_function_xyz" in d["text"], d["path"]),
            ),
            (
                "abs-inside",
                {"path": str(sb.n / "src" / "ledger.py")},
                lambda d: ("LedgerBook" in d["text"], d["path"]),
            ),
            (
                "dot-slash",
                {"path": "./src/ledger.py"},
                lambda d: ("LedgerBook" in d["text"], d["path"]),
            ),
            (
                "start-beyond-end",
                {"path": "src/ledger.py", "start_line": 1_000_000},
                lambda d: (d["text"] == "", f"text {len(d['text'])} chars"),
            ),
        ]
        for label, arguments, predicate in good:
            name = f"{surface}-read-{label}"
            if self.r.wanted(name):
                outcome = call("read", arguments, 60)
                self.r.record(
                    name,
                    rd,
                    "the lines",
                    f"tools/call read {json.dumps(arguments)}",
                    outcome,
                    tool_ok(predicate),
                )
        for label, arguments in (
            ("start-zero", {"path": "src/ledger.py", "start_line": 0}),
            ("end-before-start", {"path": "src/ledger.py", "start_line": 5, "end_line": 2}),
            ("start-negative", {"path": "src/ledger.py", "start_line": -3}),
        ):
            name = f"{surface}-read-{label}"
            if self.r.wanted(name):
                outcome = call("read", arguments, 60)
                self.r.record(
                    name,
                    rd,
                    "refused",
                    f"tools/call read {json.dumps(arguments)}",
                    outcome,
                    tool_refused("line"),
                )

    def health_during_search(self) -> None:
        name = "http-health-during-search"
        if not self.r.wanted(name):
            return
        results: list[Outcome] = []

        def search() -> None:
            client = HttpMcp(self.daemon.port, self.client.token)
            client.open()
            arguments = {
                "query": "ledger retry " * 70,
                "k": 100,
                "mode": "hybrid",
                "path": ["**/" + "*" * 50],
                "root": str(self.sb.n),
            }
            for _ in range(5):
                results.append(client.tool("search", arguments, 60))

        threads = [threading.Thread(target=search) for _ in range(4)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        samples = []
        while any(thread.is_alive() for thread in threads) and time.monotonic() - started < 60:
            samples.append(self.daemon.health(10))
            time.sleep(0.02)
        for thread in threads:
            thread.join(70)
        busy = time.monotonic() - started
        worst = max((seconds for _, seconds in samples), default=0.0)
        answered = sum(1 for good, _ in samples if good)
        outcome = Outcome(
            rc=0,
            seconds=worst,
            down=bool(samples) and answered == 0,
            note=f"{answered}/{len(samples)} answered",
        )

        def check(o: Outcome) -> tuple[str, str]:
            got = (
                f"{answered}/{len(samples)} /health answered during {len(results)} searches "
                f"({busy:.2f} s busy), the slowest in {worst:.2f} s"
            )
            if not samples:
                return "WRONG", f"the searches were over before /health was asked ({busy:.2f} s)"
            if answered < len(samples) or worst >= 1:
                return "HANG", got
            return "ok", got

        self.r.record(
            name,
            "http",
            "/health answers (< 1 s) while searches run",
            "GET /health every 20 ms during 4 clients x 5 tools/call search "
            "(k 100, a 50-star glob)",
            outcome,
            check,
        )

    def watcher_case(self, root: Path, limit: float = 60) -> None:
        """With serve watching ``root``: a link to a file outside it, then a new file."""
        name = f"serve-watcher-{root.name}-link-and-new-file"
        if not self.r.wanted(name):
            return
        sb = self.sb
        mark = len(self.daemon.log())
        (root / "src" / "outside_link.py").symlink_to(sb.outside / "watch_secret.py")
        ident = f"freshly_saved_identifier_{uuid.uuid4().hex[:8]}"
        time.sleep(0.5)
        (root / "src" / "fresh_module.py").write_text(
            f"def {ident}(value):\n    return value + 1\n"
        )
        started = time.monotonic()
        found: Outcome | None = None
        last = Outcome()
        while time.monotonic() - started < limit:
            last = self.client.tool(
                "search", {"query": ident, "mode": "keyword", "root": str(root)}, 30
            )
            if last.rc == 0 and any(h["path"] == "src/fresh_module.py" for h in last.data["hits"]):
                found = last
                break
            time.sleep(0.5)
        seconds = time.monotonic() - started
        link = self.client.tool(
            "search",
            {"query": "watch_outside_identifier_vv", "mode": "keyword", "k": 50, "root": str(root)},
            30,
        )
        files = self.client.tool("files", {"prefix": "src/", "root": str(root)}, 30)
        up, _ = self.daemon.health(10)
        log = self.daemon.log()[mark:]
        outcome = Outcome(
            rc=0, out=last.out + link.out + files.out, err=log, seconds=seconds, down=not up
        )

        def check(o: Outcome) -> tuple[str, str]:
            problems = []
            if found is None:
                problems.append(f"the new file not searchable after {seconds:.0f} s")
            if link.rc == 0 and any("outside_link" in h["path"] for h in link.data["hits"]):
                problems.append("the link was indexed")
            if files.rc == 0 and "src/outside_link.py" in files.data["files"]:
                problems.append("files lists the link")
            if problems:
                return "SILENT-WRONG", "; ".join(problems)
            return "ok", f"new file searchable after {seconds:.1f} s; link never indexed"

        self.r.record(
            name,
            "daemon:watch",
            "the new file searchable; the link never indexed; serve answers",
            f"(anekit serve ... {root.name}) "
            f"ln -s outside/watch_secret.py {root.name}/src/outside_link.py; "
            f"write {root.name}/src/fresh_module.py ({ident})",
            outcome,
            check,
            echo=[ident, "watch_outside_identifier_vv"],
        )

    def wal_case(self) -> None:
        name = "serve-deleted-wal"
        if not self.r.wanted(name):
            return
        sb = self.sb
        w = str(sb.w)
        self.client.tool("search", {"query": "ledger", "root": w}, 30)
        mark = len(self.daemon.log())
        wal = sb.w / ".anekit" / "store.db-wal"
        existed = wal.exists()
        with contextlib.suppress(FileNotFoundError):
            wal.unlink()
        ident = f"after_wal_identifier_{uuid.uuid4().hex[:8]}"
        time.sleep(0.3)
        (sb.w / "src" / "after_wal.py").write_text(
            f"def {ident}():\n    return 'saved after the WAL went'\n"
        )
        started = time.monotonic()
        found = None
        last = Outcome()
        while time.monotonic() - started < 90:
            last = self.client.tool("search", {"query": ident, "mode": "keyword", "root": w}, 30)
            if last.rc == 0 and any(h["path"] == "src/after_wal.py" for h in last.data["hits"]):
                found = last
                break
            time.sleep(0.5)
        seconds = time.monotonic() - started
        cli = self.r.cli(["search", ident, "--mode", "keyword"], cwd=sb.w)
        log = self.daemon.log()[mark:]
        outcome = Outcome(rc=0, out=last.out + cli.out, err=cli.err + log, seconds=seconds)

        def check(o: Outcome) -> tuple[str, str]:
            silent, wrong = [], []
            if found is None:
                silent.append(
                    f"not found over MCP after {seconds:.0f} s "
                    f"({last.note[:150] or _brief(last.data)})"
                )
            # Another process cannot read the store until the daemon lets its unlinked WAL
            # go (at exit): it must say so and what to do, or answer.
            explained = "stop that process and try again" in cli.text
            if cli.rc == 0 and not text_hits(cli):
                silent.append(f"`anekit search {ident}` in w: exit 0 without the hit")
            elif cli.rc != 0 and not explained:
                wrong.append(
                    f"`anekit search {ident} --mode keyword` in w: exit {cli.rc}: {first_line(cli)}"
                )
            if re.search(r"delete (the )?\.anekit|rm -rf|remove \.anekit", o.text, re.I):
                wrong.append("advises deleting .anekit")
            if silent or wrong:
                return ("SILENT-WRONG" if silent else "WRONG"), "; ".join(silent + wrong)
            return (
                "ok",
                f"searchable after {seconds:.1f} s "
                f"(the WAL {'existed' if existed else 'did not exist'})",
            )

        self.r.record(
            name,
            "daemon:store",
            "the save searchable over MCP; the CLI answers or explains (stop the daemon), "
            "no 'delete .anekit' advice",
            f"rm w/.anekit/store.db-wal under serve; write w/src/after_wal.py ({ident})",
            outcome,
            check,
            echo=[ident],
        )

    def slow_clients(self) -> None:
        name = "http-300-partial-headers"
        if not self.r.wanted(name):
            return
        sockets = []
        refused_at_once = 0
        started = time.monotonic()
        for _ in range(300):
            try:
                sock = socket.create_connection((HOST, self.daemon.port), timeout=5)
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                sockets.append(sock)
            except OSError:
                refused_at_once += 1
        health_during = []
        for _ in range(3):
            health_during.append(self.daemon.health(5))
            time.sleep(0.5)
        recovered = None
        closed_at: dict[int, float] = {}
        for sock in sockets:
            sock.setblocking(False)
        while time.monotonic() - started < 20 and (
            len(closed_at) < len(sockets) or recovered is None
        ):
            for index, sock in enumerate(sockets):
                if index in closed_at:
                    continue
                try:
                    if sock.recv(1024) == b"":
                        closed_at[index] = time.monotonic() - started
                except BlockingIOError:
                    pass
                except OSError:
                    closed_at[index] = time.monotonic() - started
            if recovered is None and self.daemon.health(0.5)[0]:
                recovered = time.monotonic() - started
            time.sleep(0.2)
        open_left = len(sockets) - len(closed_at)
        for sock in sockets:
            sock.close()
        up_after, _ = self.daemon.health(10)
        answered = sum(1 for good, _ in health_during if good)
        latest = max(closed_at.values(), default=0.0)
        again = f"{recovered:.1f} s" if recovered is not None else "never (20 s)"
        note = (
            f"/health answered {answered}/3 times during the attack; "
            f"{len(closed_at)} of {len(sockets)} sockets closed by the server, "
            f"the last at {latest:.1f} s, {open_left} still open at 20 s; "
            "/health answered again at "
            f"{again}; after: {'ok' if up_after else 'no answer'}"
        )
        outcome = Outcome(
            rc=0, seconds=time.monotonic() - started, down=answered == 0 or not up_after, note=note
        )

        def check(o: Outcome) -> tuple[str, str]:
            if answered < 3:
                return "DOWN", note
            if open_left or latest > 15.5:
                return "WRONG", note
            return "ok", note

        self.r.record(
            name,
            "http",
            "/health keeps answering; the sockets closed by the server within ~15 s",
            "300 sockets each sending 'GET /health HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nX-Slow: ' "
            "and nothing more",
            outcome,
            check,
        )


def stdio_cases(r: Runner, served: Served | None) -> None:
    sb = r.sb
    if r.only is not None and "stdio" not in r.only:
        return
    client = StdioMcp([str(sb.n), str(sb.inner)], sb.n, sb.env(), sb.base / "mcp-stdio.log")
    ok = client.initialize()
    if not ok:
        r.record(
            "mcp-stdio-initialize",
            "mcp-stdio",
            "initialize answered",
            "anekit mcp n n/inner",
            Outcome(rc=1, out="".join(client.raw), err=client.close()),
            lambda o: ("WRONG", "no answer to initialize"),
        )
        return
    n = str(sb.n)

    def case(
        name: str, surface: str, expected: str, tool: str, arguments: dict[str, Any], check: Check
    ) -> Outcome | None:
        if not r.wanted(name):
            return None
        outcome = client.tool(tool, arguments, 60)
        echo = [arguments["query"]] if isinstance(arguments.get("query"), str) else []
        r.record(
            name,
            surface,
            expected,
            f"(anekit mcp n n/inner) tools/call {tool} {json.dumps(arguments)[:200]}",
            outcome,
            check,
            echo=echo,
        )
        return outcome

    case(
        "mcp-stdio-search-ok",
        "mcp-stdio:search",
        "hits",
        "search",
        {"query": "retry with backoff", "root": n},
        tool_ok(lambda d: (bool(d["hits"]), _brief(d))),
    )
    for number, query in enumerate(
        (
            "root shadow password hash",
            "BEGIN OPENSSH PRIVATE KEY",
            sb.markers["env"],
            "SQLite format 3",
        )
    ):
        case(
            f"mcp-stdio-search-leak-{number}",
            "mcp-stdio:search",
            "no marker",
            "search",
            {"query": query, "mode": "keyword", "k": 50, "root": n},
            tool_ok(
                lambda d: (
                    not clean_paths(h["path"] for h in d["hits"]),
                    f"{len(d['hits'])} hit(s)",
                )
            ),
        )
    case(
        "mcp-stdio-files",
        "mcp-stdio:files",
        "no link, hidden or store path",
        "files",
        {"root": n},
        tool_ok(
            lambda d: (
                not clean_paths(d["files"]),
                f"{d['count']} file(s), bad {clean_paths(d['files'])}",
            )
        ),
    )
    case("mcp-stdio-status", "mcp-stdio:status", "each root, no marker", "status", {}, tool_ok())
    case(
        "mcp-stdio-k-0",
        "mcp-stdio:search",
        "refused",
        "search",
        {"query": "x", "k": 0, "root": n},
        tool_refused("k"),
    )
    if served is not None:
        served.read_cases(
            lambda tool, arguments, timeout: client.tool(tool, arguments, timeout),
            "mcp-stdio",
            short=True,
        )
    if r.wanted("mcp-stdio-garbage-line"):
        client.send(b"this is not json\n")
        client.send(
            b'{"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "search"}}\n'
        )
        outcome = client.tool("search", {"query": "ledger", "root": n}, 60)
        r.record(
            "mcp-stdio-garbage-line",
            "mcp-stdio",
            "a garbage line and a call without arguments, then a normal answer",
            "stdin: 'this is not json', a tools/call search without arguments, then a search",
            outcome,
            tool_ok(lambda d: (bool(d["hits"]), _brief(d))),
        )
    log = client.close()
    exited = client.process.returncode
    r.record(
        "mcp-stdio-log",
        "mcp-stdio",
        "stderr: no traceback, no marker; exit 0 when stdin closes",
        "(the stdio server's stderr)",
        Outcome(rc=exited, err=log),
        lambda o: (
            ("ok", f"exit {o.rc}, {len(_lines(log))} stderr line(s)")
            if o.rc == 0
            else ("WRONG", f"exit {o.rc}: {(_lines(log) or [''])[-1][:200]}")
        ),
    )
    if r.wanted("mcp-stdio-unindexed-root"):
        other = StdioMcp([str(sb.elsewhere)], sb.elsewhere, sb.env(), sb.base / "mcp-stdio-2.log")
        if other.initialize():
            outcome = other.tool("search", {"query": "loose"}, 60)
        else:
            outcome = Outcome(rc=-1, note="no answer to initialize")
        other.close()
        r.record(
            "mcp-stdio-unindexed-root",
            "mcp-stdio:search",
            "refused: the index is empty, call the index tool",
            "(anekit mcp elsewhere) tools/call search",
            outcome,
            tool_refused("index"),
        )


# --------------------------------------------------------------------------- after the daemon


def token_cases(r: Runner, port: int) -> None:
    sb = r.sb
    serve_dir = sb.home / "serve"
    token_file = serve_dir / "token"
    V = "cli:serve"
    victim = sb.outside / "victim"
    before = victim.read_text()
    planted = serve_dir / "token.new"
    planted.symlink_to(victim)
    o = r.cli(["serve", "--rotate-token"], cwd=sb.n)
    new_token = o.out.strip()
    if new_token:
        r.add_marker("token-rotated", new_token)
    r.record(
        "serve-rotate-token-planted-new",
        V,
        "the victim unchanged, the token a fresh file",
        r.shown(["serve", "--rotate-token"]) + "  # serve/token.new -> outside/victim",
        o,
        succeeded(
            lambda o: (
                victim.read_text() == before and not token_file.is_symlink(),
                "victim unchanged" if victim.read_text() == before else "THE VICTIM WAS WRITTEN",
            )
        ),
        allow=("token-rotated",),
    )
    planted.unlink()
    victim2 = sb.outside / "victim2"
    before2 = victim2.read_text()
    token_file.unlink()
    token_file.symlink_to(victim2)
    o = r.cli(["serve", "--show-token"], cwd=sb.n)
    r.record(
        "serve-show-token-link",
        V,
        "refused (the token is a link); the victim's text never printed",
        r.shown(["serve", "--show-token"]) + "  # serve/token -> outside/victim2",
        o,
        refused("link"),
    )
    o = r.cli(["serve", "--port", str(free_port())], cwd=sb.n, timeout=40)
    r.record(
        "serve-token-link-start",
        V,
        "refused at start (the token is a link)",
        r.shown(["serve", "--port", "P"]) + "  # serve/token -> outside/victim2",
        o,
        refused("link"),
        hang_ok=False,
    )
    o = r.cli(["serve", "--rotate-token"], cwd=sb.n)
    if o.out.strip():
        r.add_marker("token-rotated-2", o.out.strip())
    r.record(
        "serve-rotate-token-over-link",
        V,
        "the link replaced by a fresh file, the victim unchanged",
        r.shown(["serve", "--rotate-token"]) + "  # serve/token -> outside/victim2",
        o,
        succeeded(
            lambda o: (
                victim2.read_text() == before2 and not token_file.is_symlink(),
                "victim unchanged, token a file"
                if victim2.read_text() == before2
                else "THE VICTIM WAS WRITTEN",
            )
        ),
        allow=("token-rotated-2",),
    )
    token_file.chmod(0o644)
    o = r.cli(["serve", "--show-token"], cwd=sb.n)
    r.record(
        "serve-token-world-readable",
        V,
        "refused naming chmod 600",
        r.shown(["serve", "--show-token"]) + "  # token mode 0644",
        o,
        refused("600"),
    )
    token_file.chmod(0o600)


def damage_cases(r: Runner) -> None:
    """A store damaged three ways (seeded, so every run damages the same bytes): 32 KB of
    garbage in the middle (the user's case), the header overwritten, the file cut short."""
    sb = r.sb
    D = "cli:store"
    if not r.wanted("damage"):
        return

    def damaged(o: Outcome) -> tuple[str, str]:
        if o.rc == 0:
            return "SILENT-WRONG", f"exit 0, nothing said: {first_line(o)}"
        return refused("damaged")(o)

    for variant in ("middle", "header", "truncated"):
        root = sb.base / f"dmg-{variant}"
        for relpath, text in sb.files.items():
            path = root / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        made = r.cli(["index"], cwd=root, timeout=240)
        db = root / ".anekit" / "store.db"
        if made.rc != 0 or not db.exists():
            r.skip(
                f"damage-{variant}",
                D,
                "a store to damage",
                f"anekit index: exit {made.rc}: {first_line(made)}",
            )
            continue
        size = db.stat().st_size
        garbage = __import__("random").Random(32).randbytes(32 * 1024)
        with db.open("r+b") as handle:
            if variant == "middle":
                offset = max(4096, size // 2 - 16384)
                handle.seek(offset)
                handle.write(garbage)
                note = f"32 KB of seeded garbage at offset {offset} of the {size}-byte store.db"
            elif variant == "header":
                handle.write(garbage[:100])
                note = f"the first 100 bytes of the {size}-byte store.db overwritten"
            else:
                handle.truncate(size // 3)
                note = f"store.db cut from {size} to {size // 3} bytes"
        note = f"  # {note}"
        for label, args in (
            ("search", ["search", "reconcile ledger"]),
            ("search-vector", ["search", "reconcile ledger", "--mode", "vector"]),
            ("search-keyword", ["search", "reconcile ledger", "--mode", "keyword"]),
            ("status", ["status"]),
            ("status-json", ["status", "--json"]),
        ):
            o = r.cli(args, cwd=root)
            r.record(
                f"damage-{variant}-{label}",
                D,
                "exit 2 saying the index is damaged, no traceback",
                r.shown(args, root) + note,
                o,
                damaged,
            )
        o = r.cli(["index"], cwd=root, timeout=240)
        aside = db.parent / "store.db.damaged"
        r.record(
            f"damage-{variant}-index-rebuilds",
            D,
            "exit 0, says it was damaged and rebuilt; store.db.damaged kept",
            r.shown(["index"], root) + note,
            o,
            succeeded(
                lambda o, aside=aside: (
                    _has(o.text, "damaged") and aside.exists(),
                    first_line(o) + f"; store.db.damaged {'kept' if aside.exists() else 'missing'}",
                )
            ),
        )
        r.run(
            f"damage-{variant}-search-after-rebuild",
            D,
            "exit 0, hits",
            ["search", "reconcile ledger"],
            succeeded(nonempty),
            cwd=root,
        )


def chattr(path: Path, flag: str) -> bool:
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def readonly_cases(r: Runner) -> None:
    sb = r.sb
    D = "cli:store"
    if not r.wanted("readonly") and not r.wanted("store-cannot"):
        return
    # a store that cannot be made: .anekit is a file
    nc = sb.small_root(sb.base / "nc")
    (nc / ".anekit").write_text("not a folder\n")
    r.run(
        "store-cannot-be-made",
        D,
        "exit 2, one line naming --store",
        ["index"],
        refused("--store", one_line=True),
        cwd=nc,
        timeout=120,
    )
    if not shutil.which("chattr"):
        r.skip("readonly-root", D, "one-line error naming --store", "no chattr here")
        return
    ro1 = sb.small_root(sb.base / "ro1")
    ro2 = sb.small_root(sb.base / "ro2")
    r.cli(["index"], cwd=ro2, timeout=240)
    immutable = r.immutable
    try:
        if not chattr(ro1, "+i"):
            r.skip(
                "readonly-root",
                D,
                "one-line error naming --store",
                "chattr +i failed (filesystem or capability)",
            )
            return
        immutable.append(ro1)
        elsewhere_store = sb.base / "ro1-store"
        r.run_table(
            [
                ("readonly-root-index", D, "exit 2, one line naming --store", ["index"],
                 refused("--store", one_line=True), {"timeout": 120}),
                ("readonly-root-index-with-store", D, "exit 0 with --store elsewhere",
                 ["index", "--store", str(elsewhere_store)], succeeded(), {"timeout": 240}),
            ],
            cwd=ro1,
        )  # fmt: skip
        (ro2 / "src" / "ledger.py").write_text(LEDGER + "\n# changed\n")
        store = ro2 / ".anekit"
        for path in [*store.iterdir(), store]:
            if chattr(path, "+i"):
                immutable.append(path)
        r.run_table(
            [
                ("readonly-store-index", D, "exit 2, one line naming --store", ["index"],
                 refused("--store", one_line=True), {"timeout": 120}),
                ("readonly-store-search", D, "exit 0 (a reader), or one line",
                 ["search", "reconcile ledger"],
                 either(succeeded(nonempty), refused(one_line=True))),
                ("readonly-store-status", D, "exit 0 (a reader), or one line", ["status"],
                 either(succeeded(), refused(one_line=True))),
                ("readonly-store-forget", D, "exit 2, one line", ["forget", "src/ledger.py"],
                 refused(one_line=True)),
            ],
            cwd=ro2,
        )  # fmt: skip
    finally:
        for path in reversed(immutable):
            chattr(path, "-i")
        immutable.clear()


def convert_case(r: Runner) -> None:
    name = "convert-torch-save-module"
    if not r.wanted(name):
        return
    sb = r.sb
    model = sb.base / "module.pt"
    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, torch; torch.save(torch.nn.Linear(4, 2), sys.argv[1])",
            str(model),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if made.returncode != 0:
        r.skip(
            name,
            "cli:convert",
            "a message on saving TorchScript/exported",
            f"torch.save failed: {made.stderr[-200:]}",
        )
        return
    r.run(
        name,
        "cli:convert",
        "exit 2 saying how to save TorchScript (torch.jit.save) "
        "or an ExportedProgram (torch.export)",
        ["convert", str(model), "--input", "1,4"],
        refused(("torch.jit", "TorchScript", "torch.export")),
        cwd=sb.base,
        timeout=180,
    )


def serve_port_taken(r: Runner, port: int) -> None:
    r.run(
        "serve-port-taken",
        "cli:serve",
        "exit 2 naming the holder",
        ["serve", "--port", str(port)],
        refused("taken"),
        timeout=40,
    )


def daemon_log_case(r: Runner, daemon: Daemon) -> None:
    log = daemon.log()
    r.record(
        "serve-log",
        "daemon",
        "the daemon's log: no traceback, no marker; started once",
        "(anekit serve's stdout and stderr)",
        Outcome(rc=0, err=log),
        lambda o: (
            ("ok", f"{len(_lines(log))} line(s), started {daemon.starts} time(s)")
            if daemon.starts == 1
            else ("DOWN", f"started {daemon.starts} times")
        ),
    )


# --------------------------------------------------------------------------- report


def table(cases: Sequence[Case]) -> str:
    rows = [("case", "surface", "expected", "got", "verdict")]
    rows += [(c.name, c.surface, c.expected, c.got, c.verdict) for c in cases]
    widths = [
        min(max(len(row[i]) for row in rows), limit) for i, limit in enumerate((44, 22, 48, 70, 12))
    ]

    def cut(text: str, width: int) -> str:
        text = text.replace("\n", "\\n")
        return text if len(text) <= width else text[: width - 1] + "…"

    lines = []
    for number, row in enumerate(rows):
        lines.append(
            " | ".join(
                cut(cell, width).ljust(width) for cell, width in zip(row, widths, strict=True)
            )
        )
        if number == 0:
            lines.append("-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workdir", type=Path, help="The sandbox's parent folder (default: a temporary one)."
    )
    parser.add_argument("--keep", action="store_true", help="Keep the sandbox.")
    parser.add_argument(
        "--only", help="Only the cases whose name holds this text (the setup always runs)."
    )
    parser.add_argument("--json", type=Path, help="Where to write the record.")
    parser.add_argument("--no-save", action="store_true", help="Write no record.")
    args = parser.parse_args(argv)
    if platform.system() != "Linux":
        raise SystemExit("Linux only (/proc, mkfifo, chattr)")
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="anekit-bad-inputs-", dir=args.workdir))
    sb = Sandbox(base)
    r = Runner(sb, args.only)
    daemon: Daemon | None = None
    background: threading.Thread | None = None
    slow: threading.Thread | None = None
    try:
        sb.build()
        say(f"sandbox: {base}")
        fast_start(r)
        docs_check(r)
        o = r.cli(["serve", "--show-token"], cwd=sb.n)
        token = o.out.strip()
        if o.rc != 0 or len(token) < 32:
            raise SystemExit(f"anekit serve --show-token: exit {o.rc}: {o.text[-500:]}")
        r.add_marker("token", token)
        r.record(
            "serve-show-token",
            "cli:serve",
            "the token (64 hex digits)",
            r.shown(["serve", "--show-token"]),
            o,
            succeeded(
                lambda o: (bool(re.fullmatch(r"[0-9a-f]{64}", token)), f"{len(token)} characters")
            ),
            allow=("token",),
        )
        index_cases(r)
        background = threading.Thread(
            target=embed_and_lane_cases, args=(r,), name="embed-cases", daemon=True
        )
        background.start()
        more_index_cases(r)
        search_cases(r)
        forget_cases(r)
        watch_embed_cli_cases(r)
        port = free_port()
        daemon = Daemon(sb, [sb.n, sb.inner, sb.w], port, base / "serve.log")
        say(f"anekit serve: up in {daemon.start():.1f} s on port {port}")
        served = Served(r, daemon, token)
        slow = threading.Thread(target=served.slow_body, name="slow-body", daemon=True)
        slow.start()
        serve_port_taken(r, port)
        served.auth_cases()
        served.tool_cases()
        served.health_during_search()
        stdio_cases(r, served)
        served.watcher_case(sb.w)
        served.watcher_case(sb.n, limit=30)
        served.wal_case()
        served.slow_clients()
        late_index_cases(r)
        slow.join(90)
        served.ensure_up()
        r.record(
            "serve-up-at-end",
            "daemon",
            "/health answers after every case",
            "GET /health",
            Outcome(rc=0, down=not daemon.health(10)[0]),
            lambda o: ("ok", "answers"),
        )
        daemon.stop()
        daemon_log_case(r, daemon)
        token_cases(r, port)
        damage_cases(r)
        readonly_cases(r)
        convert_case(r)
        say("waiting for the embed and lane-fault cases")
        background.join(900)
    finally:
        if daemon is not None:
            daemon.stop()
        for path in reversed(r.immutable):  # nothing left immutable
            chattr(path, "-i")
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    elapsed = time.monotonic() - started
    cases = sorted(r.cases, key=lambda c: (c.verdict == "ok", c.verdict == "skip"))
    print(table(r.cases))
    totals: dict[str, int] = {}
    for case in r.cases:
        totals[case.verdict] = totals.get(case.verdict, 0) + 1
    print()
    print(
        f"{len(r.cases)} cases in {elapsed:.0f} s: "
        + ", ".join(f"{v} {totals[v]}" for v in ("ok", "skip", *NOT_OK) if v in totals)
    )
    bad = [c for c in cases if c.verdict in NOT_OK]
    if bad:
        print("\nNot ok:")
        for case in bad:
            print(f"\n[{case.verdict}] {case.name} ({case.surface}); expected: {case.expected}")
            print(f"  command: {case.command}")
            print(f"  got: {case.got}")
            for line in case.excerpt[:8]:
                print(f"  | {line}")
    state = source_state()
    commit = (state.get("commit") or "unknown")[:7]
    date = datetime.date.today().isoformat()
    record = {
        "script": "bench/bad_inputs.py",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": shlex.join(
            [Path(sys.executable).name, "bench/bad_inputs.py", *(argv or sys.argv[1:])]
        ),
        "machine": machine(),
        "python": platform.python_version(),
        "source": state,
        "seconds": round(elapsed, 1),
        "totals": totals,
        "cases": [
            {
                "name": c.name,
                "surface": c.surface,
                "expected": c.expected,
                "got": c.got,
                "verdict": c.verdict,
                "command": c.command,
                "rc": c.rc,
                "seconds": c.seconds,
                "excerpt": c.excerpt,
            }
            for c in r.cases
        ],
    }
    if not args.no_save:
        path = args.json or RESULTS / f"bad_inputs-{date}-{commit}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(redacted(record), indent=1, ensure_ascii=False)
        for marker in sb.markers.values():  # the record names no secret of this run
            text = (
                text.replace(marker, "<marker>")
                if marker.startswith("LEAKMARK") or len(marker) == 64
                else text
            )
        path.write_text(text + "\n")
        print(f"\nrecord: {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
