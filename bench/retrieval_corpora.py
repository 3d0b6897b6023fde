"""The retrieval benchmark's corpora: pinned PyPI sdists of attrs, httpx and rich.

Each sdist is downloaded from PyPI (its URL found with the JSON API,
``https://pypi.org/pypi/<name>/<version>/json``), checked against the sha256 pinned
below, and unpacked into ``<ANEKIT_HOME>/retrieval/<name>-<version>/``. A corpus root is
the sdist's own top folder, everything in it (``pyproject.toml``, ``tests/``, ``docs/``
where the sdist has them): the gold paths in ``retrieval_questions.json`` are relative to
it, so attrs's code is under ``src/attr/`` and ``src/attrs/`` (a src layout), httpx's
under ``httpx/`` and rich's under ``rich/``. A complete unpack leaves a marker next to
the folder (``<name>-<version>.complete``, so the corpus holds only the sdist's files); a
corpus with its marker is not fetched again.

    .venv/bin/python bench/retrieval_corpora.py [--json] [NAME ...]

Standard library only (and anekit.config for the cache root).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anekit.config import home


@dataclass(frozen=True)
class Sdist:
    """One pinned source distribution."""

    name: str
    version: str
    sha256: str

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


#: The pinned corpora (latest stable releases on PyPI on 2026-12-01).
_PINS = (
    ("attrs", "26.1.0", "d03ceb89cb322a8fd706d4fb91940737b6642aa36998fe130a9bc96c985eff32"),
    ("httpx", "0.28.1", "75e98c5f16b0f35b567856f597f06ff2270a374470a5c2392242528e3e3e42fc"),
    ("rich", "15.0.0", "edd07a4824c6b40189fb7ac9bc4c52536e9780fbbfbddf6f1e2502c31b068c36"),
)
SDISTS: dict[str, Sdist] = {name: Sdist(name, version, sha) for name, version, sha in _PINS}


def cache() -> Path:
    """Where the corpora are unpacked: ``<ANEKIT_HOME>/retrieval``."""
    return home() / "retrieval"


def _json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=60) as response:
        answer: dict[str, Any] = json.load(response)
    return answer


def _sdist_url(sdist: Sdist) -> str:
    """The sdist's URL from PyPI's JSON API: the release's own page, or the project's
    ``releases`` table where the release page is not served (some mirrors). A relative file
    URL (some mirrors serve them) is taken relative to the API page that lists it."""
    page = f"https://pypi.org/pypi/{sdist.name}/{sdist.version}/json"
    try:
        files = _json(page)["urls"]
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise
        page = f"https://pypi.org/pypi/{sdist.name}/json"
        files = _json(page)["releases"][sdist.version]
    for item in files:
        if item["packagetype"] == "sdist":
            if item["digests"]["sha256"] != sdist.sha256:
                raise SystemExit(
                    f"{sdist.folder}: PyPI lists sha256 {item['digests']['sha256']}, "
                    f"pinned {sdist.sha256}"
                )
            return urllib.parse.urljoin(page, str(item["url"]))
    raise SystemExit(f"{sdist.folder}: no sdist on PyPI")


def _download(url: str, target: Path, sha256: str) -> None:
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=120) as response, target.open("wb") as out:
        while block := response.read(1 << 16):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != sha256:
        raise SystemExit(f"{url}: sha256 {digest.hexdigest()}, pinned {sha256}")


def corpus_root(name: str) -> Path:
    """The unpacked sdist's root folder for corpus ``name``, fetching it if needed."""
    try:
        sdist = SDISTS[name]
    except KeyError:
        raise SystemExit(f"unknown corpus {name!r} (known: {', '.join(SDISTS)})") from None
    root = cache() / sdist.folder
    marker = cache() / f"{sdist.folder}.complete"
    if marker.is_file() and root.is_dir():
        return root
    cache().mkdir(parents=True, exist_ok=True)
    print(f"fetching {sdist.folder} from PyPI...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=cache(), prefix=f".{sdist.folder}-") as scratch:
        archive = Path(scratch) / f"{sdist.folder}.tar.gz"
        _download(_sdist_url(sdist), archive, sdist.sha256)
        unpacked = Path(scratch) / "unpacked"
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
        top = unpacked / sdist.folder
        if not top.is_dir():
            raise SystemExit(f"{archive.name}: no top folder {sdist.folder}/")
        if root.exists():  # an earlier unpack that did not finish
            shutil.rmtree(root)
        top.rename(root)
    marker.write_text(f"{sdist.name}=={sdist.version} sha256:{sdist.sha256}\n")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"corpora (default: all of {', '.join(SDISTS)})")
    parser.add_argument("--json", action="store_true", help="print the roots as JSON")
    args = parser.parse_args()
    roots = {name: corpus_root(name) for name in args.names or SDISTS}
    if args.json:
        print(json.dumps({name: str(path) for name, path in roots.items()}, indent=2))
    else:
        for name, path in roots.items():
            print(f"{name} {SDISTS[name].version}: {path}")


if __name__ == "__main__":
    main()
