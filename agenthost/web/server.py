"""Run a gateway: uvicorn (h11, under the deadlines and caps of
:mod:`agenthost.web.limits`, sized to the descriptor limit raised at start) on uvloop,
on a socket bound here so the real port is known before anything is printed; SIGTERM
and SIGINT end open streams, then the server."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import signal
import socket
import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import structlog
import uvicorn
import uvloop

from agenthost.attention.keys import link_key
from agenthost.config import ConfigFile
from agenthost.errors import ConfigError
from agenthost.sdnotify import sd_notify
from agenthost.web import access
from agenthost.web.agents import Agents
from agenthost.web.app import make_app
from agenthost.web.gateway import Gateway
from agenthost.web.limits import HEAD_SECONDS, Caps, Connections, Deadlines, StreamSlots, caps_for
from agenthost.web.protocol import protocol_class
from agenthost.web.tokens import TokenStore, load_secret

log = structlog.get_logger("agenthost.web")

GRACE_SECONDS = 5
"""How long requests still running (a stop, a spawn) may take once the gateway stops."""


@dataclass(frozen=True, slots=True)
class Options:
    """How ``agenthost web`` runs."""

    home: Path
    host: str = "127.0.0.1"
    port: int = 8765
    tls_cert: Path | None = None
    tls_key: Path | None = None
    remotes: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    public_url: str | None = None
    """Where browsers reach the gateway through a proxy in front, e.g.
    ``https://agents.example.org``."""
    deadlines: Deadlines = Deadlines()
    """How long a connection may take to send a request head, its body, and to read
    an answer (``--head-timeout``, ``--body-timeout``, ``--write-timeout``)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT`` for IPv6) as a host and a port; ConfigError else."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if host.startswith("[") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--listen wants HOST:PORT (e.g. 127.0.0.1:8765), not {text!r}")
    return host, int(port)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; ConfigError when it cannot be had."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve the listen address {host!r}: {exc}") from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        where = f"[{host}]" if ":" in host else host
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"cannot listen on {where}:{port}: in use",
                hint=f"another program (another `agenthost web`?) has that port: give "
                f"--listen {where}:0 for any free port (printed), or choose one",
            ) from exc
        raise ConfigError(f"cannot listen on {where}:{port}: {exc.strerror}") from exc
    return sock


class GatewayServer(uvicorn.Server):
    """uvicorn's server, whose signals end the gateway's open streams first (uvicorn
    waits for every response to end before it stops, and a stream never would)."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self.ready = asyncio.Event()
        """Set once the server accepts connections."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self.request_exit)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def request_exit(self) -> None:
        """Stop: streams end now, then the server (what a signal does)."""
        log.info("web.stopping")
        sd_notify("STOPPING=1")
        self._on_exit()
        self.should_exit = True


def raise_descriptor_limit() -> int:
    """Raise the soft limit of open descriptors to the hard one (systemd gives services
    1024 for the sake of programs that use select(); the gateway does not, and each
    connection takes one), log both, and return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    was = soft
    if soft != hard and hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # e.g. a seccomp filter: go on with what is
            log.warning("web.descriptors_not_raised", error=str(exc))
    limit = soft if soft != resource.RLIM_INFINITY else 1 << 20
    _for_the_log()("web.descriptors", soft_was=_limit(was), soft=_limit(soft), hard=_limit(hard))
    return limit


def _for_the_log() -> Callable[..., Any]:
    """How to log what a person on a terminal need not read (the limits in force, where
    it listens: announce() prints that line) and a service's log must keep: at debug on
    a terminal, at info elsewhere."""
    method: Callable[..., Any] = log.debug if sys.stdout.isatty() else log.info
    return method


def _limit(value: int) -> int | str:
    return "unlimited" if value == resource.RLIM_INFINITY else value


class GatewayLoop(uvloop.Loop):
    """uvloop, whose TLS servers give a client the head deadline (:data:`HEAD_SECONDS`
    unless ``--head-timeout`` says) for its handshake (uvloop's default is 60 s, and
    uvicorn does not say): until its handshake is done a connection is not HTTP yet,
    and no request deadline reaches it. Make the class with :func:`loop_class`."""

    handshake_seconds: ClassVar[float] = HEAD_SECONDS

    async def create_server(self, *args: Any, **kwargs: Any) -> asyncio.AbstractServer:  # type: ignore[override]
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_handshake_timeout", self.handshake_seconds)
        return await super().create_server(*args, **kwargs)


def loop_class(deadlines: Deadlines) -> type[GatewayLoop]:
    """The event loop class of a gateway under ``deadlines``."""

    class ServerLoop(GatewayLoop):
        handshake_seconds = deadlines.head

    return ServerLoop


def make_config(app: object, options: Options, caps: Caps) -> uvicorn.Config:
    """uvicorn's configuration: our loop, h11 under the deadlines and the connection
    cap of ``caps`` (see :mod:`agenthost.web.protocol`), no websockets, no lifespan, no
    access log (ours logs paths without query strings), TLS when given."""
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        loop="none",
        http=protocol_class(Connections(caps.connections), options.deadlines),
        ws="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACE_SECONDS,
        ssl_certfile=str(options.tls_cert) if options.tls_cert else None,
        ssl_keyfile=str(options.tls_key) if options.tls_key else None,
    )
    try:
        config.load()
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise ConfigError(f"cannot use the TLS certificate or key: {exc}") from exc
    return config


def gateway(options: Options) -> Gateway:
    """The gateway of ``options`` (its token store and session secret in the home)."""
    allowed = {options.host, *options.allowed_hosts}
    if options.host in ("0.0.0.0", "::", ""):
        allowed |= {socket.gethostname(), socket.getfqdn()}
    public = public_origin(options.public_url) or config_origin(options.home)
    if public is not None:
        allowed.add(public[1])
    return Gateway(
        agents=Agents(options.home, options.remotes),
        store=TokenStore(options.home),
        secret=load_secret(options.home),
        tls=options.tls_cert is not None,
        allowed_hosts=frozenset(a for a in allowed if a),
        public_origin=public,
        link_key=link_key(options.home),
    )


def public_origin(url: str | None) -> access.Origin | None:
    """The origin of ``--public-url``; ConfigError for one that is not
    ``http(s)://HOST[:PORT][/]``."""
    if url is None:
        return None
    origin = access.parse_origin(url)
    if origin is None:
        raise ConfigError(f"--public-url wants https://HOST[:PORT] (no path), not {url!r}")
    return origin


def config_origin(home: Path) -> access.Origin | None:
    """The origin of ``[web] public_url`` in the home's config.toml (the base of the
    approval links in notices), when ``--public-url`` is not given: a link's page
    posts from there. None without one (an unusable config.toml is logged)."""
    config = ConfigFile(home)
    public_url = config.get().web.public_url
    if config.error is not None:
        log.warning("web.config_unusable", error=config.error)
    if public_url is None:
        return None
    parts = urlsplit(public_url)
    return access.parse_origin(f"{parts.scheme}://{parts.netloc}")


def url(options: Options, port: int) -> str:
    """The gateway's address for people."""
    host = f"[{options.host}]" if ":" in options.host else options.host
    return f"{'https' if options.tls_cert else 'http'}://{host}:{port}/"


def serve(options: Options, announce: Callable[[str], None]) -> None:
    """Run the gateway until SIGTERM or SIGINT; ``announce(url)`` once it accepts
    connections. Raise ConfigError for a listen address or TLS files it cannot use."""
    gw = gateway(options)
    gw.store.records()  # a token store we cannot trust stops us before we listen
    caps = caps_for(raise_descriptor_limit())
    _for_the_log()(
        "web.caps",
        connections=caps.connections,
        streams=caps.streams,
        streams_per_token=caps.streams_per_token,
        head_timeout=options.deadlines.head,
        body_timeout=options.deadlines.body,
        write_timeout=options.deadlines.write,
    )
    gw.streams = StreamSlots(caps)
    config = make_config(make_app(gw), options, caps)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # uvicorn's own lines (process started, shutting down) repeat the web.* events
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    sock = bind(options.host, options.port)
    port = sock.getsockname()[1]

    async def main() -> None:
        gw.closing = asyncio.Event()

        # open streams see it at once (an agent's) or within a second (the overview's)
        server = GatewayServer(config, gw.closing.set)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        ready = asyncio.create_task(server.ready.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if server.started:
            # a person on a terminal reads the line announce() prints
            _for_the_log()("web.listening", url=url(options, port), remotes=list(options.remotes))
            announce(url(options, port))
            sd_notify("READY=1")
        await task

    try:
        with asyncio.Runner(loop_factory=loop_class(options.deadlines)) as runner:
            runner.run(main())
    finally:
        sock.close()
    sys.stdout.flush()


def loopback_or_tls(options: Options) -> str | None:
    """Why a listen address is refused without ``--insecure-listen`` (None: fine)."""
    if access.is_loopback(options.host) or options.tls_cert is not None:
        return None
    return (
        f"{options.host} is not a loopback address and there is no TLS: tokens and "
        "sessions would cross the network in clear text. Give --tls-cert and --tls-key, "
        "or --insecure-listen if something else encrypts the traffic (a VPN, an SSH "
        "tunnel, a TLS proxy in front)"
    )
