"""Frames larger than a TCP segment, from a capture recorded here against the real broker:
Publish frames reassembled whole, big Deliver frames counted without being kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from streamdissect.dissect import Dissector, FrameEvent

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


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    # -B: a big kernel buffer, so tcpdump itself does not drop the bursts
    dump = subprocess.Popen(
        ["tcpdump", "-i", "lo", "-B", "65536", "-U", "-w", str(path), "tcp port 5552"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        subprocess.run([sys.executable, "-c", CLIENT], check=True, timeout=60)
        time.sleep(0.5)
    finally:
        dump.terminate()
        dump.wait(10)
    return path


def run(path: Path, **options) -> list:
    events = list(Dissector(**options).run(str(path)))
    assert not [e for e in events if not isinstance(e, FrameEvent) and e.kind == "gap"]
    return [e for e in events if isinstance(e, FrameEvent)]


def test_publish_spanning_segments_is_whole(big_capture):
    frames = run(big_capture)
    # ours only: other clients may use the broker while we record
    publishes = [
        e.record for e in frames if e.record.command == "Publish" and e.record.size > MESSAGE_SIZE
    ]
    assert sum(r.record_count for r in publishes) == MESSAGES
    assert max(r.size for r in publishes) > 65536  # more than one loopback segment
    assert all(not r.truncated for r in publishes)


def test_big_deliver_is_counted_not_kept(big_capture):
    delivers = [e.record for e in run(big_capture) if e.record.command == "Deliver"]
    assert sum(r.record_count for r in delivers) >= MESSAGES
    big = [r for r in delivers if r.size > 64 * 1024]
    assert big and all(not r.truncated and r.chunk_payload is None for r in big)
    kept = [
        e.record for e in run(big_capture, deliver_keep_limit=None) if e.record.command == "Deliver"
    ]
    assert [r.record_count for r in kept] == [r.record_count for r in delivers]
    assert all(r.crc_ok for r in kept)
