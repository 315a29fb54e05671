#!/usr/bin/env python3
"""Vendor xterm.js for the web page: ``make vendor-xterm`` (docs/web.md, section 9).

Fetches ``@xterm/xterm`` and ``@xterm/addon-fit`` from the npm registry with ``npm
pack`` (npm checks each tarball against the registry's integrity), checks each tarball's
SHA-512 against the one pinned in ``agenthost/web/static/vendor/xterm/VERSIONS.json``,
and copies the built ES modules, the stylesheet and the licences beside it, byte for
byte. The record also holds every copied file's SHA-256, which the tests check
(tests/web/test_web_terminal_vendor.py) so that an edited vendored file is seen.

    python scripts/vendor_xterm.py              # the pinned versions again (must match)
    python scripts/vendor_xterm.py --xterm 6.1.0 --fit 0.12.0   # another pin: its
                                                # integrity is recorded as npm reports it

Nothing of the page is ever loaded from a CDN: these files are served by the gateway.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "agenthost/web/static/vendor/xterm"
RECORD = VENDOR / "VERSIONS.json"
FILES = {
    # package: {path in its tarball: name in VENDOR}
    "@xterm/xterm": {
        "package/lib/xterm.mjs": "xterm.mjs",
        "package/css/xterm.css": "xterm.css",
        "package/LICENSE": "LICENSE",
    },
    "@xterm/addon-fit": {
        "package/lib/addon-fit.mjs": "addon-fit.mjs",
        "package/LICENSE": "LICENSE-addon-fit",
    },
}


def integrity(data: bytes) -> str:
    """The Subresource-Integrity string npm records for a tarball."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def pack(spec: str, into: Path) -> tuple[dict[str, object], bytes]:
    """``npm pack SPEC`` into ``into``: npm's description of it and the tarball's bytes."""
    out = subprocess.run(
        ["npm", "pack", spec, "--json", "--pack-destination", str(into)],
        check=True,
        capture_output=True,
        text=True,
        cwd=into,
    ).stdout
    info = json.loads(out)[0]
    return info, (into / info["filename"]).read_bytes()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xterm", help="another version of @xterm/xterm to pin")
    parser.add_argument("--fit", help="another version of @xterm/addon-fit to pin")
    args = parser.parse_args()
    old = json.loads(RECORD.read_text()) if RECORD.exists() else {"packages": {}}
    wanted = {"@xterm/xterm": args.xterm, "@xterm/addon-fit": args.fit}
    record: dict[str, object] = {
        "note": "Vendored by scripts/vendor_xterm.py (make vendor-xterm); do not edit the files.",
        "packages": {},
    }
    packages: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, copies in FILES.items():
            pinned = old["packages"].get(name)
            version = wanted[name] or (pinned["version"] if pinned else None)
            if version is None:
                sys.exit(f"no version of {name} pinned: give --xterm/--fit")
            info, tarball = pack(f"{name}@{version}", Path(tmp))
            got = integrity(tarball)
            if got != info["integrity"]:
                sys.exit(f"{name}@{version}: the tarball is not what npm reported")
            if pinned and pinned["version"] == version and pinned["integrity"] != got:
                sys.exit(
                    f"{name}@{version}: integrity {got} differs from the pinned "
                    f"{pinned['integrity']}: the registry served other bytes"
                )
            files: dict[str, str] = {}
            with tarfile.open(fileobj=io.BytesIO(tarball)) as tar:
                for member, target in copies.items():
                    extracted = tar.extractfile(member)
                    if extracted is None:
                        sys.exit(f"{name}@{version} has no {member}")
                    data = extracted.read()
                    (VENDOR / target).parent.mkdir(parents=True, exist_ok=True)
                    (VENDOR / target).write_bytes(data)
                    files[target] = hashlib.sha256(data).hexdigest()
            packages[name] = {
                "version": version,
                "integrity": got,
                "tarball": f"https://registry.npmjs.org/{name}/-/"
                f"{name.split('/')[1]}-{version}.tgz",
                "license": "MIT",
                "files": files,
            }
            print(f"{name}@{version}: {got}")
    record["packages"] = packages
    RECORD.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
