"""A minimal blocking Stream-protocol client for the corpus (127.0.0.1 only).

It sends what no PyPI client here sends (Deliver v2 negotiation, StreamStats, explicit error
cases, Credit to an unknown subscription...).  Frames are ENCODED with our codec
(``make_record``/``encode_record``); the read side uses ``decode_frame`` only to drive the
conversation.  The truth is not taken from those decoded records: every byte written and
read goes through ``truthlib.ConnRecord`` and is counted by truthlib's own splitter.
"""
from __future__ import annotations

import socket
import time

from streamdissect.protocols.stream import decode_frame, encode_record, make_record

HOST = "127.0.0.1"


class RawClient:
    def __init__(self, rec, port: int, role: str = ""):
        self.sock = socket.create_connection((HOST, port), timeout=10)
        rec.role(role)
        self.conn = rec.new_conn(self.sock.getsockname()[1], port)
        self.buf = bytearray()
        self.corr = 0
        self.backlog: list = []  # frames read while waiting for something else
        self.heartbeat = 0

    # -- writing
    def send(self, command: str, *, response: bool = False, version: int = 1, **fields) -> None:
        data = encode_record(make_record(command, response=response, version=version, **fields))
        self.sock.sendall(data)
        self.conn.wrote(data)

    def request(self, command: str, **fields):
        """Send a request with the next correlation id and return its response record."""
        self.corr += 1
        corr = self.corr
        self.send(command, correlation_id=corr, **fields)
        return self.wait(lambda r: r.response and r.correlation_id == corr)

    # -- reading
    def _recv(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        if not data:
            raise EOFError("broker closed the connection")
        self.conn.read(data)
        self.buf += data
        return True

    def _next_frame(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                size = int.from_bytes(self.buf[:4], "big")
                if len(self.buf) >= 4 + size:
                    frame = bytes(self.buf[: 4 + size])
                    del self.buf[: 4 + size]
                    return decode_frame(frame)
            left = deadline - time.monotonic()
            if left <= 0 or not self._recv(left):
                return None

    def wait(self, pred, timeout: float = 10.0):
        """First frame (backlog first) for which pred(record) holds; others stay in backlog."""
        for i, r in enumerate(self.backlog):
            if pred(r):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            r = self._next_frame(max(0.0, deadline - time.monotonic()))
            if r is None:
                raise TimeoutError("no matching frame within %ss" % timeout)
            if pred(r):
                return r
            self.backlog.append(r)

    def collect(self, pred, n: int, timeout: float = 10.0) -> list:
        return [self.wait(pred, timeout) for _ in range(n)]

    def drain(self, quiet: float = 0.3) -> None:
        """Read whatever the broker still sends until it is quiet for ``quiet`` seconds."""
        try:
            while self._recv(quiet):
                pass
        except EOFError:
            pass

    # -- conversation pieces
    def handshake(self, user: str = "guest", password: str = "guest", heartbeat: int = 60,
                  frame_max: int = 1048576, tune_reply_as_response: bool = False) -> None:
        self.request("PeerProperties", properties={
            "product": "streamdissect corpus raw client", "connection_name": self.conn.role or "raw"})
        self.request("SaslHandshake")
        sasl = b"\0" + user.encode() + b"\0" + password.encode()
        resp = self.request("SaslAuthenticate", mechanism="PLAIN", sasl_data=sasl)
        if resp.code != 1:
            return
        tune = self.wait(lambda r: r.command == "Tune")
        self.heartbeat = min(heartbeat, tune.heartbeat) if tune.heartbeat else heartbeat
        # the Java client answers Tune with key 0x8014, rstream and rbfly with 0x0014
        self.send("Tune", response=tune_reply_as_response,
                  frame_max=min(frame_max, tune.frame_max), heartbeat=self.heartbeat)
        self.request("Open", virtual_host="/")

    def close(self) -> None:
        """Protocol Close, then read to EOF and close the socket."""
        self.request("Close", closing_code=1, closing_reason="OK")
        self.drain(1.0)
        self._shut("close")

    def drop(self) -> None:
        """TCP close without a protocol Close (after draining what is in flight)."""
        self.drain(0.3)
        self._shut("abort")

    def _shut(self, kind: str) -> None:
        self.conn.close_kind = kind
        self.sock.close()
        self.conn.closed_ns = time.time_ns()
