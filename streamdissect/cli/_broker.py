"""What `probe` and `compare` share: the broker options, making the connector, and how a
failure is told (one line on stderr naming the step, no traceback, an exit status)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys

# exit statuses: 0 done; 1 compare found protocol differences; 2 usage (bad URI, option,
# capture); 3 the broker could not be probed (the message names the failing step); 130
# interrupted (Ctrl-C or SIGTERM; a temporary stream is deleted first)
USAGE, FAILED, INTERRUPTED = 2, 3, 130


def positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def add_broker_options(p: argparse.ArgumentParser, uri_required: bool = False) -> None:
    """The URI (a required one after another positional: argparse cannot place an optional
    positional given after options, as in `compare CAPTURE --allow-writes URI`)."""
    what = "rabbitmq-stream://user:pass@host:port/vhost (or rabbitmq-stream+tls://)"
    p.add_argument(
        "uri",
        nargs=None if uri_required else "?",
        metavar="URI",
        help=f"{what}. The password is never printed"
        + ("" if uri_required else "; default: $RABBITMQ_STREAM_URI"),
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="also publish and consume on a temporary stream "
        "'streamdissect-probe-<random>', deleted at the end (even on Ctrl-C); "
        "without it nothing is created, deleted, published or stored",
    )
    p.add_argument(
        "--timeout",
        type=positive,
        default=5.0,
        metavar="S",
        help="seconds each step may take (connect, TLS, each command; default 5)",
    )
    p.add_argument(
        "--frame-max",
        type=int,
        default=1_048_576,
        metavar="BYTES",
        help="largest frame accepted, and offered in Tune (default 1048576; 0: take the broker's)",
    )
    p.add_argument(
        "--heartbeat",
        type=int,
        default=60,
        metavar="S",
        help="heartbeat interval accepted at most, in Tune (default 60; 0: the broker's)",
    )
    tls = p.add_argument_group("TLS (rabbitmq-stream+tls://)")
    tls.add_argument(
        "--cafile", metavar="PEM", help="trust these CA certificates instead of the system's"
    )
    tls.add_argument(
        "--cert", metavar="PEM", help="client certificate: authenticate with SASL EXTERNAL"
    )
    tls.add_argument("--key", metavar="PEM", help="the client certificate's private key")
    tls.add_argument(
        "--no-verify",
        action="store_true",
        help="do not verify the server's certificate (verified by default)",
    )


def connector(args):
    """The Connector the options describe; ProbeError (step "uri") when they do not."""
    from streamdissect.probe.session import Connector, Limits
    from streamdissect.probe.uri import target_from
    from streamdissect.probe.wire import TlsOptions

    target = target_from(args.uri)
    tls = TlsOptions(cafile=args.cafile, certfile=args.cert, keyfile=args.key,
                     verify=not args.no_verify)  # fmt: skip
    from streamdissect.probe.errors import ProbeError

    if args.frame_max < 0 or args.heartbeat < 0:
        raise ProbeError("options", "--frame-max and --heartbeat cannot be negative", "usage")
    if not target.tls and (args.cafile or args.cert or args.key or args.no_verify):
        print("streamdissect: note: --cafile, --cert, --key and --no-verify are for "
              "rabbitmq-stream+tls:// URIs; ignored", file=sys.stderr)  # fmt: skip
    if args.key and not args.cert:
        raise ProbeError("options", "--key is the key of a --cert", "usage")
    limits = Limits(frame_max=args.frame_max, heartbeat=args.heartbeat, timeout=args.timeout)
    return Connector(target, limits, tls if target.tls else None)


def fail(command: str, exc, target=None) -> int:
    """One line on stderr; the exit status for the error's kind."""
    where = f" [{target.display}]" if target is not None else ""
    print(f"streamdissect {command}: error: {exc}{where}", file=sys.stderr)
    return USAGE if exc.kind == "usage" else FAILED


def status(command: str):
    return lambda message: print(f"streamdissect {command}: {message}", file=sys.stderr)


@contextlib.contextmanager
def interrupt_on_sigterm():
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that cleanups run."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
