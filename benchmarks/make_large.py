#!/usr/bin/env python3
"""Make the large benchmark capture from real traffic, re-cut to a real MSS.

    python benchmarks/make_large.py [--out benchmarks/out/large.pcap] [--scale 1.0]
    python benchmarks/make_large.py --shape small --out benchmarks/out/small.pcap

1. tcpdump on lo (``tcp port 5552``) while rstream 1.1.1 (from PyPI) talks to the real
   RabbitMQ 3.10.8 broker on 127.0.0.1:5552: a Producer publishes MESSAGES fixed-size AMQP
   messages in fixed batches with publish confirms (a bounded window of unconfirmed batches),
   while a Consumer subscribed from 'first' reads them at full speed (rstream's one Credit per
   chunk).  Both directions carry the message bytes.
2. Keep only this run's connections (their PeerProperties carry a run token), and re-cut the
   loopback capture to a real network's segmentation: every TCP segment carries at most
   MSS=1448 payload bytes.  A big loopback segment (up to ~64 KB) becomes several packets with
   consecutive sequence numbers, the same timestamp, the same ACK, PSH/FIN on the last piece
   only, a correct IP total length, IP id and checksums.  Every payload byte and the order of
   the timestamps are kept; packets with no more than MSS payload (ACK-only ones included) are
   written exactly as captured.  Timestamps are kept as tcpdump wrote them (on a multi-CPU
   host a packet is now and then stamped a few us before the one written ahead of it).

The size is set by a fixed number and size of messages (scale 1: ~600 MB, ~450,000 packets).
The TCP segmentation of a live run varies a little, so packet counts vary by a percent or so.
A summary is printed and written beside the capture as PATH.json.
This script does not import streamdissect: the benchmark input must not depend on the code
it measures.  Needs root (tcpdump), the broker (scripts/brokers.sh start) and rstream.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pcapio import LINKTYPE_ETHERNET, PcapWriter, read_header, read_packets

HOST = "127.0.0.1"
USER = PASSWORD = "guest"
MSS = 1448

# Scale 1: 285,000 messages of 1,000 bytes each way -> ~620 MB, ~430k packets after re-cut.
MESSAGES = 285_000
BODY_SIZE = 1000
BATCH = 50          # messages per Publish frame (rstream send_batch)
WINDOW = 20         # unconfirmed batches in flight before the producer waits
INITIAL_CREDIT = 10  # rstream's default; it then grants 1 credit per delivered chunk


# --shape small: what many clients send, one small message per Publish frame, a confirm per
# message and small chunks (the shape where per-frame work dominates; issue 13).
SHAPES = {
    "large": {"messages": MESSAGES, "body_size": BODY_SIZE, "batch": BATCH, "window": WINDOW},
    "small": {"messages": 250_000, "body_size": 100, "batch": 1, "window": 400},
}


def body(i: int, size: int = BODY_SIZE) -> bytes:
    head = b"sd-bench-%09d-" % i
    return (head + b"abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 1))[:size]


# ---------------------------------------------------------------------------------------
# traffic


async def workload(port: int, token: str, n: int, shape: dict) -> dict:
    from rstream import AMQPMessage, Consumer, ConsumerOffsetSpecification, OffsetType, Producer

    stream = f"{token}-stream"
    confirmed = [0]
    failed = [0]
    consumed = [0]
    done = asyncio.Event()

    def on_confirm(status) -> None:
        if status.is_confirmed:
            confirmed[0] += 1
        else:
            failed[0] += 1

    def on_message(msg, ctx) -> None:
        consumed[0] += 1
        if consumed[0] >= n:
            done.set()

    t0 = time.monotonic()
    async with Producer(HOST, port, username=USER, password=PASSWORD,
                        connection_name=f"{token}-producer") as producer:
        await producer.create_stream(stream)
        consumer = Consumer(HOST, port, username=USER, password=PASSWORD,
                            connection_name=f"{token}-consumer")
        await consumer.start()
        sub = await consumer.subscribe(
            stream, on_message,
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
            initial_credit=INITIAL_CREDIT)
        sent = 0
        batch, size = shape["batch"], shape["body_size"]
        while sent < n:
            k = min(batch, n - sent)
            messages = [AMQPMessage(body=body(sent + i, size)) for i in range(k)]
            await producer.send_batch(stream, messages, on_publish_confirm=on_confirm)
            sent += k
            while sent - confirmed[0] - failed[0] > shape["window"] * batch:
                await asyncio.sleep(0.0005)
        deadline = time.monotonic() + 120
        while confirmed[0] + failed[0] < n and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        try:
            await asyncio.wait_for(done.wait(), timeout=max(1.0, deadline - time.monotonic()))
        except TimeoutError:
            pass
        elapsed = time.monotonic() - t0
        await consumer.unsubscribe(sub)
        await producer.delete_stream(stream)
        await consumer.close()
    return {"published": sent, "confirmed": confirmed[0], "publish_errors": failed[0],
            "consumed": consumed[0], "traffic_s": round(elapsed, 2)}


def capture(raw_path: Path, port: int, token: str, n: int, shape: dict) -> tuple[dict, dict]:
    cmd = ["tcpdump", "-i", "lo", "-s", "0", "-U", "-n", "-B", "131072", "-w", str(raw_path),
           f"tcp port {port}"]
    td = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    line = ""
    deadline = time.monotonic() + 15
    while "listening on" not in line:
        line = td.stderr.readline()
        if not line and td.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"tcpdump did not start: {line!r}")
    try:
        counts = asyncio.run(workload(port, token, n, shape))
        time.sleep(0.5)  # let the last ACKs and FINs reach the capture
    finally:
        td.send_signal(signal.SIGINT)
        err = td.stderr.read()
        td.wait(timeout=30)
    stats = {}
    for ln in err.splitlines():
        parts = ln.split()
        if len(parts) >= 3 and parts[1:3] == ["packets", "captured"]:
            stats["tcpdump_captured"] = int(parts[0])
        if "dropped by kernel" in ln:
            stats["tcpdump_dropped"] = int(parts[0])
    return counts, stats


# ---------------------------------------------------------------------------------------
# re-cut


def _ones_complement_checksum(data: bytes) -> int:
    """Internet checksum (RFC 1071): 2**16 == 1 (mod 0xFFFF), so one big-int modulo sums words."""
    if len(data) & 1:
        data += b"\0"
    r = int.from_bytes(data, "big") % 0xFFFF
    return 0xFFFF - r if r else 0


def _parse(data: bytes):
    """(ip_off, ihl, tcp_off, thl, payload_end, src, sport, dst, dport) of Ethernet/IPv4/TCP."""
    if len(data) < 14 + 20 or data[12:14] != b"\x08\x00" or data[14] >> 4 != 4:
        return None
    ihl = (data[14] & 0x0F) * 4
    if data[23] != 6:
        return None
    tot = struct.unpack_from(">H", data, 16)[0]
    end = 14 + tot if tot else len(data)  # 0: a TSO super-packet, length from the capture
    t = 14 + ihl
    thl = (data[t + 12] >> 4) * 4
    sport, dport = struct.unpack_from(">HH", data, t)
    return 14, ihl, t, thl, min(end, len(data)), data[26:30], sport, data[30:34], dport


def find_connections(raw_path: Path, port: int, token: bytes) -> set:
    """Client-side (ip, port) of the connections whose first client bytes carry the token."""
    keep, decided = set(), set()
    with open(raw_path, "rb") as f:
        hdr = read_header(f)
        if hdr.linktype != LINKTYPE_ETHERNET:
            raise SystemExit(f"expected Ethernet link type (tcpdump on lo), got {hdr.linktype}")
        for _sec, _frac, _olen, data in read_packets(f, hdr):
            p = _parse(data)
            if p is None:
                continue
            _e, _ihl, t, thl, end, src, sport, _dst, dport = p
            if dport != port or (src, sport) in decided or end <= t + thl:
                continue
            decided.add((src, sport))
            if token in data[t + thl:end]:
                keep.add((src, sport))
    return keep


def recut(raw_path: Path, out_path: Path, port: int | set, keep: set, mss: int = MSS) -> dict:
    """Write the packets of the `keep` connections (client (ip, port)s to the server `port`,
    or any of a set of ports) to `out_path`, segments over `mss` cut into pieces."""
    ports = {port} if isinstance(port, int) else set(port)
    st = {"raw_packets": 0, "raw_packets_kept": 0, "split_segments": 0, "largest_raw_segment": 0,
          "payload_c2s": 0, "payload_s2c": 0, "payload_out": 0, "largest_out_segment": 0,
          "ts_backsteps": 0}
    pack_h = struct.Struct(">H").pack_into
    pack_seq = struct.Struct(">I").pack_into
    last_ts = (0, 0)
    with open(raw_path, "rb") as f, open(out_path, "wb") as g:
        hdr = read_header(f)
        w = PcapWriter(g, hdr)
        for sec, frac, olen, data in read_packets(f, hdr):
            st["raw_packets"] += 1
            p = _parse(data)
            if p is None:
                continue
            e, ihl, t, thl, end, src, sport, dst, dport = p
            if dport in ports and (src, sport) in keep:
                direction = "payload_c2s"
            elif sport in ports and (dst, dport) in keep:
                direction = "payload_s2c"
            else:
                continue
            if (sec, frac) < last_ts:
                st["ts_backsteps"] += 1  # tcpdump on a multi-CPU lo: kept as captured
            last_ts = (sec, frac)
            st["raw_packets_kept"] += 1
            plen = end - (t + thl)
            st[direction] += plen
            st["largest_raw_segment"] = max(st["largest_raw_segment"], plen)
            if plen <= mss:
                w.write(sec, frac, data, olen)
                st["payload_out"] += plen
                st["largest_out_segment"] = max(st["largest_out_segment"], plen)
                continue
            st["split_segments"] += 1
            head = bytearray(data[:t + thl])
            payload = data[t + thl:end]
            seq, = struct.unpack_from(">I", data, t + 4)
            ip_id, = struct.unpack_from(">H", data, e + 4)
            flags = data[t + 13]
            pseudo_base = src + dst + b"\x00\x06"
            for k, off in enumerate(range(0, plen, mss)):
                piece = payload[off:off + mss]
                last = off + mss >= plen
                h = bytearray(head)
                pack_h(h, e + 2, ihl + thl + len(piece))
                pack_h(h, e + 4, (ip_id + k) & 0xFFFF)
                pack_h(h, e + 10, 0)
                pack_h(h, e + 10, _ones_complement_checksum(bytes(h[e:e + ihl])))
                pack_seq(h, t + 4, (seq + off) & 0xFFFFFFFF)
                h[t + 13] = flags if last else flags & ~0x09  # PSH and FIN on the last piece only
                pack_h(h, t + 16, 0)
                tcp = bytes(h[t:]) + piece
                pack_h(h, t + 16, _ones_complement_checksum(
                    pseudo_base + struct.pack(">H", len(tcp)) + tcp))
                w.write(sec, frac, bytes(h) + piece)
                st["payload_out"] += len(piece)
                st["largest_out_segment"] = max(st["largest_out_segment"], len(piece))
        st["packets"] = w.packets
    payload_in = st["payload_c2s"] + st["payload_s2c"]
    if st["payload_out"] != payload_in or st["largest_out_segment"] > mss:
        raise SystemExit(f"re-cut lost bytes or left a big segment: {st!r}")
    return st


# ---------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE / "out" / "large.pcap"))
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply the message count (2.0 for the flatness check, 0.01 smoke)")
    ap.add_argument("--port", type=int, default=5552, help="broker stream port on 127.0.0.1")
    ap.add_argument("--mss", type=int, default=MSS)
    ap.add_argument("--keep-raw", action="store_true", help="keep the loopback capture too")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="large",
                    help="large: batches of 50 1,000-byte messages (the default); small: one "
                         "100-byte message per Publish frame (benchmarks/out/small.pcap)")
    args = ap.parse_args(argv)
    shape = SHAPES[args.shape]

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = out.with_name(out.stem + ".loopback.pcap")
    n = max(1, round(shape["messages"] * args.scale))
    token = f"sd-bench-{os.getpid()}-{int(time.time() * 1000) & 0xFFFFFFFF:x}"

    t0 = time.monotonic()
    print(f"capturing {n} messages of {shape['body_size']} bytes, {shape['batch']} a Publish "
          f"frame, via 127.0.0.1:{args.port} ...",
          flush=True)
    counts, tdstats = capture(raw, args.port, token, n, shape)
    t1 = time.monotonic()
    if counts["consumed"] < n or counts["confirmed"] < n:
        print(f"warning: not every message was confirmed/consumed: {counts!r}", file=sys.stderr)
    if tdstats.get("tcpdump_dropped"):
        raise SystemExit(f"tcpdump dropped {tdstats['tcpdump_dropped']} packets; the capture "
                         "is incomplete")
    keep = find_connections(raw, args.port, token.encode())
    st = recut(raw, out, args.port, keep, args.mss)
    t2 = time.monotonic()
    if not args.keep_raw:
        raw.unlink()

    summary = {
        "file": str(out), "bytes": out.stat().st_size, "packets": st["packets"],
        "shape": args.shape, "scale": args.scale, "messages": n,
        "body_size": shape["body_size"], "batch": shape["batch"],
        "window_batches": shape["window"], "initial_credit": INITIAL_CREDIT, "mss": args.mss,
        "broker_port": args.port, "connections": len(keep), **counts, **tdstats, **st,
        "capture_s": round(t1 - t0, 1), "recut_s": round(t2 - t1, 1),
    }
    from importlib.metadata import version
    summary["client"] = f"rstream {version('rstream')}"
    Path(str(out) + ".json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}: {st['packets']} packets, {summary['bytes'] / 1e6:.1f} MB "
          f"({summary['bytes']} bytes)")
    print(f"  loopback capture: {st['raw_packets_kept']} packets kept of {st['raw_packets']}, "
          f"{st['split_segments']} segments > MSS re-cut (largest {st['largest_raw_segment']})")
    print(f"  payload: c2s {st['payload_c2s']} bytes, s2c {st['payload_s2c']} bytes; "
          f"{len(keep)} connections")
    print(f"  messages: published {counts['published']}, confirmed {counts['confirmed']}, "
          f"errors {counts['publish_errors']}, consumed {counts['consumed']}")
    print(f"  time: capture {t1 - t0:.1f} s, re-cut {t2 - t1:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
