"""`rabbitmq-stream://user:pass@host:port/vhost` (or `rabbitmq-stream+tls://`), or the
RABBITMQ_STREAM_URI environment variable, as a Target whose display form has no password."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

from streamdissect.probe.errors import ProbeError

ENV = "RABBITMQ_STREAM_URI"
# scheme -> (TLS, default port): 5552 and 5551 are the broker's stream and stream TLS ports
SCHEMES = {"rabbitmq-stream": (False, 5552), "rabbitmq-stream+tls": (True, 5551)}
DEFAULT_USER = DEFAULT_PASSWORD = "guest"  # (the broker's default user, as clients assume)


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    tls: bool = False
    vhost: str = "/"
    username: str = DEFAULT_USER
    password: str = field(default=DEFAULT_PASSWORD, repr=False)

    @property
    def display(self) -> str:
        """The URI without its password (what messages and reports show)."""
        scheme = "rabbitmq-stream+tls" if self.tls else "rabbitmq-stream"
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = quote(self.username, safe="")
        return f"{scheme}://{user}@{host}:{self.port}/{quote(self.vhost, safe='')}"


def _error(message: str) -> ProbeError:
    return ProbeError("uri", message, "usage")


def parse_uri(text: str) -> Target:
    """The URI's parts; ProbeError (step "uri") when it is not a stream URI. Errors never
    repeat the text given (it may hold a password)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        raise _error("not a valid URI (host or port)") from None
    if parts.scheme not in SCHEMES:
        raise _error(f"the scheme must be one of {', '.join(SCHEMES)}")
    if not parts.hostname:
        raise _error("the URI names no host")
    tls, default_port = SCHEMES[parts.scheme]
    path = parts.path.removeprefix("/")
    return Target(
        host=parts.hostname,
        port=default_port if port is None else port,
        tls=tls,
        vhost=unquote(path) if path else "/",
        username=DEFAULT_USER if parts.username is None else unquote(parts.username),
        # (a user without a password has an empty one; no user at all is guest:guest)
        password=DEFAULT_PASSWORD if parts.username is None else unquote(parts.password or ""),
    )


def target_from(uri: str | None, environ: Mapping[str, str] = os.environ) -> Target:
    """The URI given, else $RABBITMQ_STREAM_URI."""
    text = uri if uri else environ.get(ENV)
    if not text:
        raise _error(f"no broker: give a URI or set {ENV}")
    return parse_uri(text)
