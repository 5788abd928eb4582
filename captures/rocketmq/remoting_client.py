"""A tiny RocketMQ remoting client over a plain socket, for what the real clients do not
send: an unknown request code, pulls at offsets that are no good, a send to a topic the
broker forbids, a route query for a topic that does not exist.

It speaks JSON headers only and needs nothing but the standard library: a frame is
`total:i32` (what follows), `header length:i32` (high byte 0 = JSON), the JSON header, the
body. What it wrote and what it read back are recorded from its own bytes (parsed here with
`json`), never by streamdissect, so they can be a capture's ground truth.
"""
from __future__ import annotations

import json
import socket
import struct
import time

FRAME = struct.Struct(">ii")


class RawRemoting:
    """One connection to a name server or broker on 127.0.0.1; `log` gets every frame."""

    def __init__(self, port: int, log: list, timeout: float = 10.0):
        self.timeout = timeout
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.client_port = self.sock.getsockname()[1]
        self.server_port = port
        self.log = log
        self.opaque = 100
        self.pending = b""

    def call(self, code: int, ext: dict | None = None, body: bytes = b"", oneway: bool = False,
             timeout: float | None = None) -> dict | None:
        """Send a request (ext field values as strings, as the Java client sends them) and
        read its response (None for a oneway request or when none came in `timeout`)."""
        self.opaque += 1
        header = {"code": code, "language": "PYTHON", "version": 409, "opaque": self.opaque,
                  "flag": 2 if oneway else 0, "serializeTypeCurrentRPC": "JSON"}
        if ext:
            header["extFields"] = {k: str(v) for k, v in ext.items()}
        head = json.dumps(header, separators=(",", ":")).encode()
        self.sock.sendall(FRAME.pack(4 + len(head) + len(body), len(head)) + head + body)
        self._note("c->s request", header, len(body), len(head))
        if oneway:
            return None
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            return self.read()
        finally:
            self.sock.settimeout(self.timeout)

    def read(self) -> dict | None:
        try:
            while True:
                if len(self.pending) >= 4:
                    (total,) = struct.unpack_from(">i", self.pending)
                    if len(self.pending) >= 4 + total:
                        frame, self.pending = self.pending[: 4 + total], self.pending[4 + total:]
                        return self._parse(frame)
                chunk = self.sock.recv(65536)
                if not chunk:
                    return None
                self.pending += chunk
        except socket.timeout:
            return None

    def _parse(self, frame: bytes) -> dict:
        total, word = FRAME.unpack_from(frame)
        kind, length = word >> 24, word & 0xFFFFFF
        header = json.loads(frame[8 : 8 + length]) if kind == 0 else {"binary": True}
        body = frame[8 + length :]
        entry = self._note("s->c response" if header.get("flag", 0) & 1 else "s->c request",
                           header, len(body), length)
        if body and len(body) <= 4096:
            entry["bodyText"] = body.decode("utf-8", "replace")
        return entry

    def _note(self, direction: str, header: dict, body_length: int, header_length: int) -> dict:
        entry = {"t": int(time.time() * 1000), "dir": direction,
                 "clientPort": self.client_port, "serverPort": self.server_port,
                 "code": header.get("code"), "opaque": header.get("opaque"),
                 "flag": header.get("flag"), "language": header.get("language"),
                 "version": header.get("version"), "serializeType": "JSON",
                 "remark": header.get("remark"), "header": header.get("extFields") or {},
                 "headerLength": header_length, "bodyLength": body_length}
        self.log.append(entry)
        return entry

    def close(self) -> None:
        self.sock.close()
