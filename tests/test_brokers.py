"""The broker script: both real brokers up on loopback, idempotent start, right versions."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest
from probe_support import start_brokers_again

from streamdissect.protocols.stream import decode_frame, encode_record, make_record

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "brokers.sh"


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, check=False,
                          timeout=600)


def test_status_reports_both_brokers_on_loopback():
    out = run_script("status").stdout
    assert "rabbit3 up 127.0.0.1:5552" in out
    assert "rabbit4 up 127.0.0.1:5553" in out


def test_start_is_idempotent_when_running():
    started = time.monotonic()
    result = start_brokers_again()
    assert result.returncode == 0, result.stderr
    assert "rabbit3 already answers on 5552" in result.stderr
    assert "rabbit4 already answers on 5553" in result.stderr
    assert time.monotonic() - started < 30


def read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    size = int.from_bytes(head, "big")
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return head + body


@pytest.mark.parametrize("port, version_prefix", [(5552, "3.10."), (5553, "4.0.")])
def test_broker_version_from_peer_properties(port, version_prefix):
    request = make_record("PeerProperties", correlation_id=1,
                          properties={"product": "streamdissect-tests"})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_record(request))
        response = decode_frame(read_frame(sock))
    assert response.command == "PeerProperties" and response.response
    assert response.code == 1
    assert response.properties["version"].startswith(version_prefix)
    assert response.properties["product"] == "RabbitMQ"
