"""Fixtures more than one test module uses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

MESSAGES, MESSAGE_SIZE = 24, 100_000
CLIENT = textwrap.dedent(f"""
    import asyncio, uuid
    from rstream import Producer, Consumer, ConsumerOffsetSpecification, OffsetType

    async def main():
        stream = "sd-big-" + uuid.uuid4().hex[:8]
        async with Producer("127.0.0.1", 5552, username="guest", password="guest") as p:
            await p.create_stream(stream)
            for _ in range({MESSAGES} // 4):  # Publish frames of 400 kB: below frame_max
                await p.send_batch(stream, [b"m" * {MESSAGE_SIZE}] * 4)
        got = 0
        done = asyncio.Event()
        async def on_message(msg, ctx):
            nonlocal got
            got += 1
            if got == {MESSAGES}:
                done.set()
        async with Consumer("127.0.0.1", 5552, username="guest", password="guest") as c:
            await c.start()
            await c.subscribe(stream, on_message,
                              offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST))
            await asyncio.wait_for(done.wait(), 20)
            await c.delete_stream(stream)
    asyncio.run(main())
""")


def record_on_lo(path: Path, client: str, *args: str, port: int = 5552,
                 timeout: int = 60) -> str:  # fmt: skip
    """Run a client script (python -c) while tcpdump records lo (`tcp port PORT`) into
    `path`; the client's standard output. -B: a big kernel buffer, so tcpdump itself does
    not drop the bursts."""
    dump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-B", "65536", "-U", "-w", str(path), f"tcp port {port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        done = subprocess.run([sys.executable, "-c", client, *args], check=True,
                              timeout=timeout, capture_output=True, text=True)  # fmt: skip
        time.sleep(0.5)
    finally:
        dump.terminate()
        dump.wait(10)
    return done.stdout


@pytest.fixture(scope="session")
def big_capture(tmp_path_factory) -> Path:
    """Frames larger than a TCP segment, recorded here against the real 3.10 broker:
    Publish frames of 400 kB, Deliver chunks above 64 KiB."""
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    record_on_lo(path, CLIENT)
    return path
