"""A probe failure: which step failed, what kind of failure, and a message for people."""

from __future__ import annotations

# kinds: connection (connect failed), timeout, tls, certificate, auth, refused (the broker
# closed the connection on a command it does not know), closed (the broker closed it
# otherwise), protocol (bytes that are not the protocol), usage (a bad URI or option)
KINDS = ("connection", "timeout", "tls", "certificate", "auth", "refused", "closed", "protocol",
         "usage")  # fmt: skip


class ProbeError(Exception):
    """`step: message`. Messages never hold a password: they are built from the target's
    display form (uri.Target.display) and from what the broker said."""

    def __init__(self, step: str, message: str, kind: str = "protocol",
                 closing_code: int | None = None) -> None:  # fmt: skip
        super().__init__(f"{step}: {message}")
        self.step, self.message, self.kind = step, message, kind
        self.closing_code = closing_code  # the broker's Close code, when it sent one
