"""The vendored xterm.js (agenthost/web/static/vendor/xterm, ``make vendor-xterm``):
the files are those of the pinned npm tarballs (their SHA-256 as VERSIONS.json records
them), with their licences, and the gateway serves them as the page needs them (an ES
module as JavaScript), under its Content-Security-Policy, to anyone (they are public
code, like the page). Whether xterm.js needs anything the policy forbids is asked of
Chromium in tests/web/test_browser_terminal.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from webtools import Gateway

VENDOR = Path(__file__).resolve().parents[2] / "agenthost/web/static/vendor/xterm"


def record() -> dict[str, dict[str, object]]:
    packages: dict[str, dict[str, object]] = json.loads((VENDOR / "VERSIONS.json").read_text())[
        "packages"
    ]
    return packages


def test_the_vendored_files_are_the_pinned_packages_own() -> None:
    packages = record()
    assert set(packages) == {"@xterm/xterm", "@xterm/addon-fit"}
    listed = set()
    for name, package in packages.items():
        assert str(package["integrity"]).startswith("sha512-"), name
        assert package["license"] == "MIT"
        files = package["files"]
        assert isinstance(files, dict)
        for file, digest in files.items():
            assert hashlib.sha256((VENDOR / file).read_bytes()).hexdigest() == digest, file
            listed.add(file)
    # nothing else hides there, and each package's licence is among its files
    assert {p.name for p in VENDOR.iterdir()} == listed | {"VERSIONS.json"}
    assert {"LICENSE", "LICENSE-addon-fit"} <= listed
    assert (
        "MIT License" in (VENDOR / "LICENSE").read_text()
        or "Permission is hereby" in (VENDOR / "LICENSE").read_text()
    )


def test_the_page_loads_nothing_from_elsewhere() -> None:
    static = VENDOR.parent.parent
    for path in static.glob("*.*"):
        text = path.read_text()
        assert "https://" not in text, path.name
        assert "//cdn" not in text and "unpkg" not in text and "jsdelivr" not in text, path.name


def test_the_gateway_serves_them_as_the_page_needs(gateway: Gateway) -> None:
    anonymous = gateway.client(None)
    kinds = {
        "xterm.mjs": "text/javascript",
        "addon-fit.mjs": "text/javascript",
        "xterm.css": "text/css",
        "LICENSE": None,
    }
    for name, kind in kinds.items():
        got = anonymous.get(f"/static/vendor/xterm/{name}")
        assert got.status_code == 200, name
        assert got.content == (VENDOR / name).read_bytes()
        if kind:
            assert got.headers["content-type"].startswith(kind), name
        assert "script-src" not in got.headers["content-security-policy"]
        assert got.headers["content-security-policy"].startswith("default-src 'self'")
    assert anonymous.get("/static/vendor/xterm/nope.mjs").status_code == 404
    assert anonymous.get("/static/vendor/xterm/%2e%2e/%2e%2e/app.py").status_code == 404
    page = anonymous.get("/")
    assert '<link rel="stylesheet" href="/static/vendor/xterm/xterm.css">' in page.text
