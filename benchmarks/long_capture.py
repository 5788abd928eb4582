#!/usr/bin/env python3
"""Long captures (issue 28, point 2): a capture N times the small-frame benchmark capture,
made by repeating it with shifted times and client ports, and `analyze` and `report` on
the 1x and the Nx file: peak memory (the Nx at most 1.2x the 1x) and the figures the sum
of N runs where they should be.

    python benchmarks/long_capture.py [--source /work/bench/small.pcap] [--times 10]
                                      [--out benchmarks/out] [--repeats 1] [--json PATH]

The Nx file (OUT/<source>-x<N>.pcap, remade only when missing or older than the source)
is the source's records N times over, pure byte rewriting (no streamdissect import, like
make_large.py): copy k has every time moved on by k * SHIFT whole seconds (SHIFT: the
source's span rounded up, plus one second, so copies do not overlap and each copy's
seconds fall on whole seconds of its own) and every client port (the side that is not the
broker's, --port) moved by k * STEP (STEP: the span of the source's client ports plus one,
so no copy reuses a port of another), the TCP checksum adjusted for the new port (RFC
1624). Everything inside the TCP payload is left as it was, so the broker's own
timestamps (the chunk time in a Deliver) are not moved.

Each command runs as a fresh child process (run.py's run_once: wall time, peak RSS by
/usr/bin/time); `analyze --format json` writes its report to a file, which is then held
against the 1x's: each of N copies of every 1x row, moved by its copy's time and port
shift, must be in the Nx's table exactly (as a multiset: connections, peer properties,
confirms, credit with its stalls, consumer lag, throughput, anomalies), the per-command
latency counts and the error counts are N times the 1x's (min and max latency equal; the
other percentiles are of N copies of the same sample and are not compared), and the
capture's first time is the 1x's. Consumer lag's delivery latency (capture time minus the
broker's chunk time) grows with each copy's shift, as it must, so it is not compared.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from make_large import _parse
from pcapio import PcapWriter, read_header, read_packets
from report import CLI, into_page_cache, round_robin
from run import RSS_METHOD

MAX_RSS_RATIO = 1.2
# tables whose rows are one copy's own: the Nx table holds each 1x row N times, moved
COPIED_TABLES = ("connections", "peer_properties", "confirms", "credit", "consumer_lag",
                 "throughput", "anomalies")  # fmt: skip
NOT_COMPARED = {"consumer_lag": ("delivery_latency_ms",)}  # (the broker's clock: not moved)
SUMMED = {"latency": ("command", ("calls", "answered", "open_requests", "orphan_responses",
                                  "duplicate_ids"), ("min_ms", "max_ms")),
          "errors": (("command", "code"), ("count",), ())}  # fmt: skip


# --- the Nx capture -------------------------------------------------------------------


def _checksum_update(checksum: int, old: int, new: int) -> int:
    """The Internet checksum after one 16-bit word changed from `old` to `new` (RFC 1624,
    eqn. 3: HC' = ~(~HC + ~m + m'))."""
    total = (~checksum & 0xFFFF) + (~old & 0xFFFF) + new
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def survey(source: Path, port: int) -> dict:
    """The source's first and last time (seconds) and its client ports."""
    first = last = None
    clients: set[int] = set()
    with open(source, "rb") as f:
        header = read_header(f)
        scale = 1e9 if header.nanos else 1e6
        for sec, frac, _, data in read_packets(f, header):
            t = sec + frac / scale
            first = t if first is None else min(first, t)
            last = t if last is None else max(last, t)
            parsed = _parse(data)
            if parsed is not None:
                sport, dport = parsed[6], parsed[8]
                if dport == port:
                    clients.add(sport)
                elif sport == port:
                    clients.add(dport)
    if first is None or not clients:
        raise SystemExit(f"{source}: no TCP packets of port {port}")
    return {"first_s": first, "last_s": last, "client_ports": sorted(clients)}


def port_map(clients: list[int], times: int, server_port: int) -> tuple[int, list[dict]]:
    """STEP and, for each copy k, {client port: its port in copy k}, all distinct."""
    step = max(clients) - min(clients) + 1
    low, span = 1024, 65536 - 1024
    maps, used = [], {server_port}
    for k in range(times):
        moved = {p: low + (p - low + k * step) % span for p in clients}
        if used & set(moved.values()):
            raise SystemExit(f"{times} copies of {len(clients)} client ports do not fit "
                             f"in the port range")  # fmt: skip
        used |= set(moved.values())
        maps.append(moved)
    return step, maps


def make_copies(source: Path, out: Path, times: int, port: int) -> dict:
    """Write the Nx capture; returns how it was made (shift, step, counts)."""
    facts = survey(source, port)
    shift_s = math.ceil(facts["last_s"] - facts["first_s"]) + 1
    step, maps = port_map(facts["client_ports"], times, port)
    put_port = struct.Struct(">H").pack_into
    unchanged = 0
    tmp = out.with_suffix(".part")
    with open(tmp, "wb") as g:
        writer = None
        for k, moved in enumerate(maps):
            with open(source, "rb") as f:
                header = read_header(f)
                writer = writer or PcapWriter(g, header)
                for sec, frac, origlen, data in read_packets(f, header):
                    parsed = _parse(data)
                    if parsed is None or k == 0:
                        unchanged += parsed is None
                        writer.write(sec + k * shift_s, frac, data, origlen)
                        continue
                    t, sport, dport = parsed[2], parsed[6], parsed[8]
                    at = t if dport == port else t + 2  # (the client's port: source or dest)
                    old = sport if dport == port else dport
                    new = moved.get(old, old)
                    packet = bytearray(data)
                    put_port(packet, at, new)
                    if len(packet) >= t + 18:
                        (checksum,) = struct.unpack_from(">H", packet, t + 16)
                        put_port(packet, t + 16, _checksum_update(checksum, old, new))
                    writer.write(sec + k * shift_s, frac, bytes(packet), origlen)
    os.replace(tmp, out)
    made = {"source": str(source), "times": times, "shift_s": shift_s, "port_step": step,
            "client_ports": facts["client_ports"], "packets": writer.packets,
            "bytes": out.stat().st_size, "packets_not_tcp_ipv4": unchanged}  # fmt: skip
    out.with_suffix(".pcap.json").write_text(json.dumps(made, indent=1) + "\n")
    return made


# --- the figures, held against N copies of the 1x's --------------------------------------


def _moved(value, k: int, shift_ns: int, ports: dict):
    """A 1x report value as copy k has it: times (`*_ns`) and client ports moved."""
    if isinstance(value, dict):
        return {key: (v + k * shift_ns if key.endswith("_ns") and isinstance(v, int)
                      else _moved(v, k, shift_ns, ports)) for key, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_moved(v, k, shift_ns, ports) for v in value]
    if isinstance(value, str) and ":" in value:
        return "-".join(_moved_endpoint(e, ports) for e in value.split("-"))
    return value


def _moved_endpoint(endpoint: str, ports: dict) -> str:
    host, _, port = endpoint.rpartition(":")
    if host and port.isdigit() and int(port) in ports:
        return f"{host}:{ports[int(port)]}"
    return endpoint


def _rows(rows: list[dict], table: str) -> Counter:
    left_out = NOT_COMPARED.get(table, ())
    return Counter(json.dumps({k: v for k, v in r.items() if k not in left_out}, sort_keys=True)
                   for r in rows)  # fmt: skip


def _keyed(rows: list[dict], key: str | tuple) -> dict[str, dict]:
    names = key if isinstance(key, tuple) else (key,)
    return {json.dumps([row[name] for name in names]): row for row in rows}


def compare(one: dict, many: dict, made: dict) -> list[dict]:
    """Each table's verdict: the Nx report against N moved copies of the 1x report."""
    times, shift_ns = made["times"], made["shift_s"] * 10**9
    _, maps = port_map(made["client_ports"], times, made.get("port", 5552))
    verdicts = []
    for table in COPIED_TABLES:
        expected = Counter()
        for k, ports in enumerate(maps):
            expected += _rows(_moved(one[table], k, shift_ns, ports), table)
        got = _rows(many[table], table)
        verdicts.append({"table": table, "rows_1x": len(one[table]), "rows_nx": len(many[table]),
                         "equal": got == expected, "missing": sum((expected - got).values()),
                         "extra": sum((got - expected).values())})  # fmt: skip
    for table, (key, counted, same) in SUMMED.items():
        a, b = _keyed(one[table], key), _keyed(many[table], key)
        equal = a.keys() == b.keys() and all(
            all(b[n][c] == times * a[n][c] for c in counted)
            and all(b[n][c] == a[n][c] for c in same) for n in a)  # fmt: skip
        verdicts.append({"table": table, "rows_1x": len(a), "rows_nx": len(b), "equal": equal,
                         "rule": f"{', '.join(counted)} x{times}"
                                 + (f"; {', '.join(same)} equal" if same else "")})  # fmt: skip
    first_equal = many["capture"]["first_ns"] == one["capture"]["first_ns"]
    last_equal = many["capture"]["last_ns"] == one["capture"]["last_ns"] + (times - 1) * shift_ns
    verdicts.append({"table": "capture", "equal": first_equal and last_equal,
                     "rule": "first time the 1x's, last the 1x's + (N-1) shifts"})  # fmt: skip
    return verdicts


def totals(report: dict) -> dict:
    """The headline counts of one report."""
    conns = report["connections"]
    return {
        "connections": len(conns),
        "frames": sum(c["frames_c2s"] + c["frames_s2c"] for c in conns),
        "bytes": sum(c["bytes_c2s"] + c["bytes_s2c"] for c in conns),
        "published": sum(r["published"] for r in report["confirms"]),
        "confirmed": sum(r["confirmed"] for r in report["confirms"]),
        "delivered": sum(r["records_delivered"] for r in report["credit"]),
        "chunks_delivered": sum(r["chunks_delivered"] for r in report["credit"]),
        "stalls": sum(len(r["stalls"]) for r in report["credit"]),
        "anomalies": len(report["anomalies"]),
    }


# --- the runs ---------------------------------------------------------------------------


def measure(path: Path, repeats: int, timeout: float, keep: Path) -> dict:
    """analyze --format json (its report kept as `keep`) and report, `repeats` times each."""
    into_page_cache(str(path))
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "report.html")
        # (through `sh -c exec`: the same process, so /usr/bin/time's peak is streamdissect's)
        analyze = " ".join([*CLI, "analyze", "--format", "json", f"'{path}'", ">", f"'{keep}'"])
        argv = {"analyze": ["sh", "-c", "exec " + analyze],
                "report": [*CLI, "report", "-q", str(path), "-o", html]}  # fmt: skip
        runs = round_robin(argv, repeats, timeout, env, str(path))
        html_bytes = os.path.getsize(html)
    return {"file": str(path), "bytes": path.stat().st_size, "html_bytes": html_bytes,
            **{f"{n}_s": [r.wall_s for r in rs] for n, rs in runs.items()},
            **{f"{n}_rss_mb": max(r.maxrss_mb for r in rs) for n, rs in runs.items()}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=Path("/work/bench/small.pcap"))
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--port", type=int, default=5552, help="the broker's port")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    big = args.out / f"{args.source.stem}-x{args.times}.pcap"
    facts = big.with_suffix(".pcap.json")
    if big.exists() and facts.exists() and big.stat().st_mtime > args.source.stat().st_mtime:
        made = json.loads(facts.read_text())
    else:
        print(f"making {big} ...", flush=True)
        made = make_copies(args.source, big, args.times, args.port)
    made["port"] = args.port
    print(f"{big}: {made['packets']:,} packets, {made['bytes'] / 1e6:,.0f} MB, copies "
          f"{made['shift_s']} s and {made['port_step']} ports apart", flush=True)  # fmt: skip
    results, reports = [], []
    for path in (args.source, big):
        print(f"{path} ({path.stat().st_size / 1e6:,.0f} MB)", flush=True)
        keep = args.out / f"{path.stem}.analyze.json"
        results.append(measure(path, args.repeats, args.timeout, keep))
        reports.append(json.loads(keep.read_text()))
    verdicts = compare(reports[0], reports[1], made)
    sums = [totals(r) for r in reports]
    one, many = results
    rss = {n: many[f"{n}_rss_mb"] / one[f"{n}_rss_mb"] for n in ("analyze", "report")}
    print(f"\npeak RSS ({RSS_METHOD}), {args.times}x against 1x (at most {MAX_RSS_RATIO}x):")
    for name, ratio in rss.items():
        print(f"  {name:<8} {one[name + '_rss_mb']:7.1f} MB -> {many[name + '_rss_mb']:7.1f} MB "
              f"= {ratio:.3f}x  {'PASS' if ratio <= MAX_RSS_RATIO else 'FAIL'}")  # fmt: skip
    print(f"\n{'count':<18} {'1x':>12} {str(args.times) + 'x':>14} {'ratio':>7}")
    for key in sums[0]:
        ratio = sums[1][key] / sums[0][key] if sums[0][key] else float("nan")
        print(f"{key:<18} {sums[0][key]:>12,} {sums[1][key]:>14,} {ratio:7.2f}")
    print(f"\n{'table':<16} {'rows 1x':>8} {'rows Nx':>9}  verdict")
    for v in verdicts:
        print(f"{v['table']:<16} {v.get('rows_1x', ''):>8} {v.get('rows_nx', ''):>9}  "
              f"{'EQUAL' if v['equal'] else 'DIFFERENT'} {v.get('rule', '')}"
              + (f" (missing {v['missing']}, extra {v['extra']})" if not v["equal"] and
                 "missing" in v else ""))  # fmt: skip
    ok = all(v["equal"] for v in verdicts) and all(r <= MAX_RSS_RATIO for r in rss.values())
    if args.json:
        args.json.write_text(json.dumps({"made": made, "runs": results, "rss_ratio": rss,
                                         "totals": sums, "tables": verdicts, "ok": ok},
                                        indent=1) + "\n")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
