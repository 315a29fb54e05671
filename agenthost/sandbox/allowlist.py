"""The hosts a sandboxed agent may reach through the proxy (``sandbox.allow_hosts``).

Sans-IO: strings in, decisions out. An entry is one of:

- ``host`` (``api.anthropic.com``): that name, on ports 80 and 443 only;
- ``host:PORT`` (``localhost:8080``): that name on that port only;
- ``host:*``: that name on any port;
- ``*.domain`` (``*.githubusercontent.com``, with an optional port as above): every
  name under the domain, at any depth, but not the bare domain itself (list it too);
- an IPv4 or IPv6 literal (``10.0.0.7:8443``, ``[::1]:8080``, or a bare ``::1``):
  that address only, never a name that resolves to it, nor an IPv4-mapped or other
  spelling of it in IPv6.

Names are compared as the resolver would see them: case-insensitively, without a
trailing dot, and non-ASCII names in their IDNA (punycode) form, UTS 46 mapped as
browsers and curl map them; so a confusable letter of another script is another name.
A name has labels of letters, digits, hyphens and underscores (at most 63 bytes each,
253 in all), and its last label starts with a letter: ``127.1`` or ``0x7f000001``
would be read as addresses by the resolver, so they are not names.

Refused as entries, with :class:`~agenthost.errors.InvalidAllowEntry`: an empty entry,
``*`` (everything: that is the profile ``net``), a wildcard over a single label
(``*.com``, ``*.localhost``: a whole top-level domain; public suffixes of two labels
such as ``*.co.uk`` cannot be told apart without a list of them and are accepted),
a wildcard anywhere but as the whole first label, URLs, paths, user names
(``allowed.com@evil.com``), port 0 or over 65535, IPv6 zone ids.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from agenthost.errors import InvalidAllowEntry

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Ports = frozenset[int] | None
"""The ports an entry allows; None: any port."""

DEFAULT_PORTS: Final = frozenset({80, 443})
"""The ports of an entry written without one: HTTP and HTTPS."""
MAX_NAME: Final = 253
MAX_LABEL: Final = 63
MAX_INPUT: Final = 1024
"""Longer text is refused before any normalisation (it bounds the work a hostile
entry or request can cause; no valid host comes near it)."""

_K = TypeVar("_K")

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?")
_PORT = re.compile(r"[0-9]{1,5}")


class _Bad(Exception):
    """Why a host or an entry is not valid (turned into the caller's error)."""


def _name(text: str) -> str:
    """The canonical form of a host name (lower case, no trailing dot, punycode)."""
    name = text[:-1] if text.endswith(".") else text
    if not name.isascii():
        name = _idna(name)
    name = name.lower()
    if len(name) > MAX_NAME:
        raise _Bad(f"longer than {MAX_NAME} characters")
    labels = name.split(".")
    for label in labels:
        if not label:
            raise _Bad("an empty label")
        if len(label) > MAX_LABEL:
            raise _Bad(f"a label longer than {MAX_LABEL} characters")
        if not _LABEL.fullmatch(label):
            raise _Bad(f"{label[:40]!r} is not a label of letters, digits, '-' and '_'")
    if not ("a" <= labels[-1][0] <= "z"):
        raise _Bad("its last label does not start with a letter (a resolver reads it as a number)")
    return name


def _idna(name: str) -> str:
    # Imported here: only a non-ASCII entry needs it, and it loads sizeable tables.
    import idna

    try:
        return idna.encode(name, uts46=True, transitional=False).decode("ascii")
    except idna.IDNAError as exc:
        raise _Bad(f"not a valid internationalised name ({exc})") from exc


def _address(text: str) -> IPAddress | None:
    """``text`` as an IP address, or None when it is not one."""
    if ":" in text:
        if "%" in text:
            raise _Bad("an IPv6 zone id")
        try:
            return ipaddress.IPv6Address(text)
        except ValueError as exc:
            raise _Bad("not an IPv6 address") from exc
    try:
        return ipaddress.IPv4Address(text)
    except ValueError:
        return None


def _host(text: str) -> str | IPAddress:
    """A host of an entry or a request: an address, or a canonical name."""
    if not text:
        raise _Bad("no host")
    if len(text) > MAX_INPUT:
        raise _Bad(f"longer than {MAX_INPUT} characters")
    address = _address(text)
    return address if address is not None else _name(text)


def canonical_host(host: str) -> str | None:
    """The form of ``host`` (a name or an address, IPv6 without brackets) that the
    allow list decides on and that a connection should be made to (lower case, no
    trailing dot, punycode; addresses as Python writes them), or None when it is not a
    valid host."""
    try:
        found = _host(host)
    except _Bad:
        return None
    return str(found)


def split_authority(authority: str, default_port: int | None = None) -> tuple[str, int] | None:
    """``host:port`` (``[v6]:port`` for IPv6) as its host text and port; the port may be
    left out only when a ``default_port`` is given. None when it is not of that shape
    (a bare IPv6 address needs brackets here: its last group would read as a port)."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return None
        host, rest = authority[1:end], authority[end + 1 :]
        if ":" not in host:
            return None
        if not rest:
            return (host, default_port) if default_port is not None else None
        if not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        host, sep, port_text = authority.rpartition(":")
        if not sep:
            return (authority, default_port) if default_port is not None else None
        if ":" in host:
            return None
    if not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
        return None
    return host, int(port_text)


@dataclass(frozen=True)
class AllowList:
    """The hosts and ports a sandbox may connect to; build it with :meth:`parse`."""

    names: dict[str, Ports] = field(default_factory=dict)
    """Exact names (canonical) and their ports."""
    domains: dict[str, Ports] = field(default_factory=dict)
    """Domains of ``*.domain`` entries: any name under them (not the domain itself)."""
    addresses: dict[IPAddress, Ports] = field(default_factory=dict)
    """IP literals and their ports."""
    entries: tuple[str, ...] = ()
    """The entries in canonical form, in the order given (for messages and status)."""

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        """The allow list of ``entries`` (see the module's documentation for their
        forms). An entry without a port allows ports 80 and 443 only; ``host:*`` allows
        every port. Several entries for one host add up their ports.

        Raises :class:`~agenthost.errors.InvalidAllowEntry` naming the first entry that
        is not valid and why.
        """
        allow = cls()
        canonical: list[str] = []
        for entry in entries:
            try:
                canonical.append(allow._add(entry))
            except _Bad as exc:
                shown = entry if len(entry) <= 80 else entry[:77] + "..."
                raise InvalidAllowEntry(
                    f"sandbox.allow_hosts: {shown!r} is not a host to allow: {exc}",
                    hint="write a host name, *.domain or an IP address, optionally "
                    "followed by :PORT or :* (e.g. 'pypi.org', '*.npmjs.org', "
                    "'localhost:8080', '[::1]:*')",
                ) from None
        return cls(allow.names, allow.domains, allow.addresses, tuple(canonical))

    def _add(self, entry: str) -> str:
        text = entry.strip()
        if not text:
            raise _Bad("it is empty")
        if len(text) > MAX_INPUT:
            raise _Bad(f"longer than {MAX_INPUT} characters")
        if "://" in text or "/" in text:
            raise _Bad("a host, not a URL or a path, is expected")
        if "@" in text:
            raise _Bad("a user name ('@') has no place in it")
        host_text, ports = _split_entry(text)
        if host_text == "*":
            raise _Bad("'*' would allow every host: use the network profile 'net' for that")
        if host_text.startswith("*."):
            domain = _host(host_text[2:])
            if not isinstance(domain, str):
                raise _Bad("a wildcard applies to names, not to addresses")
            if "." not in domain:
                raise _Bad(f"'*.{domain}' would allow a whole top-level domain")
            _merge(self.domains, domain, ports)
            return f"*.{domain}{_port_suffix(ports)}"
        if "*" in host_text:
            raise _Bad("a wildcard may only be the whole first label ('*.example.com')")
        host = _host(host_text)
        if isinstance(host, str):
            _merge(self.names, host, ports)
            return f"{host}{_port_suffix(ports)}"
        _merge(self.addresses, host, ports)
        shown = f"[{host}]" if host.version == 6 else str(host)
        return f"{shown}{_port_suffix(ports)}"

    @property
    def reaches_loopback(self) -> bool:
        """Whether it allows a loopback host (``localhost``, 127.0.0.0/8, ``::1``) on
        some port: a local model server, say."""
        return "localhost" in self.names or any(a.is_loopback for a in self.addresses)

    def allows(self, host: str, port: int) -> bool:
        """Whether a connection to ``host`` (a name or an IP address, IPv6 without
        brackets, as a request names it) on ``port`` is allowed. A host that is not
        valid is never allowed; a name is never allowed by its addresses' entries,
        nor an address by a name's."""
        if not 0 < port < 65536:
            return False
        try:
            found = _host(host)
        except _Bad:
            return False
        if not isinstance(found, str):
            return _has(self.addresses.get(found, frozenset()), port)
        if found in self.names and _has(self.names[found], port):
            return True
        # Every proper parent domain: a.b.example.com -> b.example.com, example.com, com
        rest = found
        while "." in rest:
            rest = rest.split(".", 1)[1]
            if rest in self.domains and _has(self.domains[rest], port):
                return True
        return False


def _split_entry(text: str) -> tuple[str, Ports]:
    """An entry's host text and the ports it allows."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise _Bad("an unclosed '['")
        host, rest = text[1:end], text[end + 1 :]
        if ":" not in host:
            raise _Bad("only IPv6 addresses are written in brackets")
        if not rest:
            return host, DEFAULT_PORTS
        if not rest.startswith(":"):
            raise _Bad(f"{rest[:20]!r} after the address")
        return host, _ports(rest[1:])
    if text.count(":") > 1:  # a bare IPv6 address: no port (write [addr]:port for one)
        return text, DEFAULT_PORTS
    host, sep, port_text = text.partition(":")
    return host, (_ports(port_text) if sep else DEFAULT_PORTS)


def _ports(text: str) -> Ports:
    if text == "*":
        return None
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise _Bad(f"{text[:20]!r} is not a port (1 to 65535, or * for any)")
    return frozenset({int(text)})


def _merge(table: dict[_K, Ports], key: _K, ports: Ports) -> None:
    if key in table:
        old = table[key]
        ports = None if old is None or ports is None else old | ports
    table[key] = ports


def _has(ports: Ports, port: int) -> bool:
    return ports is None or port in ports


def _port_suffix(ports: Ports) -> str:
    if ports is None:
        return ":*"
    if ports == DEFAULT_PORTS:
        return ""
    return ":" + ",".join(str(p) for p in sorted(ports))
