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


class Confirms:
    """rstream on_publish_confirm callback that counts confirmations and errors by code."""

    def __init__(self):
        self.confirmed = 0
        self.errored: dict = {}

    def __call__(self, status) -> None:
        if status.is_confirmed:
            self.confirmed += 1
        else:
            code = "0x%02x" % status.response_code
            self.errored[code] = self.errored.get(code, 0) + 1

    async def wait(self, n: int) -> None:
        await wait_for(lambda: self.confirmed + sum(self.errored.values()) >= n)

    def record(self, rec, published: int, port=None) -> None:
        rec.count(port, published=published, confirmed=self.confirmed, errored=dict(self.errored))


def sockname_port(writer_or_transport) -> int:
    return writer_or_transport.get_extra_info("sockname")[1]


def rstream_port(client) -> int:
    """Local port of an rstream low-level Client."""
    return sockname_port(client._conn._writer)


async def prefill(rec, port: int, stream: str, n: int, per_batch: int, *, size: int = 64,
                  connection_name: str = "sd-prefill") -> None:
    """Create ``stream`` and publish ``n`` messages with an rstream Producer in confirmed
    batches of ``per_batch``; records published/confirmed/errored for that connection."""
    from rstream import AMQPMessage, Producer

    confirms = Confirms()
    async with Producer(HOST, port, username=USER, password=PASSWORD,
                        connection_name=connection_name) as producer:
        await producer.create_stream(stream)
        for start in range(0, n, per_batch):
            batch = [AMQPMessage(body=body(i, size)) for i in range(start, min(n, start + per_batch))]
            await producer.send_batch(stream, batch, on_publish_confirm=confirms)
        await confirms.wait(n)
    confirms.record(rec, n)
