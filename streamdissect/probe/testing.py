"""A misbehaving broker for tests: asyncio on 127.0.0.1, a broker as far as the handshake
goes, until the chosen request, where it misbehaves the chosen way.

    with MisbehavingBroker("slow", at="Open", delay=3) as broker:
        ...  # rabbitmq-stream://guest:guest@127.0.0.1:{broker.port}/

Its answers are made with the codec, like the probe's requests; only the misbehaviours are
raw bytes (they are meant not to be the protocol).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Self

from streamdissect.protocols.stream import decode_frame, encode_record, make_record

# the request at which it misbehaves; "Tune" answers SaslAuthenticate and then misbehaves
# instead of sending its Tune
STEPS = ("PeerProperties", "SaslHandshake", "SaslAuthenticate", "Tune", "Open")
MODES = ("close", "slow", "garbage", "oversized", "silent", "http")
GARBAGE = (8).to_bytes(4, "big") + b"\x7f\x7f\x00\x01" + b"\xde\xad\xbe\xef"  # key 0x7f7f
OVERSIZED = (0x7FFFFFFF).to_bytes(4, "big") + b"\x00\x11\x00\x01" + b"\0" * 64
HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"  # a port that is not Stream
MAX_REQUEST = 1 << 20


def _answers(record) -> list:
    """What a broker sends back to a client's request (the handshake and Close)."""
    corr = getattr(record, "correlation_id", None)
    command = record.command
    if command == "PeerProperties":
        props = {"product": "streamdissect misbehaving broker", "version": "0"}
        return [make_record(command, response=True, correlation_id=corr, properties=props)]
    if command == "SaslHandshake":
        return [make_record(command, response=True, correlation_id=corr, mechanisms=["PLAIN"])]
    if command == "SaslAuthenticate":
        return [
            make_record(command, response=True, correlation_id=corr),
            make_record("Tune", frame_max=1_048_576, heartbeat=60),
        ]
    if command in ("Open", "Close"):
        return [make_record(command, response=True, correlation_id=corr)]
    return []


class MisbehavingBroker:
    def __init__(self, mode: str, at: str = "PeerProperties", delay: float = 3.0) -> None:
        if mode not in MODES or at not in STEPS:
            raise ValueError(f"mode one of {MODES}, at one of {STEPS}")
        self.mode, self.at, self.delay = mode, at, delay
        self.port = 0
        self.connections = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the misbehaving broker did not start")
        return self

    def __exit__(self, *exc_info) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readexactly(4)
                size = int.from_bytes(head, "big")
                if size > MAX_REQUEST:
                    return
                record = decode_frame(head + await reader.readexactly(size))
                answers = _answers(record)
                misbehave = record.command == self.at or (
                    self.at == "Tune" and record.command == "SaslAuthenticate"
                )
                if misbehave and self.at == "Tune":  # authenticated; the Tune misbehaves
                    writer.write(encode_record(answers[0]))
                    answers = answers[1:]
                if misbehave:
                    await self._misbehave(reader, writer, answers)
                    return
                for answer in answers:
                    writer.write(encode_record(answer))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # (the client went, or the broker is stopping: a sleeping task is cancelled)
        finally:
            writer.close()

    async def _misbehave(self, reader, writer, answers: list) -> None:
        if self.mode == "close":
            return
        if self.mode == "slow":
            await asyncio.sleep(self.delay)
            for answer in answers:
                writer.write(encode_record(answer))
        elif self.mode in ("garbage", "oversized", "http"):
            writer.write({"garbage": GARBAGE, "oversized": OVERSIZED, "http": HTTP}[self.mode])
        await writer.drain()
        while await reader.read(65536):  # then hold the connection until the client goes
            pass
