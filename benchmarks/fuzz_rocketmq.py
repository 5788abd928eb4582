#!/usr/bin/env python3
"""Fuzz campaign for the RocketMQ codec, its framer and the pipeline with RocketMQ
registered; benchmarks/fuzz.py's machinery (mutators, bounds, findings) with RocketMQ's
targets of the same names:

    python benchmarks/fuzz_rocketmq.py --minutes 5
    python benchmarks/fuzz_rocketmq.py --frames 100000 --streams 2000 --pcaps 300

- frame:  one mutated frame -> decode_frame (whole, and cut as snaplen leaves it), then what
          a user can ask of the record: to_dict, the text line and jsonl object (JSON),
          message ids, inflating each message (ValueError at most), re-encoding (a record
          that encodes must decode to the same record); its light record for the analyses
          (protocols/rocketmq/hot.py), when one is made, holds what the record holds, and
          the compiled reader's (rocketmq/_native.c, when built) is hot_record's or none.
- stream: a direction's byte stream of mutated frames -> RocketMQFramer, whole and in random
          splits (the same frames and anomalies), and with missing bytes (bounded buffer).
- pcap:   a mutated capture of captures/rocketmq -> the Dissector with RocketMQ registered
          beside the Stream (the bulk engine's events, the compiled walk's when built,
          held equal to the reference engine's), every event's line and object, and RocketMQ's analyses: every
          table of theirs made as Arrow of its schema; `analyze`'s tables with the hot
          frames as light records equal to those of every frame a record.

Seeds: every frame of captures/rocketmq and crafted ones (zlib bombs, lying pull and batch
bodies). Mutations: fuzz.py's generic ones plus RocketMQ's fields (the header-length word,
ROCKETMQ ext lengths, stored messages' sizes). Findings are saved under
tests/regressions/rocketmq/: tests/test_rocketmq_fuzz.py replays each through its target's
checks (and runs a short campaign of every target), tests/test_rocketmq_plain_walk.py the
pcap ones once more (the bulk engine's events held equal to the reference engine's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import fuzz
from rocketmq_support import (
    CAPTURES,
    NAMES,
    analysis_tables,
    light_record_holds,
    recorded_frames,
    rocketmq_registered,
)

from streamdissect.analysis.driver import analyze_events
from streamdissect.capture import CaptureError
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.rocketmq import (
    decode_frame,
    encode_command,
    make_command,
    spec,
)
from streamdissect.protocols.rocketmq.framing import RocketMQFramer
from streamdissect.protocols.rocketmq.protocol import ROCKETMQ
from streamdissect.protocols.rocketmq.records import Malformed, RemotingCommand
from streamdissect.protocols.rocketmq.summary import frame_fields, frame_summary

REGRESSIONS = HERE.parent / "tests" / "regressions" / "rocketmq"
MAX_FRAME = 1 << 20  # the framer's cap here (the default is 8 MiB)


# --- seeds --------------------------------------------------------------------------------


def corpus() -> tuple[list[bytes], list[bytes]]:
    """(frames, each direction's byte stream) of every RocketMQ capture."""
    kept = recorded_frames()
    streams: dict[int, list[bytes]] = {}
    for direction, frame in kept:
        streams.setdefault(direction, []).append(frame)
    frames = [f for _, f in kept if len(f) <= 32 * 1024]
    return frames, [b"".join(parts) for parts in streams.values()]


def crafted() -> list[bytes]:
    bomb = zlib.compress(b"\x00" * (spec.MAX_INFLATED + 1), 9)
    return [encode_command(make_command(310, fields={"topic": "T", "sysFlag": 1}, body=bomb)),
            encode_command(make_command(320, fields={"topic": "T"}, body=b"\x00\x00\x00\x18" * 6,
                                        serialize_type=spec.ROCKETMQ)),
            encode_command(make_command(0, response=True, body=b"\x00\x00\x01\x00" * 8, fields={
                "nextBeginOffset": 1, "minOffset": 0, "maxOffset": 1})),
            # a pull request (read light: hot.HotPull) with every field its collectors read
            encode_command(make_command(11, fields={
                "consumerGroup": "G", "topic": "T", "queueId": 1, "queueOffset": 5,
                "maxMsgNums": 32, "sysFlag": 3, "commitOffset": 4,
                "suspendTimeoutMillis": 15000}))]  # fmt: skip


class RocketMQMutator(fuzz.FrameMutator):
    """fuzz.py's frame mutations, and one in three a RocketMQ field."""

    def step(self, buf: bytearray) -> None:
        rng = self.rng
        if len(buf) < 12 or rng.random() < 0.66:
            super().step(buf)
            return
        what = rng.randrange(5)
        header_length = struct.unpack_from(">I", buf, 4)[0] & 0xFFFFFF
        if what == 0:  # the serialization byte and the header length
            fuzz._put(buf, 4, ">B", rng.choice((0, 1, 1, 2, 0x80, 0xFF)))
        elif what == 1:
            fuzz._put(buf, 5, ">I", self.interesting(4, header_length) << 8)
        elif what == 2 and buf[4] == 1:  # ROCKETMQ remark, ext length, a key's or value's
            at = rng.choice((8 + 13, 8 + 17 + 4, rng.randrange(8, 8 + header_length + 1)))
            fuzz._put(buf, at, rng.choice((">H", ">I")), self.interesting(4, header_length))
        elif what == 3:  # a stored message's or batch item's total size, body length
            body = 8 + header_length
            at = rng.choice((body, body + 16, body + 4 * 5 + 8 * 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8))
            fuzz._put(buf, at, ">I", self.interesting(4, len(buf) - at))
        else:  # the JSON header's text: a key or a value changed
            text = bytes(buf[8 : 8 + header_length])
            for old, new in ((b'"code":', b'"code":"'), (b"extFields", b"extField"),
                             (b":0,", b":1e999,"), (b'"', b""), (b"}", b"]"),
                             (b'Offset":"', b'Offset":"-'), (b'Offset":"', b'Offset":"+'),
                             (b'"topic":"', b'"topic":"\\u0054')):  # fmt: skip
                if old in text and rng.random() < 0.4:
                    buf[8 : 8 + header_length] = text.replace(old, new, 1)
                    break


# --- targets ------------------------------------------------------------------------------


VERBOSE_BODY = fuzz.VERBOSE_BODY  # --max-body of the -V rendering and the message rows


def check_verbose(record) -> None:
    """-V (with and without bodies) and the messages' rows and fields, as `frames -V`,
    `--messages`, `-Y` and the messages table make them: no exception, JSON-able, no body
    shown past --max-body (a compressed one inflated within the codec's limit)."""
    ROCKETMQ.frame_view(record, max_body=VERBOSE_BODY)
    ROCKETMQ.frame_view(record, bodies=False)
    reader = ROCKETMQ.message_reader(VERBOSE_BODY)
    event = FrameEvent(0, "127.0.0.1:1-127.0.0.1:10911", "s2c", 0, record)
    for held in reader.messages(event):
        row = reader.row(event, held, 1)
        json.dumps([row, reader.table_row(row), reader.fields(held, None)])
        reader.line(row)
        shown = len(row["body"]) // 2 if row["body_encoding"] == "hex" else len(
            row["body"].encode("utf-8", "surrogatepass"))  # fmt: skip
        if shown > VERBOSE_BODY:
            raise fuzz.Finding(f"a message row shows {shown} bytes of a body, past "
                               f"--max-body {VERBOSE_BODY}")  # fmt: skip


def exercise(record) -> None:
    json.dumps(frame_fields(record, payloads=True))
    frame_summary(record)
    check_verbose(record)
    if not isinstance(record, RemotingCommand):
        return
    record.to_dict(payloads=True)
    for message in record.messages or ():
        try:
            message.inflated()
        except ValueError:
            pass
        message.to_dict()
    try:
        again = encode_command(record)
    except ValueError:
        return  # (what a ROCKETMQ header cannot hold)
    back = decode_frame(again)
    if record.truncated:
        return
    if not isinstance(back, RemotingCommand) or _but_sizes(back) != _but_sizes(record):
        raise fuzz.Finding("a decoded record encodes to bytes that decode to another record")


def _but_sizes(record: RemotingCommand) -> dict:
    """The record but for what depends on the header's written length (a JSON header may be
    written shorter, a ROCKETMQ header without bytes after its ext fields)."""
    out = record.to_dict(True)
    for key in ("size", "header_length", "body_error_offset"):
        out.pop(key, None)
    return out


def run_frame(frame: bytes) -> None:
    record = decode_frame(frame)
    exercise(record)
    light_record_holds(frame)  # (a light record of it holds what this record holds)
    if len(frame) >= 12:
        size = struct.unpack_from(">I", frame)[0]
        cut = len(frame) - 1 - int.from_bytes(hashlib.sha1(frame).digest()[:2], "big") % 8
        if size >= 4 and cut >= 8:
            exercise(decode_frame(frame[:cut], declared_size=size))


def _framer(collect: fuzz._Collect) -> RocketMQFramer:
    """RocketMQ's framer writing into fuzz.py's collector (frames as their jsonl objects)."""
    def emit(offset: int, ts_ns: int, record) -> None:
        collect.events.append(("frame", offset, frame_fields(record)))

    return RocketMQFramer(emit, collect.report, MAX_FRAME)


def run_stream(stream: bytes) -> None:
    """fuzz.py's stream checks with RocketMQ's framer: whole and split feeds give the same
    events; holes neither raise nor grow the buffer."""
    rng = random.Random(hashlib.sha1(stream).digest())
    fuzz.check_splits(stream, rng, _framer)
    fuzz.check_gaps(stream, rng, _framer, MAX_FRAME)


def run_pcap(data: bytes, path: str) -> None:
    with open(path, "wb") as f:
        f.write(data)
    with rocketmq_registered():
        dissector = Dissector(engine="stream", ooo_cap=fuzz.FUZZ_OOO_CAP)
        try:
            events = list(dissector.run(path))
        except CaptureError:
            return
    with rocketmq_registered():  # the bulk engine's events are the reference's
        bulk = Dissector(engine="bulk", ooo_cap=fuzz.FUZZ_OOO_CAP)
        if _event_list(bulk.run(path)) != _event_list(events):
            raise AssertionError("the bulk engine's events differ from the reference engine's")
    for event in events:
        if isinstance(event, FrameEvent) and isinstance(event.record, (RemotingCommand,
                                                                        Malformed)):
            json.dumps(frame_fields(event.record))
            frame_summary(event.record)
    result = analyze_events(iter(events), tcp_connections_after=lambda: list(dissector.connections),
                            protocol_of=dissector.protocol_of.get)  # fmt: skip
    for table in result.other_tables():
        result.arrow(table)
    with rocketmq_registered():  # hot frames as light records: the record path's tables
        # (the report's too: its light sends and answers taken a run at a time)
        for report_only in (False, True):
            if analysis_tables(path, report_only) != analysis_tables(
                    path, report_only, watch=lambda e: e):  # fmt: skip
                raise AssertionError("the analyses of light records differ from the records'")


def _event_list(events) -> list:
    """Events as comparable values (a frame's record as its dict, with its bytes)."""
    out = []
    for event in events:
        if isinstance(event, FrameEvent):
            record = event.record
            fields = (record.to_dict(payloads=True)
                      if isinstance(record, (RemotingCommand, Malformed)) else record.to_dict())
            out.append((event.ts_ns, event.connection, event.direction, event.stream_offset,
                        type(record).__name__, fields))  # fmt: skip
        else:
            out.append(repr(event))
    return out


def replay(target: str, data: bytes, scratch: str | None = None) -> None:
    if target == "frame":
        run_frame(data)
    elif target == "stream":
        run_stream(data)
    elif scratch is None:
        with tempfile.TemporaryDirectory() as tmp:
            run_pcap(data, os.path.join(tmp, "input.pcap"))
    else:
        run_pcap(data, scratch)


def pcap_captures() -> list:
    """(link type, packets) of every RocketMQ capture, as fuzz.PcapMutator takes them."""
    import worsen

    return [worsen.read_pcap(CAPTURES / f"{name}.pcap") for name in NAMES]


def campaign(minutes: float | None, counts: dict[str, int] | None, seed: int) -> dict:
    rng = random.Random(seed)
    frames, streams = corpus()
    mutator = RocketMQMutator(rng, frames + crafted())
    generators = {"frame": mutator.mutate,
                  "stream": fuzz.StreamMutator(rng, streams, mutator).mutate,
                  "pcap": fuzz.PcapMutator(rng, pcap_captures(), mutator).mutate}  # fmt: skip
    batch = {"frame": 200, "stream": 10, "pcap": 2}
    stats = {name: fuzz.Stats() for name in generators}
    old = signal.signal(fuzz.TIMER_SIGNAL, fuzz._alarm)
    fd, scratch = tempfile.mkstemp(prefix="rocketmq-fuzz-", suffix=".pcap")
    os.close(fd)
    deadline = time.monotonic() + minutes * 60 if minutes else None
    started = time.monotonic()
    try:
        while deadline is None or time.monotonic() < deadline:
            pending = [n for n in generators if counts is None or stats[n].inputs < counts[n]]
            if not pending:
                break
            for name in pending:
                for _ in range(batch[name]):
                    data = generators[name]()
                    sample = stats[name].inputs % fuzz.SAMPLE_MEMORY_EVERY == 10
                    fuzz.run_one(name, data, stats[name], scratch, REGRESSIONS, sample, print,
                                 replay_with=replay)  # fmt: skip
            fuzz.release_free_memory()  # (RSS then is what is held: fuzz_memory)
    finally:
        signal.signal(fuzz.TIMER_SIGNAL, old)
        os.unlink(scratch)
    return {"seed": seed, "minutes": round((time.monotonic() - started) / 60, 2),
            "findings": sum(s.findings for s in stats.values()),
            "targets": {n: {"inputs": s.inputs, "findings": s.findings,
                            "slowest_ms": round(s.slowest_s * 1000, 2),
                            "peak_traced_kib": round(s.peak_bytes / 1024),
                            "saved": s.saved} for n, s in stats.items()}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float)
    parser.add_argument("--frames", type=int, default=0)
    parser.add_argument("--streams", type=int, default=0)
    parser.add_argument("--pcaps", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    counts = None
    if args.frames or args.streams or args.pcaps:
        counts = {"frame": args.frames, "stream": args.streams, "pcap": args.pcaps}
    elif args.minutes is None:
        parser.error("give --minutes or counts")
    result = campaign(args.minutes, counts, args.seed)
    print(json.dumps(result, indent=1))
    return 1 if result["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
