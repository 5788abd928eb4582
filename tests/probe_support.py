"""What the probe and compare tests share: the brokers' URIs and certificates, running the
CLI, the brokers' stream lists read with rabbitmqctl (not with our code), a stream made and
filled by a real client (rstream)."""

from __future__ import annotations

import asyncio
import filecmp
import json
import os
import select
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TLS = ROOT / ".tls"  # made by scripts/brokers.sh start
CA, CLIENT_CERT, CLIENT_KEY = TLS / "ca.pem", TLS / "client.pem", TLS / "client.key"
CLI = [sys.executable, "-m", "streamdissect.cli"]
PLAIN = {"3.10": 5552, "4.0": 5553}
TLS_PORTS = {"3.10": 5551, "4.0": 5554}
CHROOT = "/srv/trixie"
BROKERS_SCRIPT = ROOT / "scripts" / "brokers.sh"


def certificates_differ() -> str | None:
    """Why `scripts/brokers.sh start` run from this checkout would restart the shared brokers
    with other certificates, or None. It restarts a broker whose copies of ca.pem, server.pem
    and server.key differ from its certificate folder's (this checkout's .tls: a fresh
    worktree has none, and the script would make new ones), or when one expires in a day."""
    tls = Path(os.environ.get("STREAMDISSECT_TLS_DIR", TLS))
    chroot = os.environ.get("STREAMDISSECT_CHROOT", CHROOT)
    for name in ("ca.pem", "server.pem", "client.pem"):
        valid = subprocess.run(["openssl", "x509", "-checkend", "86400", "-noout", "-in",
                                str(tls / name)], capture_output=True, check=False)  # fmt: skip
        if valid.returncode:
            return f"{tls / name} is missing or expires within a day"
    for held in (Path("/etc/rabbitmq/tls"), Path(chroot) / "etc/rabbitmq/tls"):
        for name in ("ca.pem", "server.pem", "server.key"):
            same = (held / name).exists() and filecmp.cmp(tls / name, held / name, shallow=False)
            if not same:
                return f"{tls / name} is not the running broker's {held / name}"
    return None


def start_brokers_again() -> subprocess.CompletedProcess:
    """`scripts/brokers.sh start` with the brokers up, only where it cannot restart them with
    other certificates (other people's tests use them): otherwise the test fails, saying why
    (a worktree: link its .tls to the checkout's that started the brokers)."""
    import pytest

    if reason := certificates_differ():
        pytest.fail(f"not running brokers.sh start, it would restart the brokers: {reason}")
    return subprocess.run(["bash", str(BROKERS_SCRIPT), "start"], capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip


def uri(port: int, user: str = "guest", password: str = "guest", tls: bool = False) -> str:
    scheme = "rabbitmq-stream+tls" if tls else "rabbitmq-stream"
    return f"{scheme}://{user}:{password}@127.0.0.1:{port}/%2F"


def run(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)  # fmt: skip


def run_json(*args: str) -> dict:
    result = run(*args, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def no_traceback(result: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr.strip().splitlines()) <= 3, result.stderr


def rabbitmqctl(broker: str, *args: str) -> str:
    """rabbitmqctl of the 3.10 (host) or 4.0 (chroot) broker, as scripts/brokers.sh runs it."""
    epmd = "" if broker == "3.10" else "ERL_EPMD_PORT=4370 "
    command = f"cd /var/lib/rabbitmq; {epmd}/usr/lib/rabbitmq/bin/rabbitmqctl " + " ".join(args)
    argv = ["su", "rabbitmq", "-s", "/bin/sh", "-c", command]
    if broker != "3.10":
        argv = ["chroot", CHROOT, "/bin/sh", "-c", f"su rabbitmq -s /bin/sh -c '{command}'"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return result.stdout


def streams(broker: str) -> set[str]:
    """The broker's streams, by rabbitmqctl list_queues."""
    out = rabbitmqctl(broker, "list_queues", "--quiet", "--no-table-headers", "name", "type")
    return {line.split("\t")[0] for line in out.splitlines() if line.endswith("\tstream")}


async def _with_client(port: int, action) -> None:
    from rstream import Producer

    async with Producer("127.0.0.1", port, username="guest", password="guest") as producer:
        await action(producer)


def make_stream(port: int, messages: int = 5) -> str:
    """A stream made and filled by rstream (a real client), named sd-probe-<random>."""
    name = "sd-probe-" + uuid.uuid4().hex[:8]

    async def fill(producer) -> None:
        await producer.create_stream(name)
        for i in range(messages):
            await producer.send_wait(name, b"probe test %d" % i)

    asyncio.run(_with_client(port, fill))
    return name


def delete_stream(port: int, name: str) -> None:
    async def delete(producer) -> None:
        await producer.delete_stream(name)

    asyncio.run(_with_client(port, delete))


def wait_for_line(stream, needle: str, seconds: float) -> str:
    """The first line of a process's text pipe that holds `needle` (AssertionError after
    `seconds`, or when the pipe ends first)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([stream], [], [], left)
        if not ready:
            break
        line = stream.readline()
        if not line:
            raise AssertionError(f"the pipe ended before a line with {needle!r}")
        if needle in line:
            return line
    raise AssertionError(f"no line with {needle!r} within {seconds} s")
