#!/usr/bin/env python3
"""Record the RocketMQ captures: ``python captures/rocketmq/record.py`` (all) or ``... NAME ...``.

Each scenario runs real clients of the RocketMQ kit (a real Apache RocketMQ 4.9.8 name server
on 127.0.0.1:9876 and broker on 127.0.0.1:10911) between a tcpdump start and stop on lo,
and writes NAME.pcap (the scenario's own connections) and NAME.truth.json: what the clients
themselves wrote down about what they sent and got (the Java and ali-ons clients' --trace
files, the C++ client's --out file, the raw client's own log), never anything streamdissect
made. The broker's registration comes first, since it happens when the broker starts; its
unregistration last (rmq-broker-stop stops the servers); otherwise the servers are stopped
at the end (unless --keep-servers).

Where things are (options, else environment variables, else the default):
  --kit   RMQ_KIT    the kit's home (rmq.sh, clients/)       [/work/shared/rocketmq]
  --work  RMQ_WORK   its work directory (store, logs, venv)  [/tmp/rocketmq-work]
  --java  RMQ_JAVA   the Java client launcher                [KIT/clients/java/run.sh]
  --cpp   RMQ_CPP    the C++ (PyPI rocketmq) client launcher [KIT/clients/cpp/run.sh]
  --js    RMQ_JS     the ali-ons client launcher             [KIT/clients/js/run.sh]
  --cpp-python RMQ_CPP_PYTHON  Python with the rocketmq wheel, for cpp_consumer.py
                                                          [WORK/venv/bin/python]
Needs root (tcpdump on lo) and the kit set up (KIT/setup.sh).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from make import tcpdump_start, tcpdump_stop  # noqa: E402  (captures/make.py's, shared)
from remoting_client import RawRemoting  # noqa: E402

NAMESRV, BROKER = 9876, 10911
PCAP_FILTER = "tcp port %d or tcp port %d" % (NAMESRV, BROKER)
MAX_ONE = 1_000_000
SERVER = "Apache RocketMQ 4.9.8 (the kit's name server and broker, built from rocketmq-all-4.9.8)"


class Kit:
    """The RocketMQ kit: its servers and clients, run as subprocesses."""

    def __init__(self, home: str, work: str, java: str, cpp: str, js: str, scratch: Path):
        self.home, self.work = Path(home), Path(work)
        self.java_run, self.cpp_run, self.js_run = java, cpp, js
        self.cpp_python = str(self.work / "venv" / "bin" / "python")
        self.scratch = scratch
        self.env = dict(os.environ, RMQ_WORK=str(self.work))

    def rmq(self, *args: str, fresh: bool = False) -> str:
        env = dict(self.env, RMQ_FRESH="1") if fresh else self.env
        out = subprocess.run(["bash", str(self.home / "rmq.sh"), *args], env=env,
                             capture_output=True, text=True, timeout=180)
        if out.returncode and args[0] != "status":
            raise SystemExit("rmq.sh %s failed:\n%s%s" % (" ".join(args), out.stdout, out.stderr))
        return out.stdout

    def running(self) -> bool:
        return subprocess.run(["bash", str(self.home / "rmq.sh"), "status"], env=self.env,
                              capture_output=True).returncode == 0

    def create_topic(self, topic: str, queues: int = 4) -> None:
        self.rmq("admin", "updateTopic", "-n", "127.0.0.1:%d" % NAMESRV, "-c", "DefaultCluster",
                 "-t", topic, "-r", str(queues), "-w", str(queues))

    def client(self, launcher: str, args: list[str], report: str, flag: str = "--trace",
               background: bool = False, timeout: float = 120):
        """Run a client with its report file (the client writes it); returns the report, or
        (when `background`) a callable that waits for the client and returns it. A client
        still running after `timeout` seconds is an error."""
        path = self.scratch / report
        cmd = ["bash", launcher, *args, flag, str(path)]
        print("   $", " ".join(cmd[1:]), flush=True)
        proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

        def finish() -> dict:
            out, _ = proc.communicate(timeout=timeout)
            if not path.exists():
                raise SystemExit("client wrote no report (exit %d):\n%s" % (proc.returncode, out))
            data = json.loads(path.read_text())
            data["exitStatus"] = proc.returncode
            data["output"] = [line for line in out.splitlines()
                              if line.startswith(("SEND", "GOT", "done", "FAIL", "ERR"))]
            return data

        return finish if background else finish()

    def java(self, cls: str, *args: str, report: str, background: bool = False,
             timeout: float = 120):
        return self.client(self.java_run, [cls, *args], report, background=background,
                           timeout=timeout)

    def cpp(self, role: str, *args: str, report: str, background: bool = False):
        return self.client(self.cpp_run, [role, *args], report, "--out", background)

    def cpp_consumer(self, *args: str, report: str) -> dict:
        """The C++ push consumer through cpp_consumer.py (the kit's own writes no report
        when messages come: see there), with the kit's venv Python."""
        path = self.scratch / report
        cmd = [self.cpp_python, str(HERE / "cpp_consumer.py"), *args, "--out", str(path)]
        print("   $", " ".join(cmd), flush=True)
        out = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        data = json.loads(path.read_text())
        data["exitStatus"] = out.returncode
        data["output"] = [line for line in out.stdout.splitlines()
                          if line.startswith(("GOT", "done"))]
        return data

    def js(self, role: str, *args: str, report: str, background: bool = False):
        return self.client(self.js_run, [role, *args], report, background=background)


def client_entry(name: str, kind: str, report: dict, fails: bool = False) -> dict:
    """One client of a scenario in the truth: `kind` says whose report format it is
    (java-trace, js-trace: frame by frame; cpp-out: send results and connections; raw: the
    raw client's own frame log); `fails`: the scenario means it to fail."""
    return {"name": name, "kind": kind, "fails": fails, "report": report}


# ---------------------------------------------------------------------------------------
# scenarios: NAME -> (what it shows, prepare(kit, topic) before the capture, run(kit, topic))


def _nothing(kit: Kit, topic: str) -> None:
    return None


def _topic_of(queues: int):
    """A `prepare` that makes the topic (through mqadmin) before the capture starts."""
    def make(kit: Kit, topic: str) -> None:
        kit.create_topic(topic, queues)

    return make


def java_json(kit: Kit, topic: str) -> tuple[list, dict]:
    producer = kit.java("RmqProducer", "--topic", topic, "--count", "5", "--tags", "TagA,TagB",
                        report="producer.json")
    consumer = kit.java("RmqConsumer", "--topic", topic, "--mode", "lite", "--expect", "5",
                        "--timeout", "30", report="consumer.json")
    return [client_entry("producer", "java-trace", producer),
            client_entry("consumer", "java-trace", consumer)], {}


def java_rocketmq_batch(kit: Kit, topic: str) -> tuple[list, dict]:
    producer = kit.java("RmqProducer", "--topic", topic, "--count", "6", "--batch", "4",
                        "--batches", "1", "--serialize", "ROCKETMQ", "--keys", "bk",
                        report="producer.json")
    consumer = kit.java("RmqConsumer", "--topic", topic, "--mode", "lite", "--expect", "6",
                        "--timeout", "30", "--serialize", "ROCKETMQ", report="consumer.json")
    return [client_entry("producer", "java-trace", producer),
            client_entry("consumer", "java-trace", consumer)], {}


def cpp_clients(kit: Kit, topic: str) -> tuple[list, dict]:
    producer = kit.cpp("prod", "--topic", topic, "--count", "3", report="producer.json")
    consumer = kit.cpp_consumer("--topic", topic, "--expect", "3", "--timeout", "20",
                                report="consumer.json")
    return [client_entry("producer", "cpp-out", producer),
            client_entry("consumer", "cpp-out", consumer)], {}


def js_clients(kit: Kit, topic: str) -> tuple[list, dict]:
    producer = kit.js("prod", "--topic", topic, "--count", "3", "--tags", "TagA,TagB",
                      report="producer.json")
    consumer = kit.js("cons", "--topic", topic, "--expect", "3", "--timeout", "20",
                      report="consumer.json")
    return [client_entry("producer", "js-trace", producer),
            client_entry("consumer", "js-trace", consumer)], {}


def java_compressed(kit: Kit, topic: str) -> tuple[list, dict]:
    text = kit.java("RmqProducer", "--topic", topic, "--count", "2", "--size", "60000",
                    "--body", "text", report="producer-text.json")
    noise = kit.java("RmqProducer", "--topic", topic, "--count", "2", "--size", "120000",
                     "--body", "random", report="producer-random.json")
    consumer = kit.java("RmqConsumer", "--topic", topic, "--mode", "lite", "--expect", "4",
                        "--timeout", "30", report="consumer.json")
    return [client_entry("producer-text", "java-trace", text),
            client_entry("producer-random", "java-trace", noise),
            client_entry("consumer", "java-trace", consumer)], {}


def errors(kit: Kit, topic: str) -> tuple[list, dict]:
    log: list = []
    missing = topic + "Missing"
    names = RawRemoting(NAMESRV, log)
    names.call(105, {"topic": missing})  # GET_ROUTEINFO_BY_TOPIC: TOPIC_NOT_EXIST
    names.call(9999, timeout=3)  # a request code nobody knows: the name server is silent
    names.close()
    broker = RawRemoting(BROKER, log)
    broker.call(9999)  # the broker answers REQUEST_CODE_NOT_SUPPORTED
    send = {"producerGroup": "PG_RAW", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
            "queueId": 0, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
            "properties": "TAGS\x01raw\x02", "reconsumeTimes": 0, "unitMode": "false",
            "batch": "false"}
    broker.call(10, dict(send, topic="SCHEDULE_TOPIC_XXXX"), b"forbidden")  # a system topic
    broker.call(10, dict(send, topic=topic), b"hello from the raw client")  # queue 0 offset 0
    # sysFlag 4: the subscription is in the request (no consumer registered with the broker)
    pull = {"consumerGroup": "CG_RAW", "topic": topic, "queueId": 0, "maxMsgNums": 32,
            "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*",
            "subVersion": 0, "expressionType": "TAG"}
    broker.call(11, dict(pull, queueOffset=1_000_000))  # far beyond the queue's end
    broker.call(11, dict(pull, queueOffset=1))  # just past its last message
    broker.call(11, dict(pull, queueOffset=0))  # the message
    broker.call(11, dict(pull, sysFlag=0, queueOffset=0))  # no subscription, no consumer
    broker.call(14, {"consumerGroup": "CG_RAW_NONE", "topic": topic, "queueId": 0})
    broker.close()
    # ali-ons gives up on TOPIC_NOT_EXIST from the name server (it cannot fall back to TBW102)
    ons = kit.js("prod", "--topic", missing + "Ons", "--count", "1", report="ons.json")
    raw = {"client": "captures/rocketmq/remoting_client.py", "frames": log}
    clients = [client_entry("raw", "raw", raw),
               client_entry("ali-ons-producer", "js-trace", ons, fails=True)]
    return clients, {"missingTopic": missing}


def long_poll(kit: Kit, topic: str) -> tuple[list, dict]:
    consumer = kit.java("RmqConsumer", "--topic", topic, "--mode", "lite", "--expect", "1",
                        "--timeout", "40", report="consumer.json", background=True)
    time.sleep(6)  # the consumer's pull waits at the broker meanwhile
    sent_ms = int(time.time() * 1000)
    producer = kit.java("RmqProducer", "--topic", topic, "--count", "1", report="producer.json")
    return [client_entry("consumer", "java-trace", consumer()),
            client_entry("producer", "java-trace", producer)], {"producerStartedMs": sent_ms}


SCENARIOS = {
    "rmq-java-json": ("Java client 4.9.8, JSON headers: DefaultMQProducer sends 5 messages "
                      "(SEND_MESSAGE_V2, the topic auto-created from TBW102 after "
                      "TOPIC_NOT_EXIST), then DefaultLitePullConsumer pulls them",
                      _nothing, java_json),
    "rmq-java-rocketmq-batch": ("Java client 4.9.8, ROCKETMQ binary headers: one "
                                "SEND_BATCH_MESSAGE of 4 messages and 2 single sends, "
                                "pulled back by a lite pull consumer (binary headers too)",
                                _nothing, java_rocketmq_batch),
    "rmq-cpp": ("C++ client (PyPI rocketmq 0.4.4, librocketmq): 3 sends, then a push "
                "consumer", _nothing, cpp_clients),
    "rmq-js": ("ali-ons 3.12.0 (JavaScript): 3 sends, then a push consumer; the topic is "
               "made before the capture", _topic_of(4), js_clients),
    "rmq-java-compressed": ("Java client: 2 text bodies of 60,000 bytes and 2 random bodies "
                            "of 120,000 bytes, zlib-compressed by the client (over 4 KB), "
                            "each frame over several segments; pulled back",
                            _nothing, java_compressed),
    "rmq-errors": ("errors from a raw JSON client: the route of a missing topic (name "
                   "server), an unknown request code 9999 to both servers (the name server "
                   "does not answer), a send to the forbidden SCHEDULE_TOPIC_XXXX, one good "
                   "send, pulls far beyond and just past the queue's end, a good pull, a "
                   "pull without subscription by an unknown group, the offset of a group "
                   "that never committed; then ali-ons on a missing topic",
                   _topic_of(1), errors),
    "rmq-long-poll": ("a lite pull consumer's pull held by the broker (long polling) on an "
                      "empty one-queue topic until a producer sends, about 6 s later",
                      _topic_of(1), long_poll),
}
REGISTER = "rmq-broker-register"
STOP = "rmq-broker-stop"
ALL = [REGISTER, *SCENARIOS, STOP]


# ---------------------------------------------------------------------------------------
# tcpdump around a scenario


def opened_client_ports(raw: Path) -> list[int]:
    """Client ports of the connections whose SYN is in the capture."""
    out = subprocess.run(["tcpdump", "-r", str(raw), "-nn",
                          "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn"],
                         capture_output=True, text=True, check=True).stdout
    return sorted({int(m.group(1)) for m in re.finditer(r"\.(\d+) > [\d.]+\.\d+:", out)})


def seen_client_ports(raw: Path) -> list[int]:
    """Client ports of every connection in the capture, with or without its SYN."""
    out = subprocess.run(["tcpdump", "-r", str(raw), "-nn"], capture_output=True, text=True,
                         check=True).stdout
    ports = {int(p) for m in re.finditer(r"\.(\d+) > [\d.]+\.(\d+):", out) for p in m.groups()}
    return sorted(ports - {NAMESRV, BROKER})


def traced_ports(clients: list[dict]) -> set[int]:
    ports = set()
    for c in clients:
        report = c["report"]
        ports.update(x["clientPort"] for x in report.get("connections", []))
        ports.update(f["clientPort"] for f in report.get("frames", []) if "clientPort" in f)
    return ports


def keep_connections(raw: Path, pcap: Path, ports: list[int]) -> None:
    flt = " or ".join("port %d" % p for p in ports)
    subprocess.run(["tcpdump", "-r", str(raw), "-w", str(pcap), flt], check=True,
                   stderr=subprocess.DEVNULL)


def record(kit: Kit, name: str, out_dir: Path, suffix: str) -> None:
    description, prepare, run = SCENARIOS[name]
    topic = "Sd" + "".join(w.title() for w in name.split("-")[1:]) + suffix
    prepare(kit, topic)
    with tempfile.TemporaryDirectory(prefix="sd-rmq-") as tmp:
        kit.scratch = Path(tmp)
        raw = Path(tmp) / "raw.pcap"
        dump = tcpdump_start(raw, PCAP_FILTER)
        started = int(time.time() * 1000)
        try:
            clients, notes = run(kit, topic)
        finally:
            ended = int(time.time() * 1000)
            dropped = tcpdump_stop(dump, raw)
        ports = opened_client_ports(raw)
        write(out_dir, name, raw, ports, {
            "capture": name + ".pcap", "scenario": description, "server": SERVER,
            "topic": topic, "started_ms": started, "ended_ms": ended,
            "notes": notes, "clients": clients}, dropped)


def broker_said(kit: Kit, log_from: int = 0) -> dict:
    """What the broker says of itself: its configuration, and its log from byte `log_from`
    on (its registrations with the name server, its unregistration when it stops)."""
    with open(kit.work / "logs" / "rocketmqlogs" / "broker.log", "rb") as f:
        f.seek(log_from)
        log = f.read().decode(errors="replace")
    conf = dict(line.split("=", 1) for line in
                (kit.work / "home" / "broker.conf").read_text().splitlines() if "=" in line)
    return {"client": "the kit's broker (broker-a), as its log and configuration say",
            "brokerName": conf["brokerName"], "brokerClusterName": conf["brokerClusterName"],
            "brokerId": int(conf["brokerId"]), "listenPort": int(conf["listenPort"]),
            "namesrvAddr": conf["namesrvAddr"],
            "registeredOk": re.findall(r"register broker\[\d+\]to name server \S+ OK", log),
            "unregisteredOk": re.findall(r"unregisterBroker OK, NamesrvAddr: \S+", log)}


def broker_log_size(kit: Kit) -> int:
    path = kit.work / "logs" / "rocketmqlogs" / "broker.log"
    return path.stat().st_size if path.exists() else 0


def record_register(kit: Kit, out_dir: Path) -> None:
    """The broker's start: its connection to the name server and REGISTER_BROKER (the
    broker is the client here; its truth is what its own log and configuration say)."""
    with tempfile.TemporaryDirectory(prefix="sd-rmq-") as tmp:
        raw = Path(tmp) / "raw.pcap"
        dump = tcpdump_start(raw, PCAP_FILTER)
        started = int(time.time() * 1000)
        try:
            said = kit.rmq("start", fresh=True)
            time.sleep(3)
        finally:
            ended = int(time.time() * 1000)
            dropped = tcpdump_stop(dump, raw)
        names_log = (kit.work / "logs" / "rocketmqlogs" / "namesrv.log").read_text(
            errors="replace")
        broker = broker_said(kit)
        broker["bootLine"] = [line for line in said.splitlines() if "boot success" in line]
        # the name server's log of the same registration: the topics it was told of
        broker["topicsRegistered"] = sorted(set(re.findall(r"new topic registered, (\S+) ",
                                                           names_log)))
        truth = {
            "capture": REGISTER + ".pcap",
            "scenario": "the broker starts: it connects to the name server and registers "
                        "(REGISTER_BROKER 103, its topic configuration as the body)",
            "server": SERVER, "started_ms": started, "ended_ms": ended, "notes": {},
            "clients": [client_entry("broker", "broker-log", broker)],
        }
        write(out_dir, REGISTER, raw, opened_client_ports(raw), truth, dropped)


def record_stop(kit: Kit, out_dir: Path, suffix: str) -> None:
    """A send to a new topic (the broker creates it and registers again), then the servers
    stop: the broker's UNREGISTER_BROKER. The broker's connection to the name server began
    before the capture (no SYN in it): every connection in the capture is kept."""
    topic = "SdBrokerStop" + suffix
    with tempfile.TemporaryDirectory(prefix="sd-rmq-") as tmp:
        kit.scratch = Path(tmp)
        raw = Path(tmp) / "raw.pcap"
        log_from = broker_log_size(kit)
        dump = tcpdump_start(raw, PCAP_FILTER)
        started = int(time.time() * 1000)
        try:
            producer = kit.java("RmqProducer", "--topic", topic, "--count", "1",
                                report="producer.json")
            time.sleep(1)
            kit.rmq("stop")
        finally:
            ended = int(time.time() * 1000)
            dropped = tcpdump_stop(dump, raw)
        truth = {
            "capture": STOP + ".pcap",
            "scenario": "a Java producer sends to a new topic (the broker creates it from "
                        "TBW102 and registers with the name server again), then the servers "
                        "stop: the broker's UNREGISTER_BROKER (104); the broker's connection "
                        "to the name server starts before the capture (no SYN)",
            "server": SERVER, "topic": topic, "started_ms": started, "ended_ms": ended,
            "notes": {},
            "clients": [client_entry("producer", "java-trace", producer),
                        client_entry("broker", "broker-log", broker_said(kit, log_from))],
        }
        write(out_dir, STOP, raw, seen_client_ports(raw), truth, dropped)


def write(out_dir: Path, name: str, raw: Path, ports: list[int], truth: dict,
          dropped: int) -> None:
    problems = []
    missing = traced_ports(truth["clients"]) - set(ports)
    if missing:
        problems.append("client ports %s have no SYN in the capture" % sorted(missing))
    if dropped:
        problems.append("tcpdump: %d packets dropped by the kernel" % dropped)
    for c in truth["clients"]:
        status = c["report"].get("exitStatus", 0)
        if bool(status) != c["fails"]:
            problems.append("client %s exited with %s" % (c["name"], status))
    pcap = out_dir / (name + ".pcap")
    keep_connections(raw, pcap, ports)
    (out_dir / (name + ".truth.json")).write_text(json.dumps(truth, indent=1) + "\n")
    size = pcap.stat().st_size
    if size > MAX_ONE:
        problems.append("capture is %d bytes (> %d)" % (size, MAX_ONE))
    print("%-28s %s  %d connections  %d bytes" % (name, "OK" if not problems else "FAILED",
                                                  len(ports), size), flush=True)
    for p in problems:
        print("   ", p, flush=True)
    if problems:
        raise SystemExit("%s: the recording is not good" % name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ.get
    ap.add_argument("names", nargs="*", help="captures to record (default: all): %s" % ALL)
    ap.add_argument("--kit", default=env("RMQ_KIT", "/work/shared/rocketmq"))
    ap.add_argument("--work", default=env("RMQ_WORK", "/tmp/rocketmq-work"))
    ap.add_argument("--java", default=env("RMQ_JAVA"))
    ap.add_argument("--cpp", default=env("RMQ_CPP"))
    ap.add_argument("--js", default=env("RMQ_JS"))
    ap.add_argument("--cpp-python", default=env("RMQ_CPP_PYTHON"))
    ap.add_argument("--out", default=str(HERE))
    ap.add_argument("--keep-servers", action="store_true", help="leave the servers running")
    a = ap.parse_args()
    names = a.names or ALL
    unknown = set(names) - set(ALL)
    if unknown:
        raise SystemExit("unknown captures: %s (known: %s)" % (sorted(unknown), ALL))
    clients = Path(a.kit) / "clients"
    kit = Kit(a.kit, a.work, a.java or str(clients / "java" / "run.sh"),
              a.cpp or str(clients / "cpp" / "run.sh"), a.js or str(clients / "js" / "run.sh"),
              Path(tempfile.gettempdir()))
    if a.cpp_python:
        kit.cpp_python = a.cpp_python
    out_dir = Path(a.out)
    if REGISTER in names and kit.running():
        raise SystemExit("%s records the servers' start: stop them first (rmq.sh stop)" % REGISTER)
    started_here = not kit.running()
    try:
        if REGISTER in names:
            record_register(kit, out_dir)
        elif started_here:
            kit.rmq("start", fresh=True)
        suffix = time.strftime("%H%M%S")
        for name in names:
            if name in SCENARIOS:
                record(kit, name, out_dir, suffix)
        if STOP in names:
            record_stop(kit, out_dir, suffix)
    finally:
        if started_here and not a.keep_servers and kit.running():
            print(kit.rmq("stop"), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
