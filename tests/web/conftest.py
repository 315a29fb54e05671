"""Fixtures of the web gateway's tests (tests/web).

``gateway``: a real ``agenthost web`` process on 127.0.0.1 with a free port, serving
the test's ``home`` (start hosts there with ``host_factory``). It is a
:class:`webtools.Gateway`: ``gateway.url`` (``http://127.0.0.1:PORT/``),
``gateway.token`` (the admin token printed at first start), ``gateway.origin``,
``gateway.client()`` (httpx with the admin Bearer token; ``client(None)`` without),
``gateway.add_token(name, *scopes)``, ``gateway.log()`` (its stderr), ``gateway.stop()``.
``gateway_factory(*args, env=..., nofile=...)`` starts more (e.g. with ``--tls-cert``,
or under a limit of open descriptors). Both end at teardown. ``certificate``: a
self-signed certificate for 127.0.0.1 and its key (for ``--tls-cert``). Browser tests
log in with ``gateway.token`` on ``gateway.url``.

The page is served with a Content-Security-Policy of ``default-src 'self'`` (styles may
be inline, scripts may not).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from browser import checked_page, chromium
from hosttools import DEADLINE, HostProc
from webtools import Gateway, GatewayFactory, start_gateway

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

# Both this file and tests/conftest.py are imported as the module ``conftest`` (see
# tests/reliability/conftest.py): test modules elsewhere do
# ``from conftest import HostFactory``, so the name must exist here too.
HostFactory = Callable[..., HostProc]


@pytest.fixture
def gateway_factory(home: Path) -> Iterator[GatewayFactory]:
    """Start gateways on ``home``: ``gateway_factory(*args, env=None)``."""
    started: list[Gateway] = []

    def factory(*args: str, env: dict[str, str] | None = None, **kw: Any) -> Gateway:
        gw = start_gateway(home, *args, env=env, **kw)
        started.append(gw)
        return gw

    yield factory
    for gw in started:
        try:
            gw.stop()
        except subprocess.TimeoutExpired:
            gw.proc.kill()
            gw.proc.wait()


@pytest.fixture
def gateway(gateway_factory: GatewayFactory) -> Gateway:
    """One gateway on the test's home (see the module docstring)."""
    return gateway_factory()


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=DEADLINE,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, for one test module (tests/web/browser.py; skipped,
    or failed in CI, without chromium or Playwright)."""
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Browser, gateway: Gateway) -> Iterator[Page]:
    """A fresh page on ``gateway`` (no cookie yet); the test fails if the page's scripts
    threw or the Content-Security-Policy refused something."""
    with checked_page(browser, gateway) as p:
        yield p
