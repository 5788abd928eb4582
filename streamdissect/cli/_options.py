"""Options that more than one subcommand takes, defined once."""

from __future__ import annotations

import argparse

from streamdissect.protocols import registry
from streamdissect.protocols.registry import tcp_port


def add_port_options(p: argparse.ArgumentParser) -> None:
    """--port (the Stream's server ports, instead of its default) and, for each other
    protocol in the registry, --NAME-port (one more server port of it)."""
    first, *others = registry.PROTOCOLS
    p.add_argument("--port", type=tcp_port, action="append", dest="ports", metavar="N",
                   help=f"a server port of {first.title} (repeatable; default "
                        f"{', '.join(map(str, first.ports))})")  # fmt: skip
    for other in others:
        p.add_argument(f"--{other.name}-port", type=tcp_port, action="append", default=[],
                       dest=f"{other.name}_ports", metavar="N",
                       help=f"one more server port of {other.title} (repeatable; besides "
                            f"{', '.join(map(str, other.ports))})")  # fmt: skip


def port_map(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """Each protocol's server ports, as the port options say (registry.named_ports)."""
    first, *others = registry.PROTOCOLS
    named = {first.name: args.ports or ()}
    named.update((o.name, getattr(args, f"{o.name}_ports", ())) for o in others)
    return registry.named_ports(named, heuristic=not getattr(args, "no_heuristic", False))


def capture_ports(args: argparse.Namespace) -> tuple[int, ...]:
    """The server ports a live capture keeps without the heuristic: the ports dissected
    (port_map), so a live capture and a file of it show the same connections."""
    return tuple(sorted({port for each in port_map(args).values() for port in each}))


def add_analysis_options(p: argparse.ArgumentParser, times: str) -> None:
    """Which traffic is read (--port..., --no-heuristic, --max-frame), how times are shown
    (--utc, --local: `times` says what, e.g. 'text: capture times') and --at-once-ms."""
    add_port_options(p)
    p.add_argument("--no-heuristic", action="store_true",
                   help="only the given ports, no recognition of the protocol on other ports")
    p.add_argument("--max-frame", type=int, default=None,
                   help="largest frame accepted (default: negotiated frame max, else 8 MiB)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--utc", dest="local", action="store_false", default=False,
                      help=f"{times} in UTC (the default)")
    when.add_argument("--local", dest="local", action="store_true",
                      help=f"{times} in this machine's time zone")
    p.add_argument("--at-once-ms", type=float, default=50.0,
                   help="a Deliver this soon after a Credit shows the broker had more data")
