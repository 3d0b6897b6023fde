"""The search page of ``anekit serve`` (``GET /``) and its API, on a real server process:
the API's refusals over plain HTTP, and the page in Debian's Chromium (Playwright): the
token asked once and kept in the tab's session storage, a search as one types, a hit
opened in context, the index status."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from served import free_port, wait_until_up

RETRY = '''"""Sending again."""


def retry_request(send, attempts=3):
    """Send again after a failure, up to ``attempts`` times."""
    for _ in range(attempts):
        if send():
            return True
    return False
'''
HOSTILE_NAME = "<img src=x onerror=alert(1)>.py"


@dataclass
class Served:
    root: Path
    home: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return (self.home / "serve" / "token").read_text().strip()

    def get(self, path: str, token: str | None = None, **headers: str) -> httpx.Response:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.get(self.url + path, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("repo")
    (root / "net").mkdir()
    (root / "net" / "retry.py").write_text(RETRY)
    (root / "net" / HOSTILE_NAME).write_text('def hostile():\n    return "<script>x</script>"\n')
    (root.parent / "secret.txt").write_text("outside the root\n")
    home = tmp_path_factory.mktemp("home")
    env = {**os.environ, "ANEKIT_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    index = [sys.executable, "-m", "anekit", "index", str(root), "--lane", "cpu"]
    subprocess.run(index, env=env, check=True, capture_output=True, timeout=300)
    port = free_port()
    command = [sys.executable, "-m", "anekit", "serve", str(root), "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--lane", "cpu", "--no-watch"], env=env, stderr=subprocess.PIPE
    )
    wait_until_up(process, port)
    yield Served(root, home, port)
    process.terminate()
    process.wait(30)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_page_is_open_and_strict_and_the_api_needs_the_token(served: Served) -> None:
    page = served.get("/")
    assert page.status_code == 200 and "anekit search" in page.text
    policy = dict(
        part.strip().split(" ", 1) for part in page.headers["content-security-policy"].split(";")
    )
    assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["form-action"] == "'none'"
    # the inline script and style are allowed by their hashes, and nothing else is
    (script,) = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
    (style,) = re.findall(r"<style>(.*?)</style>", page.text, re.DOTALL)
    assert policy["script-src"] == _sha256(script) and policy["style-src"] == _sha256(style)
    assert page.headers["x-frame-options"] == "DENY"
    assert served.token not in page.text
    for path in ("/api/status", "/api/search?q=retry", "/api/read?path=net/retry.py"):
        assert served.get(path).status_code == 401
        assert served.get(path, "not-the-token").status_code == 401


def test_a_foreign_host_or_origin_is_refused(served: Served) -> None:
    # DNS rebinding: a name that resolves here is still not this server's address
    assert served.get("/", Host=f"evil.example:{served.port}").status_code == 403
    refused = served.get("/api/status", served.token, Origin="http://evil.example")
    assert refused.status_code == 403 and "may not use this server" in refused.json()["error"]
    same = served.get("/api/status", served.token, Origin=f"http://localhost:{served.port}")
    assert same.status_code == 200


def test_the_api_is_the_tools_work_and_refuses_what_they_refuse(served: Served) -> None:
    token = served.token
    found = served.get("/api/search?q=send+again+after+a+failure&k=3", token).json()
    assert found["hits"][0]["path"] == "net/retry.py"
    assert found["hits"][0]["symbol"] == "retry_request"
    read = served.get("/api/read?path=net/retry.py&start=4&end=5", token).json()
    assert read["text"].splitlines() == RETRY.splitlines()[3:5]
    for path in ("../secret.txt", str(served.root.parent / "secret.txt")):
        outside = served.get(f"/api/read?path={path}", token)
        assert outside.status_code == 400 and "outside the served roots" in outside.json()["error"]
    from anekit.search.searcher import MODES

    for mode in MODES:  # every mode the page offers works
        assert served.get(f"/api/search?q=retry&mode={mode}", token).status_code == 200
    assert served.get("/api/search?q=x&mode=fuzzy", token).status_code == 400
    assert served.get("/api/search?q=x&k=0", token).status_code == 400
    assert served.get("/api/search?q=x&k=many", token).status_code == 400
    assert served.get("/api/nothing", token).status_code == 404
    status = served.get("/api/status", token).json()
    assert status["roots"][0]["files"] == 2 and status["lanes"] == ["cpu"]


def test_the_page_in_a_browser(served: Served, browser: Any, artifacts: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: _errors_only(message, errors))
    page.goto(served.url + "/")
    page.wait_for_selector("body[data-ready='1']")
    from anekit.search.searcher import MODES

    offered = page.eval_on_selector_all("#mode option", "options => options.map(o => o.value)")
    assert sorted(offered) == sorted(MODES)
    assert page.locator("#login").is_visible() and page.locator("#app").is_hidden()
    page.fill("#token", "not-the-token")
    page.click("#login-form button")
    page.wait_for_function("() => document.getElementById('login-error').textContent !== ''")
    assert "refused this token" in page.inner_text("#login-error")
    assert page.locator("#app").is_hidden()
    page.fill("#token", served.token)
    page.click("#login-form button")
    page.wait_for_selector("#app:not(.hidden)")
    page.wait_for_function(
        "() => document.getElementById('status').textContent.includes('2 files')"
    )
    assert "embedding lanes: cpu" in page.inner_text("#status")  # serve --lane cpu
    # results as one types (debounced): the known file first
    page.locator("#q").press_sequentially("send again after a failure", delay=20)
    page.wait_for_selector(".hit")
    first = page.locator(".hit").first
    assert first.locator(".path").inner_text() == "net/retry.py"
    assert "retry_request" in first.inner_text()
    assert first.locator("mark").count() >= 2  # the query's words marked in the snippet
    first.click()
    page.wait_for_selector("#viewer .line.in-hit")
    assert page.inner_text("#viewer-title").startswith("net/retry.py")
    assert "def retry_request(send, attempts=3):" in page.inner_text("#viewer")
    page.screenshot(path=str(artifacts / "search-page.png"))
    # a file named like markup is shown as text, never run
    page.fill("#q", "hostile")
    page.wait_for_selector(f".hit .path:text-is('net/{HOSTILE_NAME}')")
    assert page.evaluate("() => document.querySelectorAll('#results img').length") == 0
    # the token: in this tab's session storage, never in the address
    assert served.token not in page.url
    stored = page.evaluate("() => sessionStorage.getItem('anekit-token')")
    assert stored == served.token
    assert page.evaluate("() => localStorage.length") == 0
    page.click("#logout")
    assert page.locator("#login").is_visible()
    assert page.evaluate("() => sessionStorage.getItem('anekit-token')") is None
    fresh = browser.new_page()  # another tab: asked again
    fresh.goto(served.url + "/")
    fresh.wait_for_selector("body[data-ready='1']")
    assert fresh.locator("#login").is_visible()
    fresh.close()
    assert [e for e in errors if "401" not in e] == []  # the wrong token's 401 only
    page.close()


def _errors_only(message: Any, errors: list[str]) -> None:
    if message.type == "error":
        errors.append(message.text)


def test_a_huge_hostile_snippet_renders_as_text_cut_short(
    served: Served, browser: Any, artifacts: Path
) -> None:
    """A hit whose snippet is megabytes of markup (the index cuts chunks far smaller; this
    stands in for a store that holds one): the page stays usable and runs none of it."""
    import json

    huge = ("<img src=x onerror=window.pwned=1><script>window.pwned=2</script>" * 80_000)[
        : 5 * 2**20
    ]
    hit = {
        "path": "<b>bold</b>.py",
        "start_line": 1,
        "end_line": 1,
        "symbol": "<i>x</i>",
        "kind": "code",
        "language": "python",
        "score": 0.5,
        "snippet": huge,
    }
    answer = {"root": str(served.root), "query": "x", "mode": "hybrid", "milliseconds": 1.0}
    body = json.dumps({**answer, "hits": [hit]})
    page = browser.new_page()
    page.route(
        "**/api/search?*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    page.goto(served.url + "/")
    page.wait_for_selector("body[data-ready='1']")
    page.fill("#token", served.token)
    page.click("#login-form button")
    page.wait_for_selector("#app:not(.hidden)")
    page.fill("#q", "anything")
    page.wait_for_selector(".hit")
    shown = page.inner_text(".hit .snippet")
    assert 0 < len(shown) <= 4000 and shown == huge[: len(shown)]
    assert page.inner_text(".hit .path") == "<b>bold</b>.py"
    assert page.evaluate("() => window.pwned === undefined")
    assert page.evaluate("() => document.querySelectorAll('#results img, #results b').length") == 0
    page.close()
