"""Helpers shared by the scenarios (names, waiting, payloads)."""
from __future__ import annotations

import asyncio
import os
import time

HOST = "127.0.0.1"
BROKER_3 = 5552  # rabbitmq-server 3.10.8
BROKER_4 = 5553  # rabbitmq-server 4.0.5
USER = "guest"
PASSWORD = "guest"
WRONG_PASSWORD = "wrong-secret-pw"  # recognisable, so redaction tests can look for it


def stream_name(tag: str) -> str:
    """Fixed name plus a unique suffix (the run's pid and time), deleted at the end."""
    return "sd-%s-%x%x" % (tag, os.getpid(), int(time.time()) & 0xFFFF)


def body(i: int, size: int = 64) -> bytes:
    """A fixed-size, recognisable message body."""
    b = b"streamdissect-msg-%05d-" % i
    return (b + b"x" * size)[:size]


async def wait_for(pred, timeout: float = 10.0, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met within %ss" % timeout)
        await asyncio.sleep(step)


def sockname_port(writer_or_transport) -> int:
    return writer_or_transport.get_extra_info("sockname")[1]


def rstream_port(client) -> int:
    """Local port of an rstream low-level Client."""
    return sockname_port(client._conn._writer)
