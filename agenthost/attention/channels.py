"""Sending one notice through one channel: webhook, ntfy, desktop, command.

Each :func:`deliver` is one attempt and says how it went (:class:`Delivery`: ok, or a
short why); retrying is the notifier's. httpx is imported with the first HTTP channel
used, not with the daemon.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from agenthost.attention.notices import Notice
from agenthost.config import Channel, CommandChannel, DesktopChannel, NtfyChannel, WebhookChannel

if TYPE_CHECKING:
    import httpx

USER_AGENT: Final = "agenthost-notify/1"
_PRIORITY: Final = {"waiting": 4, "failed": 4, "died": 5, "finished": 3}
_TAGS: Final = {
    "waiting": "bell",
    "failed": "warning",
    "died": "skull",
    "finished": "heavy_check_mark",
}
_WHY_MAX: Final = 300


@dataclass(frozen=True, slots=True)
class Delivery:
    """How one attempt went: ``ok``, or ``why`` not."""

    ok: bool
    why: str | None = None


def failed(why: str) -> Delivery:
    """A failed attempt, its reason cut to one short line."""
    line = " ".join(why.split())
    return Delivery(False, line if len(line) <= _WHY_MAX else line[: _WHY_MAX - 1] + "…")


SENT: Final = Delivery(True)


async def deliver(channel: Channel, notice: Notice) -> Delivery:
    """One attempt to send ``notice`` through ``channel``."""
    try:
        if isinstance(channel, WebhookChannel):
            return await _webhook(channel, notice)
        if isinstance(channel, NtfyChannel):
            return await _ntfy(channel, notice)
        if isinstance(channel, DesktopChannel):
            return await _desktop(channel, notice)
        return await _command(channel, notice)
    except OSError as exc:  # a secret file, a command that cannot run
        return failed(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Agenthost-Signature`` value: HMAC-SHA256 of ``timestamp.body``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _first_line(path: Path) -> str:
    with path.expanduser().open(encoding="utf-8") as f:
        return f.readline().strip()


def body_of(notice: Notice) -> bytes:
    """The JSON body the webhook and command channels send."""
    return json.dumps(notice.to_json(), ensure_ascii=False).encode()


_http: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient] | None = None


def _client() -> httpx.AsyncClient:
    """The HTTP client of this event loop, made at its first use. One for all
    deliveries: a client per delivery built a TLS context each time (loading the CA
    certificates), which cost ~20 ms of CPU per notice (benchmarks/attention.py)."""
    global _http
    import httpx  # only when an HTTP channel is used

    loop = asyncio.get_running_loop()
    if _http is None or _http[0] is not loop or _http[1].is_closed:
        _http = (loop, httpx.AsyncClient(follow_redirects=False))
    return _http[1]


async def close_http() -> None:
    """Close the shared HTTP client (at the end of the loop that used it)."""
    global _http
    if _http is not None:
        client, _http = _http[1], None
        await client.aclose()


async def _post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Delivery:
    import httpx

    try:
        response = await _client().post(url, content=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return failed(f"no answer from {url} within {timeout:g}s")
    except httpx.HTTPError as exc:
        return failed(f"cannot reach {url}: {exc or type(exc).__name__}")
    if 200 <= response.status_code < 300:
        return SENT
    text = response.text.strip()
    return failed(f"HTTP {response.status_code} from {url}" + (f": {text}" if text else ""))


async def _webhook(channel: WebhookChannel, notice: Notice) -> Delivery:
    body = body_of(notice)
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Agenthost-Timestamp": stamp,
        "X-Agenthost-Kind": notice.kind,
        **channel.headers,
    }
    secret = channel.secret
    if channel.secret_file is not None:
        secret = _first_line(channel.secret_file)
        if not secret:
            return failed(f"secret_file {channel.secret_file} is empty")
    if secret:
        headers["X-Agenthost-Signature"] = signature(secret, stamp, body)
    return await _post(channel.url, body, headers, channel.timeout)


def header_text(text: str) -> str:
    """A header value: ASCII as is, anything else RFC 2047 encoded (ntfy decodes it)."""
    text = " ".join(text.split())
    if text.isascii():
        return text
    return "=?UTF-8?B?" + base64.b64encode(text.encode()).decode() + "?="


def ntfy_headers(channel: NtfyChannel, notice: Notice, token: str | None) -> dict[str, str]:
    """The headers of an ntfy publish of ``notice``."""
    headers = {
        "User-Agent": USER_AGENT,
        "Title": header_text(notice.title),
        "Priority": str(channel.priority or _PRIORITY[notice.kind]),
        "Tags": f"{_TAGS[notice.kind]},agenthost",
    }
    if notice.page_url:
        headers["Click"] = notice.page_url
    if notice.approve_url and notice.deny_url:
        headers["Actions"] = (
            f"http, Approve, {notice.approve_url}, method=POST, clear=true; "
            f"http, Deny, {notice.deny_url}, method=POST, clear=true"
        )
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def _ntfy(channel: NtfyChannel, notice: Notice) -> Delivery:
    token = channel.token
    if channel.token_file is not None:
        token = _first_line(channel.token_file)
    headers = ntfy_headers(channel, notice, token)
    return await _post(channel.url, notice.message.encode(), headers, channel.timeout)


def _gvariant_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


async def _run(
    argv: list[str], stdin: bytes, env: dict[str, str] | None, timeout: float
) -> tuple[int | None, bytes]:
    """Run ``argv``; its exit status (None: killed at the timeout) and stderr."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,  # a timeout kills what it started too
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        return None, b""
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        raise
    return proc.returncode, err


def _tail(err: bytes) -> str:
    text = err.decode(errors="replace").strip()
    return text[-_WHY_MAX:]


async def _desktop(channel: DesktopChannel, notice: Notice) -> Delivery:
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return failed("no session bus: DBUS_SESSION_BUS_ADDRESS is not set")
    argv = [
        "gdbus", "call", "--session",
        "--dest", "org.freedesktop.Notifications",
        "--object-path", "/org/freedesktop/Notifications",
        "--method", "org.freedesktop.Notifications.Notify",
        # typed: without introspection gdbus guesses int32 for 0; "-1" would be an option
        '"agenthost"', "uint32 0", '""',
        _gvariant_string(notice.title), _gvariant_string(notice.message),
        "@as []", "@a{sv} {}", "int32 -1",
    ]  # fmt: skip
    code, err = await _run(argv, b"", None, channel.timeout)
    if code is None:
        return failed(f"the notification server did not answer within {channel.timeout:g}s")
    if code != 0:
        return failed(f"desktop notification failed: {_tail(err) or f'gdbus exit code {code}'}")
    return SENT


async def _command(channel: CommandChannel, notice: Notice) -> Delivery:
    env = {
        **os.environ,
        "AGENTHOST_NOTICE_KIND": notice.kind,
        "AGENTHOST_NOTICE_AGENT": notice.agent_id,
        "AGENTHOST_NOTICE_PROJECT": notice.project,
        "AGENTHOST_NOTICE_TITLE": notice.title,
        "AGENTHOST_NOTICE_MESSAGE": notice.message,
        "AGENTHOST_NOTICE_APPROVE_URL": notice.approve_url or "",
        "AGENTHOST_NOTICE_DENY_URL": notice.deny_url or "",
        "AGENTHOST_NOTICE_URL": notice.page_url or "",
    }
    argv = list(channel.argv)
    code, err = await _run(argv, body_of(notice), env, channel.timeout)
    if code is None:
        return failed(f"{channel.argv[0]} did not finish within {channel.timeout:g}s")
    if code != 0:
        tail = _tail(err)
        return failed(f"{channel.argv[0]} exited with {code}" + (f": {tail}" if tail else ""))
    return SENT
