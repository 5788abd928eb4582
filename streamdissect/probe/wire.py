"""The socket under a session: connect, TLS, send and receive within deadlines, and a record
of every byte each way with its time (what `--pcap` writes). Knows nothing of frames."""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass, field

from streamdissect.probe.errors import ProbeError
from streamdissect.probe.uri import Target

RECV_SIZE = 65536


@dataclass(frozen=True)
class TlsOptions:
    cafile: str | None = None  # trust these CAs instead of the system's
    certfile: str | None = None  # a client certificate (then SASL EXTERNAL is used)
    keyfile: str | None = None
    verify: bool = True  # certificate and host name verification

    def context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.verify:
            if self.cafile:
                context.load_verify_locations(cafile=self.cafile)
            else:
                context.load_default_certs()
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.certfile:
            context.load_cert_chain(self.certfile, self.keyfile)
        return context


@dataclass
class Chunk:
    ts_ns: int  # wall clock (time.time_ns), as capture tools stamp packets
    direction: str  # "c2s" or "s2c"
    data: bytes


@dataclass
class Wire:
    sock: socket.socket
    client: tuple  # (address, port) of our end
    server: tuple
    opened_ns: int
    tls: dict | None = None  # version, cipher, peer certificate subject
    chunks: list[Chunk] = field(default_factory=list)
    closed_ns: int | None = None
    closed_by: str | None = None  # "client" or "server"

    @classmethod
    def open(cls, target: Target, timeout: float, tls: TlsOptions | None = None) -> Wire:
        where = f"{target.host}:{target.port}"
        opened_ns = time.time_ns()
        try:
            sock = socket.create_connection((target.host, target.port), timeout=timeout)
        except TimeoutError:
            raise ProbeError("connect", f"no answer from {where} within {timeout:g} s",
                             "timeout") from None  # fmt: skip
        except ConnectionRefusedError:
            raise ProbeError("connect", f"connection refused by {where} (nothing listens "
                             "there?)", "connection") from None  # fmt: skip
        except socket.gaierror as exc:
            raise ProbeError("connect", f"cannot resolve {target.host}: {exc.strerror}",
                             "connection") from None  # fmt: skip
        except OSError as exc:
            raise ProbeError("connect", f"cannot connect to {where}: {exc.strerror or exc}",
                             "connection") from None  # fmt: skip
        # a request is often two small writes (Tune then Open): without this, Nagle's
        # algorithm holds the second until the first is acknowledged (~40 ms on loopback)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client, server = sock.getsockname()[:2], sock.getpeername()[:2]
        info = None
        if target.tls:
            sock, info = _tls_handshake(sock, target, timeout, tls or TlsOptions())
        return cls(sock, client, server, opened_ns, info)

    def send(self, data: bytes, step: str, deadline: float, shown: bytes | None = None) -> None:
        """Send all of `data` before the deadline (time.monotonic). `shown` is what the
        record keeps instead (the same length: a password masked)."""
        sent_ns = time.time_ns()  # (before: an answer may come before sendall returns)
        try:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            self.sock.sendall(data)
        except TimeoutError:
            raise ProbeError(step, "the broker does not read what is sent (send timed out)",
                             "timeout") from None  # fmt: skip
        except OSError as exc:
            self.mark_closed("server")
            raise ProbeError(step, f"the connection broke while sending: "
                             f"{exc.strerror or exc}", "closed") from None  # fmt: skip
        self.chunks.append(Chunk(sent_ns, "c2s", data if shown is None else shown))

    def recv(self, step: str, until: float) -> bytes | None:
        """Bytes that came before `until` (time.monotonic), None if none came."""
        try:
            self.sock.settimeout(max(until - time.monotonic(), 0.001))
            data = self.sock.recv(RECV_SIZE)
        except TimeoutError:
            return None
        except ssl.SSLError as exc:
            self.mark_closed("server")
            raise ProbeError(step, f"TLS error: {exc.reason or exc}", "tls") from None
        except OSError as exc:
            self.mark_closed("server")
            raise ProbeError(step, f"the connection broke: {exc.strerror or exc}",
                             "closed") from None  # fmt: skip
        if not data:
            self.mark_closed("server")
            raise ProbeError(step, "the broker closed the connection", "closed")
        self.chunks.append(Chunk(time.time_ns(), "s2c", data))
        return data

    def mark_closed(self, by: str) -> None:
        if self.closed_ns is None:
            self.closed_ns, self.closed_by = time.time_ns(), by

    def close(self, by: str = "client") -> None:
        self.mark_closed(by)
        try:
            self.sock.close()
        except OSError:
            pass


def _tls_handshake(sock: socket.socket, target: Target, timeout: float,
                   options: TlsOptions) -> tuple[ssl.SSLSocket, dict]:  # fmt: skip
    try:
        context = options.context()
    except (OSError, ssl.SSLError) as exc:
        sock.close()
        raise ProbeError("tls", f"cannot load the CA or client certificate files: "
                         f"{getattr(exc, 'strerror', None) or exc}", "usage") from None  # fmt: skip
    try:
        sock.settimeout(timeout)
        tls = context.wrap_socket(sock, server_hostname=target.host)
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise ProbeError("tls", f"certificate verification failed: {exc.verify_message} "
                         "(give the CA with --cafile)", "certificate") from None  # fmt: skip
    except TimeoutError:
        sock.close()
        raise ProbeError("tls", f"no TLS handshake within {timeout:g} s", "timeout") from None
    except ssl.SSLError as exc:
        sock.close()
        raise ProbeError("tls", f"TLS handshake failed: {exc.reason or exc}", "tls") from None
    except OSError as exc:
        sock.close()
        raise ProbeError("tls", f"the connection broke during the TLS handshake: "
                         f"{exc.strerror or exc}", "tls") from None  # fmt: skip
    peer = tls.getpeercert() or {}
    subject = ", ".join("=".join(pair) for rdn in peer.get("subject", ()) for pair in rdn)
    return tls, {"version": tls.version(), "cipher": (tls.cipher() or (None,))[0],
                 "peer_subject": subject or None}  # fmt: skip
