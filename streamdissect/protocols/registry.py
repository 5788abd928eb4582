"""The protocols streamdissect dissects: one line each in PROTOCOLS (the first is the default:
what a bare port list, `--port N`, and the frames table name).

    from streamdissect.protocols.registry import PROTOCOLS, protocol
    protocol("stream").ports          # (5552,)

The pipeline below the faces finds every protocol here, never by importing its package.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping

from streamdissect.protocols.base import Protocol
from streamdissect.protocols.rocketmq.protocol import ROCKETMQ
from streamdissect.protocols.stream.protocol import STREAM

PROTOCOLS: tuple[Protocol, ...] = (
    STREAM,
    ROCKETMQ,
)  # fmt: skip

BY_NAME = {p.name: p for p in PROTOCOLS}


def protocol(name: str | None = None) -> Protocol:
    """The protocol of that name (None: the default, the first registered)."""
    if name is None:
        return PROTOCOLS[0]
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r} (known: {', '.join(BY_NAME)})") from None


def chosen(names: Iterable[str] | None = None) -> tuple[Protocol, ...]:
    """The protocols of these names, in registry order (None: every one)."""
    if names is None:
        return PROTOCOLS
    wanted = {protocol(name).name for name in names}
    return tuple(p for p in PROTOCOLS if p.name in wanted)


def server_ports(protocols: tuple[Protocol, ...],
                 ports: Iterable[int] | Mapping[str, Iterable[int]] | None = None,
                 ) -> dict[int, Protocol]:  # fmt: skip
    """Server port -> the protocol a connection to it carries. `ports`: None, each protocol's
    default ports; port numbers, the first protocol's ports instead of its defaults (what
    `--port N` always meant: the Stream's), the others keeping theirs; a mapping from
    protocol name to ports, exactly those."""
    if isinstance(ports, Mapping):
        named = {protocol(name).name: tuple(numbers) for name, numbers in ports.items()}
        return {port: p for p in protocols for port in named.get(p.name, ())}
    by_port = {port: p for p in reversed(protocols) for port in p.ports}
    if ports is not None and protocols:
        first = protocols[0]
        by_port = {port: p for port, p in by_port.items() if p is not first}
        by_port.update(dict.fromkeys(ports, first))
    return by_port


def named_ports(named: Mapping[str, Iterable[int]], heuristic: bool = True,
                ) -> dict[str, tuple[int, ...]]:  # fmt: skip
    """Each protocol's server ports as a user names them (the command line's --port and
    --NAME-port, the Spark job's --port): the first protocol's named ports instead of its
    defaults, another's besides its defaults; a port named for one protocol is no other's
    default (--port 9876: a Stream server there). Without the heuristic ("only the given
    ports"), once a port is named only the protocols whose ports were named are dissected,
    files as a live capture (whose filter keeps these ports); none named, every
    protocol's defaults. (server_ports takes the map.)"""
    first, *others = PROTOCOLS
    asked = {p.name: tuple(named.get(p.name, ())) for p in PROTOCOLS}
    ports = {first.name: asked[first.name] or first.ports}
    ports.update((o.name, (*o.ports, *asked[o.name])) for o in others)
    if not heuristic and any(asked.values()):
        ports = {name: each for name, each in ports.items() if asked[name]}
    owner = {port: name for name, each in asked.items() for port in each}
    return {name: tuple(p for p in each if owner.get(p, name) == name)
            for name, each in ports.items()}  # fmt: skip


class PortError(argparse.ArgumentTypeError, ValueError):
    """Not a TCP port: a ValueError, and as an argparse type's error, a usage error that
    says why (argparse shows an ArgumentTypeError's text, a plain ValueError's not)."""


def tcp_port(text: str | int) -> int:
    """A server port as a user names it, 1-65535 (an option's argparse type in every face;
    a port outside would be a filter that matches nothing)."""
    try:
        port = int(text)
    except ValueError:
        raise PortError(f"not a port number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise PortError(f"a TCP port is 1-65535, not {port}")
    return port


def check(protocols: tuple[Protocol, ...]) -> None:
    """Names and table names are unique (a table is found by its name alone). Run by
    tables.schema once it reads every protocol's tables, not at import: reading them all
    imports every protocol's tables module, which a run of one protocol never needs."""
    names: set[str] = set()
    tables: dict[str, str] = {"anomalies": "every protocol", "messages": "every protocol"}
    for p in protocols:
        if p.name in names:
            raise ValueError(f"two protocols named {p.name!r}")
        names.add(p.name)
        for table in p.tables:
            if table in tables:
                raise ValueError(f"table {table!r} of {p.name} and of {tables[table]}")
            tables[table] = p.name

