"""Client-side ground truth for the capture corpus.

Everything here is independent of ``streamdissect``: the bytes are recorded where the
client hands them to the kernel (asyncio transport ``write``) and where it gets them back
(protocol ``data_received``), or, for the raw client, at the socket.  A tiny splitter
(u32 size, u16 key, u16 version) cuts those byte streams into frames; a handful of fixed
offsets read the few body fields the truth counts (codes, credits, chunk record counts).
"""
from __future__ import annotations

import asyncio
import asyncio.base_events
import struct
import time
from collections import Counter

U16 = struct.Struct(">H")
I16 = struct.Struct(">h")
U32 = struct.Struct(">I")
I32 = struct.Struct(">i")

COMMAND_NAMES = {
    0x01: "DeclarePublisher", 0x02: "Publish", 0x03: "PublishConfirm", 0x04: "PublishError",
    0x05: "QueryPublisherSequence", 0x06: "DeletePublisher", 0x07: "Subscribe", 0x08: "Deliver",
    0x09: "Credit", 0x0A: "StoreOffset", 0x0B: "QueryOffset", 0x0C: "Unsubscribe", 0x0D: "Create",
    0x0E: "Delete", 0x0F: "Metadata", 0x10: "MetadataUpdate", 0x11: "PeerProperties",
    0x12: "SaslHandshake", 0x13: "SaslAuthenticate", 0x14: "Tune", 0x15: "Open", 0x16: "Close",
    0x17: "Heartbeat", 0x18: "Route", 0x19: "Partitions", 0x1A: "ConsumerUpdate",
    0x1B: "ExchangeCommandVersions", 0x1C: "StreamStats", 0x1D: "CreateSuperStream",
    0x1E: "DeleteSuperStream", 0x1F: "ResolveOffsetSpec",
}

# responses whose body does not start with corr id + code
_NO_CODE_RESPONSES = {0x8009, 0x800F, 0x8014}


class ConnRecord:
    """Every byte one client connection wrote and read, in order."""

    def __init__(self, client_port: int, server_port: int, role: str = ""):
        self.client_port = client_port
        self.server_port = server_port
        self.role = role
        self.c2s = bytearray()
        self.s2c = bytearray()
        self.opened_ns = time.time_ns()
        self.closed_ns: int | None = None
        self.close_kind: str | None = None  # "close", "abort", "lost"
        self.extra: dict = {}

    def wrote(self, data) -> None:
        self.c2s += bytes(data)

    def read(self, data) -> None:
        self.s2c += bytes(data)


class Recorder:
    """Collects ConnRecords for one scenario run."""

    def __init__(self):
        self.conns: list[ConnRecord] = []
        self.api: list[tuple[int | None, dict]] = []  # (client_port or None, counts)
        self.notes: dict = {}
        self._next_role = ""

    # -- roles: a scenario names the connection it is about to open
    def role(self, name: str) -> None:
        self._next_role = name

    def new_conn(self, client_port: int, server_port: int) -> ConnRecord:
        c = ConnRecord(client_port, server_port, self._next_role)
        self._next_role = ""
        self.conns.append(c)
        return c

    def conn(self, client_port: int) -> ConnRecord:
        for c in self.conns:
            if c.client_port == client_port:
                return c
        raise KeyError(client_port)

    def count(self, port: int | None = None, **counts) -> None:
        """Record client-API counts (published, confirmed, errored, consumed, sleeps_ns...)."""
        self.api.append((port, counts))

    # -- asyncio hook
    def install_asyncio(self) -> None:
        rec = self
        orig = asyncio.base_events.BaseEventLoop.create_connection

        async def create_connection(loop, protocol_factory, host=None, port=None, **kw):
            def factory():
                proto = protocol_factory()
                _wrap_protocol(rec, proto)
                return proto

            return await orig(loop, factory, host, port, **kw)

        asyncio.base_events.BaseEventLoop.create_connection = create_connection


def _wrap_protocol(rec: Recorder, proto) -> None:
    orig_made = proto.connection_made
    orig_data = proto.data_received
    orig_lost = proto.connection_lost
    box: dict = {}

    def connection_made(transport):
        sock = transport.get_extra_info("sockname")
        peer = transport.get_extra_info("peername")
        c = box["conn"] = rec.new_conn(sock[1], peer[1])
        orig_write = transport.write
        orig_abort = transport.abort
        orig_close = transport.close

        def write(data):
            if not getattr(transport, "_conn_lost", 0) and not transport.is_closing():
                c.wrote(data)
            return orig_write(data)

        def abort():
            if c.close_kind is None:
                c.close_kind = "abort"
                unsent = transport.get_write_buffer_size()
                if unsent:
                    # abort() drops what the kernel has not taken yet: not on the wire
                    del c.c2s[len(c.c2s) - unsent:]
            return orig_abort()

        def close():
            if c.close_kind is None:
                c.close_kind = "close"
            return orig_close()

        transport.write = write
        transport.abort = abort
        transport.close = close
        return orig_made(transport)

    def data_received(data):
        c = box.get("conn")
        if c is not None:
            c.read(data)
        return orig_data(data)

    def connection_lost(exc):
        c = box.get("conn")
        if c is not None:
            c.closed_ns = time.time_ns()
            if c.close_kind is None:
                c.close_kind = "lost"
        return orig_lost(exc)

    proto.connection_made = connection_made
    proto.data_received = data_received
    proto.connection_lost = connection_lost


# ---------------------------------------------------------------------------------------
# the independent splitter and the few fixed-offset readers


def split_frames(data: bytes):
    """Cut a byte stream into (key, version, body) frames; returns (frames, leftover)."""
    frames = []
    i, n = 0, len(data)
    while i + 4 <= n:
        (size,) = U32.unpack_from(data, i)
        if size < 4 or i + 4 + size > n:
            break
        key, ver = struct.unpack_from(">HH", data, i + 4)
        frames.append((key, ver, bytes(data[i + 8 : i + 4 + size])))
        i += 4 + size
    return frames, n - i


def _string(body: bytes, off: int):
    (ln,) = I16.unpack_from(body, off)
    off += 2
    if ln < 0:
        return None, off
    return body[off : off + ln].decode("utf-8", "replace"), off + ln


def _publish_records(ver: int, body: bytes) -> tuple[int, int]:
    """(entries, records) of a Publish body."""
    (count,) = I32.unpack_from(body, 1)
    off, records = 5, 0
    for _ in range(count):
        off += 8
        if ver >= 2:
            _, off = _string(body, off)
        b0 = body[off]
        if b0 & 0x80:
            (nrec,) = U16.unpack_from(body, off + 1)
            (ln,) = U32.unpack_from(body, off + 7)
            off += 11 + ln
            records += nrec
        else:
            (ln,) = U32.unpack_from(body, off)
            off += 4 + ln
            records += 1
    return count, records


def _hex2(code: int) -> str:
    return "0x%02x" % code


def wire_counts(c2s: bytes, s2c: bytes) -> dict:
    """Everything the truth counts from the two byte streams of one connection."""
    out: dict = {"frames": {"c2s": {}, "s2c": {}}, "bytes": {"c2s": len(c2s), "s2c": len(s2c)}}
    fc2s, left_c = split_frames(c2s)
    fs2c, left_s = split_frames(s2c)
    if left_c or left_s:
        out["partial_frame_bytes"] = {"c2s": left_c, "s2c": left_s}
    for d, frames in (("c2s", fc2s), ("s2c", fs2c)):
        cnt = Counter("0x%04x v%d" % (k, v) for k, v, _ in frames)
        out["frames"][d] = dict(sorted(cnt.items()))

    codes: Counter = Counter()
    codes_c2s: Counter = Counter()
    closing: dict = {"c2s": [], "s2c": []}
    w = Counter()  # wire-level tallies used for cross-checks
    initial_credit: dict = {}
    credits = 0
    for k, v, b in fs2c:
        if k & 0x8000 and k not in _NO_CODE_RESPONSES and len(b) >= 6:
            codes[_hex2(U16.unpack_from(b, 4)[0])] += 1
        elif k == 0x8009:
            codes[_hex2(U16.unpack_from(b, 0)[0])] += 1
        elif k == 0x0004:  # PublishError: pubid, [pid u64, code u16]
            (n,) = I32.unpack_from(b, 1)
            for j in range(n):
                (code,) = U16.unpack_from(b, 5 + j * 10 + 8)
                codes[_hex2(code)] += 1
                w["errored:" + _hex2(code)] += 1
        elif k == 0x0010:
            codes[_hex2(U16.unpack_from(b, 0)[0])] += 1
        elif k == 0x0003:
            w["confirmed_ids"] += I32.unpack_from(b, 1)[0]
        elif k == 0x0008:
            chunk = b[1:] if v == 1 else b[9:]
            w["delivered_chunks"] += 1
            w["delivered_records"] += U32.unpack_from(chunk, 4)[0]
        elif k == 0x0016:
            closing["s2c"].append(U16.unpack_from(b, 4)[0])
    for k, v, b in fc2s:
        if k == 0x0009:
            credits += I16.unpack_from(b, 1)[0]
            w["credit_frames"] += 1
        elif k == 0x0007:
            sub = b[4]
            _, off = _string(b, 5)
            (otype,) = U16.unpack_from(b, off)
            off += 2 + (8 if otype in (4, 5) else 0)
            initial_credit.setdefault(str(sub), U16.unpack_from(b, off)[0])
        elif k == 0x0002:
            entries, records = _publish_records(v, b)
            w["published_entries"] += entries
            w["published_records"] += records
        elif k & 0x8000 and k != 0x8014 and len(b) >= 6:
            codes_c2s[_hex2(U16.unpack_from(b, 4)[0])] += 1
        elif k == 0x0016:
            closing["c2s"].append(U16.unpack_from(b, 4)[0])
    if w["delivered_chunks"]:
        out["delivered_chunks"] = w["delivered_chunks"]
        out["delivered_records"] = w["delivered_records"]
    if w["credit_frames"]:
        out["credits_granted"] = credits
    if initial_credit:
        out["initial_credit"] = initial_credit
    if codes:
        out["codes"] = dict(sorted(codes.items()))
    if codes_c2s:
        out["codes_c2s"] = dict(sorted(codes_c2s.items()))
    if closing["c2s"] or closing["s2c"]:
        out["closing_codes"] = {d: v for d, v in closing.items() if v}
    out["_wire"] = dict(w)
    return out


def build_truth(rec: Recorder, meta: dict) -> dict:
    """Truth JSON for one scenario; raises AssertionError when API and bytes disagree."""
    conns = []
    by_port = {}
    for c in rec.conns:
        d = {"client_port": c.client_port, "server_port": c.server_port}
        if c.role:
            d["role"] = c.role
        d.update(wire_counts(c.c2s, c.s2c))
        d["opened_ns"] = c.opened_ns
        if c.closed_ns:
            d["closed_ns"] = c.closed_ns
        # how the client ended it: "protocol Close" when it wrote a Close frame
        wrote_close = any(k == 0x0016 for k, _, _ in split_frames(c.c2s)[0])
        # "none": the client never closed it (the broker did, or the process ended)
        d["client_close"] = "protocol" if wrote_close else ("tcp" if c.close_kind else "none")
        d.update(c.extra)
        conns.append(d)
        by_port[c.client_port] = d

    # attach API counts; with no port: to the single connection that carries the traffic
    for port, counts in rec.api:
        if port is None:
            need = "published_records" if "published" in counts else "delivered_chunks"
            cands = [d for d in conns if d["_wire"].get(need)]
            if len(cands) != 1:
                raise AssertionError("cannot attach %r: %d candidate connections" % (counts, len(cands)))
            d = cands[0]
        else:
            d = by_port[port]
        for k, v in counts.items():
            if v == {} or v == []:
                continue
            if isinstance(v, dict):
                dd = d.setdefault(k, {})
                for kk, vv in v.items():
                    dd[kk] = dd.get(kk, 0) + vv
            elif isinstance(v, list):
                d.setdefault(k, []).extend(v)
            else:
                d[k] = d.get(k, 0) + v

    # cross-checks: what the client API says must match what the client's bytes say
    for d in conns:
        w = d.pop("_wire")
        if "published" in d and d["published"] != w.get("published_records", 0):
            raise AssertionError("port %d: API published %d, Publish frames carry %d records"
                                 % (d["client_port"], d["published"], w.get("published_records", 0)))
        if "confirmed" in d and d["confirmed"] != w.get("confirmed_ids", 0):
            raise AssertionError("port %d: API confirmed %d, PublishConfirm frames carry %d ids"
                                 % (d["client_port"], d["confirmed"], w.get("confirmed_ids", 0)))
        for code, n in d.get("errored", {}).items():
            if w.get("errored:" + code, 0) != n:
                raise AssertionError("port %d: API errored %s x%d, PublishError frames say %d"
                                     % (d["client_port"], code, n, w.get("errored:" + code, 0)))
        # no client API to ask (raw client): counted from the client's own bytes instead
        from_bytes = []
        if w.get("published_records") and "published" not in d:
            d["published"] = w["published_records"]
            from_bytes.append("published")
        if w.get("confirmed_ids") and "confirmed" not in d:
            d["confirmed"] = w["confirmed_ids"]
            from_bytes.append("confirmed")
        errs = {k.split(":", 1)[1]: v for k, v in w.items() if k.startswith("errored:")}
        if errs and "errored" not in d:
            d["errored"] = errs
            from_bytes.append("errored")
        if from_bytes:
            d["counted_from_client_bytes"] = from_bytes
        if w.get("published_entries"):
            d["publishing_ids"] = w["published_entries"]
    seen = set()
    for c in rec.conns:
        for data in (c.c2s, c.s2c):
            for k, v, _ in split_frames(data)[0]:
                name = COMMAND_NAMES.get(k & 0x7FFF, "0x%04x" % (k & 0x7FFF))
                seen.add(name + (" v%d" % v if v != 1 else ""))
    truth = dict(meta)
    truth["commands"] = sorted(seen)
    truth["connections"] = conns
    truth["notes"] = rec.notes
    return truth
