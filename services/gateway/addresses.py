"""The client's address of a request, behind the proxies the operator trusts.

`FOOTFALL_TRUSTED_PROXIES` lists addresses and networks (`10.0.0.0/8, 127.0.0.1, fd00::/8`;
default: none). `X-Forwarded-For` is believed only when the direct peer is one of them,
and then only as far as the chain is made of trusted hops: the client is the right-most
address that is not trusted (each proxy appends the address it received the request
from, so everything left of the first untrusted hop may have been written by the client
itself). A chain made only of trusted hops gives its left-most address; an entry that is
not an address (where the walk reaches it) gives no address at all, rather than a
guess. IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`, what dual-stack sockets report) are
compared and returned as IPv4. Ports (`1.2.3.4:5678`, `[2001:db8::1]:443`) are ignored.

Footfall runs uvicorn without its own proxy-header rewriting (`services/cli.py`), so the
peer seen here is the TCP peer and this setting is the only rule.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

__all__ = ["Address", "Network", "client_ip", "parse_address", "parse_networks"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated addresses or CIDR networks; raises `ValueError` naming a bad entry."""
    networks: list[Network] = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ValueError(f"{entry!r} is neither an IP address nor a CIDR network") from None
        if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
            mapped = network.network_address.ipv4_mapped
            if mapped is not None:  # ::ffff:a.b.c.d/n+96 is the IPv4 network a.b.c.d/n
                network = ipaddress.IPv4Network((mapped, network.prefixlen - 96), strict=False)
        networks.append(network)
    return tuple(networks)


def parse_address(text: str) -> Address | None:
    """An address as proxies and servers write it (optionally with a port), or None."""
    text = text.strip()
    if text.startswith("["):  # [v6] or [v6]:port
        end = text.find("]")
        if end == -1 or (end + 1 < len(text) and not text[end + 1 :].startswith(":")):
            return None
        text = text[1:end]
    elif text.count(":") == 1:  # v4:port (a bare IPv6 address has two colons or more)
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        address = address.ipv4_mapped or address
    return address


def _trusted(address: Address, networks: Sequence[Network]) -> bool:
    return any(address in network for network in networks)


def client_ip(peer: str | None, forwarded_for: Iterable[str], trusted: Sequence[Network]) -> str | None:
    """The client's address (canonical text) given the TCP `peer`, the request's
    `X-Forwarded-For` header values (in order) and the trusted networks; None when unknown."""
    address = parse_address(peer) if peer else None
    if address is None:
        return None
    if not trusted or not _trusted(address, trusted):
        return str(address)
    chain = [hop for value in forwarded_for for hop in (part.strip() for part in value.split(",")) if hop]
    for hop in reversed(chain):
        address = parse_address(hop)
        if address is None:
            return None
        if not _trusted(address, trusted):
            return str(address)
    return str(address)  # every hop trusted: the left-most one (or the peer, without a chain)
