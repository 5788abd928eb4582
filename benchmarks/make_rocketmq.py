#!/usr/bin/env python3
"""Make the RocketMQ benchmark capture: real sends and pulls through the RocketMQ kit.

    python benchmarks/make_rocketmq.py                       # benchmarks/out/rocketmq.pcap
    python benchmarks/make_rocketmq.py --scale 2 --out benchmarks/out/rocketmq2x.pcap

tcpdump records `tcp port 9876 or tcp port 10911` on `lo` while the kit's Java client
(RocketMQ 4.9.8, JSON headers) talks to the kit's real name server and broker on 127.0.0.1:
the messages (--sends, 100,000 at scale 1) go in --parts topics one after the other (the
Java client keeps a trace of every frame in a 256 MB heap, so one process would not hold
100,000 sends); each part is a DefaultMQProducer sending its messages one SEND_MESSAGE_V2 at
a time, and, started when the producer is, a DefaultLitePullConsumer of a group of its own
pulling them all back (PULL_MESSAGE, 32 messages a pull). The topics (4 queues) are made
with mqadmin before the capture starts, as is the servers' start when they do not already
run (then they are stopped at the end): the capture holds the clients' connections and the
broker's periodic registration with the name server. The loopback capture is then re-cut to
MSS 1448 as make_large.py does (its `recut`). The kit's start and clients are
captures/rocketmq/record.py's (its Kit): options --kit/--work/--java or
RMQ_KIT/RMQ_WORK/RMQ_JAVA as there.

The clients' own traces say how many sends succeeded and how many messages came back; they
are summed into PATH.json with the capture's packets and tcpdump's drops (must be 0). This
script does not import streamdissect: the input must not depend on the code under test.
Needs root (tcpdump) and the kit set up (KIT/setup.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "captures" / "rocketmq")]

from make_large import MSS, _parse, recut
from pcapio import read_header, read_packets
from record import BROKER, NAMESRV, PCAP_FILTER, Kit, tcpdump_start, tcpdump_stop

SENDS = 100_000
PARTS = 10
CLIENT_TIMEOUT_S = 1800
TCPDUMP_BUFFER_KIB = 512 * 1024  # (32 MiB dropped 599 packets of a 1x run under load 11)


def client_endpoints(raw: Path, ports: set[int]) -> set:
    """Client-side (ip, port) of every connection to one of the server `ports`."""
    seen = set()
    with open(raw, "rb") as f:
        hdr = read_header(f)
        for _sec, _frac, _olen, data in read_packets(f, hdr):
            p = _parse(data)
            if p is not None and p[8] in ports:
                seen.add((p[5], p[6]))
    return seen


def run_part(kit: Kit, topic: str, n: int, size: int, tag: str) -> dict:
    """One topic: a producer of `n` sends and, beside it, a lite pull consumer of them all."""
    producer = kit.java("RmqProducer", "--topic", topic, "--count", str(n), "--size", str(size),
                        "--tags", "TagA,TagB", "--group", "PG_" + tag,
                        report=topic + "-producer.json", background=True,
                        timeout=CLIENT_TIMEOUT_S)
    consumer = kit.java("RmqConsumer", "--topic", topic, "--mode", "lite", "--group",
                        "CG_" + tag, "--expect", str(n), "--timeout", str(CLIENT_TIMEOUT_S),
                        report=topic + "-consumer.json", background=True,
                        timeout=CLIENT_TIMEOUT_S + 60)
    sent, got = producer(), consumer()
    pulls = [f for f in got["frames"] if f.get("dir") == "c->s request" and f.get("code") == 11]
    return {"topic": topic, "sends": len(sent["sends"]),
            "sends_ok": sum(s.get("status") == "SEND_OK" for s in sent["sends"]),
            "received": len(got["received"]), "pulls": len(pulls),
            "producer_exit": sent["exitStatus"], "consumer_exit": got["exitStatus"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    env = os.environ.get
    ap.add_argument("--out", default=str(HERE / "out" / "rocketmq.pcap"))
    ap.add_argument("--sends", type=int, default=SENDS, help="messages at scale 1")
    ap.add_argument("--scale", type=float, default=1.0, help="2 for the memory check")
    ap.add_argument("--parts", type=int, default=PARTS,
                    help="topics (a producer and a consumer process each) at scale 1")
    ap.add_argument("--size", type=int, default=128, help="message body bytes")
    ap.add_argument("--mss", type=int, default=MSS)
    ap.add_argument("--keep-raw", action="store_true", help="keep the loopback capture too")
    ap.add_argument("--kit", default=env("RMQ_KIT", "/work/shared/rocketmq"))
    ap.add_argument("--work", default=env("RMQ_WORK", "/tmp/rocketmq-work"))
    ap.add_argument("--java", default=env("RMQ_JAVA"))
    args = ap.parse_args(argv)

    n = max(1, round(args.sends * args.scale))
    parts = max(1, round(args.parts * args.scale))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = out.with_name(out.stem + ".loopback.pcap")
    scratch = Path(tempfile.mkdtemp(prefix="sd-rmq-bench-"))
    java = args.java or str(Path(args.kit) / "clients" / "java" / "run.sh")
    kit = Kit(args.kit, args.work, java, "", "", scratch)
    run_tag = time.strftime("%H%M%S")
    topics = [f"SdBench{run_tag}_{i}" for i in range(parts)]
    per_part = [n // parts + (i < n % parts) for i in range(parts)]

    started_here = not kit.running()
    results, dump = [], None
    try:
        if started_here:
            kit.rmq("start", fresh=True)
        for topic in topics:  # made before: a consumer must find its topic's route
            kit.create_topic(topic)
        t0 = time.monotonic()
        dump = tcpdump_start(raw, PCAP_FILTER, TCPDUMP_BUFFER_KIB)
        for i, (topic, count) in enumerate(zip(topics, per_part)):
            print(f"part {i + 1}/{parts}: {count} sends to {topic} and their pulls", flush=True)
            results.append(run_part(kit, topic, count, args.size, f"BENCH_{run_tag}_{i}"))
            print("   ", results[-1], flush=True)
    finally:
        try:
            dropped = tcpdump_stop(dump, raw) if dump is not None else 0
        finally:
            if started_here and kit.running():
                print(kit.rmq("stop"), end="", flush=True)
            shutil.rmtree(scratch, ignore_errors=True)  # the clients' traces
    t1 = time.monotonic()
    if dropped:
        raise SystemExit(f"tcpdump dropped {dropped} packets; the capture is incomplete")
    keep = client_endpoints(raw, {NAMESRV, BROKER})
    st = recut(raw, out, {NAMESRV, BROKER}, keep, args.mss)
    t2 = time.monotonic()
    if not args.keep_raw:
        raw.unlink()
        Path(str(raw) + ".err").unlink(missing_ok=True)

    totals = {k: sum(r[k] for r in results) for k in ("sends", "sends_ok", "received", "pulls")}
    summary = {
        "file": str(out), "bytes": out.stat().st_size, "packets": st["packets"],
        "shape": "rocketmq", "scale": args.scale, "messages": n, "parts": parts,
        "body_size": args.size, "mss": args.mss, "connections": len(keep),
        "client": "RocketMQ 4.9.8 Java client (the kit's RmqProducer, RmqConsumer --mode lite)",
        "servers_started_in_capture": started_here, **totals, "tcpdump_dropped": dropped,
        **st, "capture_s": round(t1 - t0, 1), "recut_s": round(t2 - t1, 1), "parts_detail": results,
    }
    Path(str(out) + ".json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}: {st['packets']} packets, {summary['bytes'] / 1e6:.1f} MB; "
          f"{len(keep)} connections")
    print(f"  sends {totals['sends']} ({totals['sends_ok']} SEND_OK), received "
          f"{totals['received']} in {totals['pulls']} pulls")
    print(f"  time: capture {t1 - t0:.1f} s, re-cut {t2 - t1:.1f} s")
    bad = [r for r in results if r["producer_exit"] or r["consumer_exit"]
           or r["sends_ok"] < r["sends"] or r["received"] < r["sends"]]
    if bad:
        print(f"warning: parts that did not send or get back every message: {bad}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
