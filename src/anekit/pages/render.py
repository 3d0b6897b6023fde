"""The Jinja2 environment of the pages: templates from this package, every value
autoescaped, an undefined name an error rather than an empty string."""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["asset", "csp_hash", "render"]


@cache
def _environment() -> Any:
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("anekit.pages", "templates"),
        autoescape=True,  # every {{ value }}: file names, code, messages
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["number"] = _number
    return environment


def render(template: str, **context: Any) -> str:
    """``template`` (a file under templates/) rendered with ``context``."""
    from anekit._version import __version__

    return str(_environment().get_template(template).render(version=__version__, **context))


def asset(name: str) -> str:
    """The text of templates/``name`` (a stylesheet or script to inline)."""
    return resources.files("anekit.pages").joinpath("templates", name).read_text("utf-8")


def csp_hash(text: str) -> str:
    """The Content-Security-Policy source that allows the inline ``text`` (CSP 3 hash)."""
    digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    return f"'sha256-{digest}'"


def _number(value: Any) -> str:
    """A magnitude in a short form: 65504, 3.2e+05, 0.00012."""
    if value is None:
        return ""
    number = float(value)
    if number == 0:
        return "0"
    return f"{number:.6g}"
