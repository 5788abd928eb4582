"""Every frame of the recorded RocketMQ captures, decoded and held to what the clients wrote
down (captures/rocketmq/*.truth.json): codes, opaques, flags, serializations, header fields,
remarks, body sizes, topics, queues, message counts and ids, stored messages' offsets and
sizes. Nothing expected here comes from streamdissect."""

from __future__ import annotations

import collections
import json

import pytest
from rocketmq_support import CAPTURES, DIRECTIONS, NAMES, client_port, dissect, truth

from streamdissect.protocols.rocketmq import spec
from streamdissect.protocols.rocketmq.records import RemotingCommand

TRACED = ("java-trace", "js-trace", "raw")


@pytest.fixture(scope="module")
def decoded() -> dict:
    """name -> (frames by (client port, direction, response, opaque), anomalies, frames)."""
    out = {}
    for name in NAMES:
        frames, anomalies = dissect(CAPTURES / f"{name}.pcap")
        keyed = collections.defaultdict(list)
        for e in frames:
            r = e.record
            keyed[(client_port(e.connection), e.direction, r.response, r.opaque)].append(e)
        out[name] = keyed, anomalies, frames
    return out


def test_the_corpus_is_there():
    assert set(NAMES) == {"rmq-broker-register", "rmq-broker-stop", "rmq-cpp", "rmq-errors",
                          "rmq-java-compressed", "rmq-java-json", "rmq-java-rocketmq-batch",
                          "rmq-js", "rmq-long-poll"}  # fmt: skip
    assert all((CAPTURES / f"{n}.pcap").stat().st_size < 1_000_000 for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_frame_decodes_without_anomaly(decoded, name):
    _keyed, anomalies, frames = decoded[name]
    if name == "rmq-broker-stop":  # the broker's connection began before the capture
        assert {(a.kind, a.connection.endswith(":9876")) for a in anomalies} == {
            ("midstream_start", True)}
    else:
        assert anomalies == []
    assert frames
    assert all(isinstance(e.record, RemotingCommand) and not e.record.truncated
               and e.record.body_error is None for e in frames)  # fmt: skip
    # every response is named by its request (the capture holds each connection whole)
    assert all(e.record.request_code is not None for e in frames if e.record.response)


def _text(value) -> str:
    """A traced header value as the wire's text (Java's toString)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _check_frame(f: dict, r: RemotingCommand, kind: str) -> None:
    assert r.code == f["code"]
    assert r.flag & 1 == f["flag"] & 1
    assert r.serialize_name == f["serializeType"] or f["dir"] == "c->s response"
    if f.get("language") is not None:
        assert r.language == f["language"]
    if f.get("version") is not None:
        assert r.version == f["version"]
    assert len(r.body) == f["bodyLength"]
    if f["dir"].endswith("response") and kind != "js-trace":
        assert r.remark == f.get("remark")
    if f["dir"] == "s->c response" and "requestCode" in f:
        assert r.request_code == f["requestCode"]  # the response named by its request
    traced = {k: _text(v) for k, v in f["header"].items() if v is not None}
    if f["dir"] == "s->c request":
        # the Java consumer's own StreamTypeRPCHook adds ReqT to a request once it is read
        traced.pop("ReqT", None)
    assert {k: _text(v) for k, v in r.ext.items() if k in traced} == traced
    if kind == "java-trace" and f["dir"] == "c->s request":
        assert set(r.ext) == set(traced)  # the custom header's fields are the ext fields
    if f.get("topic") is not None:
        assert (r.topic, r.queue_id, r.fields.get("sysFlag")) == (
            f["topic"], int(f["queueId"]), int(f["sysFlag"]))
    if f.get("bodyText", "").startswith("{"):
        assert r.body_json == json.loads(f["bodyText"])  # fastjson read as the client read it
    if "messages" in f:
        assert [_stored(m) for m in r.messages] == [
            (m["msgId"], m["offsetMsgId"], m["topic"], m["queueId"], m["queueOffset"],
             m["sysFlag"], m["storeSize"], m["wireBodyLength"], m["tags"], m["keys"])
            for m in f["messages"]]  # fmt: skip
        assert all(m.crc_ok for m in r.messages)


def _stored(m) -> tuple:
    return (m.msg_id, m.offset_msg_id, m.topic, m.queue_id, m.queue_offset, m.sys_flag,
            m.total_size, len(m.body), m.tags, m.keys)  # fmt: skip


def _traced_clients(name: str):
    return [c for c in truth(name)["clients"] if c["kind"] in TRACED]


@pytest.mark.parametrize("name", [n for n in NAMES if _traced_clients(n)])
def test_traced_frames_are_the_wire_frames(decoded, name):
    """Each frame a client traced is on the wire with what the client says it held, and the
    connections it traced carry no frame it did not trace."""
    keyed, _, _frames = decoded[name]
    seen = set()
    counted = 0
    for client in _traced_clients(name):
        for f in client["report"]["frames"]:
            if f["dir"] not in DIRECTIONS:  # a call the client saw no answer to
                continue
            direction, response = DIRECTIONS[f["dir"]]
            key = (f["clientPort"], direction, response, f["opaque"])
            (event,) = keyed[key]
            _check_frame(f, event.record, client["kind"])
            seen.add(key)
            counted += 1
    ports = {k[0] for k in seen}
    on_traced = {k for k in keyed if k[0] in ports}
    assert on_traced == seen and counted == len(seen) > 10


def _wire_requests(frames, code: int) -> list:
    return [e.record for e in frames if not e.record.response and e.record.code == code]


def _responses_to(decoded_name, requests_code: int) -> list[tuple]:
    """(request, its response) of every answered call with this request code."""
    keyed, _, frames = decoded_name
    out = []
    for e in frames:
        r = e.record
        if not r.response and r.code == requests_code:
            answers = keyed[(client_port(e.connection), "s2c", True, r.opaque)]
            assert len(answers) <= 1
            out.extend((r, answer.record) for answer in answers)
    return out


@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-rocketmq-batch",
                                  "rmq-java-compressed", "rmq-long-poll", "rmq-broker-stop"])
def test_java_sends_are_the_apis_results(decoded, name):
    sends = [s for c in truth(name)["clients"] if c["report"].get("sends")
             for s in c["report"]["sends"]]  # fmt: skip
    calls = [c for code in (310, 320) for c in _responses_to(decoded[name], code)]
    by_offset_id = {answer.ext["msgId"]: (request, answer) for request, answer in calls}
    assert len(calls) == len(sends) > 0
    for s in sends:
        request, answer = by_offset_id[s["offsetMsgId"]]
        assert answer.code == 0 and s["status"] == "SEND_OK"
        assert (answer.fields["queueId"], answer.fields["queueOffset"]) == (s["queueId"],
                                                                          s["queueOffset"])
        assert len(request.messages) == s["messages"]
        assert ",".join(m.msg_id for m in request.messages) == s["msgId"]
        assert [m.tags for m in request.messages] == s["tags"]
        assert [m.keys for m in request.messages] == s["keys"]
        assert request.code == (320 if s["batch"] else 310)
        for m in request.messages:
            assert m.compressed == s.get("compressedByClient", False)
            assert (m.inflated_length if m.compressed else len(m.body)) == s["bodyLength"]


@pytest.mark.parametrize("name", ["rmq-java-json", "rmq-java-rocketmq-batch",
                                  "rmq-java-compressed", "rmq-long-poll", "rmq-cpp", "rmq-js"])
def test_messages_received_are_in_the_pull_responses(decoded, name):
    _, _, frames = decoded[name]
    pulled = {}
    for e in frames:
        for m in (e.record.messages or []) if e.record.response else []:
            pulled[m.msg_id] = m
    received = [m for c in truth(name)["clients"] for m in c["report"].get("received", [])]
    assert received
    for got in received:
        m = pulled[got["msgId"]]
        assert (m.queue_id, m.queue_offset, m.tags, m.keys) == (
            got["queueId"], got["queueOffset"], got["tags"], got["keys"])
        assert (m.inflated_length if m.compressed else len(m.body)) == got["bodyLength"]


def test_the_cpp_clients_sends(decoded):
    name = "rmq-cpp"
    (producer,) = [c for c in truth(name)["clients"] if c["name"] == "producer"]
    calls = _responses_to(decoded[name], 310) + _responses_to(decoded[name], 10)
    by_uniq = {request.messages[0].msg_id: (request, answer) for request, answer in calls}
    assert len(calls) == len(producer["report"]["sends"]) == 3
    for s in producer["report"]["sends"]:
        request, answer = by_uniq[s["msgId"]]
        assert answer.code == 0 and answer.fields["queueOffset"] == s["queueOffset"]
        assert (request.language, len(request.body), request.messages[0].tags,
                request.messages[0].keys) == ("CPP", s["bodyLength"], s["tags"], s["keys"])
    ports = {c["clientPort"] for c in producer["report"]["connections"]}
    keyed, _, _ = decoded[name]
    assert ports <= {k[0] for k in keyed}


def test_fastjson_bare_integer_keys_from_the_name_server(decoded):
    """The 4.9.8 name server writes a route's brokerAddrs with a bare integer key to
    librocketmq (`{0:"127.0.0.1:10911"}`); the Java client gets `"0"`. Both read the same."""
    for name in ("rmq-cpp", "rmq-java-json"):
        routes = [answer.body_json for _, answer in _responses_to(decoded[name], 105)
                  if answer.code == 0]  # fmt: skip
        assert routes and all(r["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
                              for r in routes)  # fmt: skip
    _, _, frames = decoded["rmq-cpp"]
    assert any(b'{0:"127.0.0.1:10911"}' in e.record.body for e in frames)


def test_the_errors_capture_shows_each_error(decoded):
    _, _, frames = decoded["rmq-errors"]
    answered = [(e.record.code_name, e.record.remark) for e in frames if e.record.response]
    names = [n for n, _ in answered]
    for code in ("TOPIC_NOT_EXIST", "REQUEST_CODE_NOT_SUPPORTED", "NO_PERMISSION",
                 "PULL_OFFSET_MOVED", "PULL_NOT_FOUND", "SUBSCRIPTION_NOT_EXIST"):
        assert code in names
    unknown = [e.record for e in frames if not e.record.response and e.record.code == 9999]
    assert [r.code_name for r in unknown] == ["unknown(9999)"] * 2
    # 17 asked is UPDATE_AND_CREATE_TOPIC, answered TOPIC_NOT_EXIST: two tables
    assert spec.request_name(17) == "UPDATE_AND_CREATE_TOPIC"


def test_the_broker_registers_as_its_log_says(decoded):
    (broker,) = truth("rmq-broker-register")["clients"]
    said = broker["report"]
    assert said["unregisteredOk"] == []
    calls = _responses_to(decoded["rmq-broker-register"], 103)
    assert len(calls) == len(said["registeredOk"]) == 1
    request, answer = calls[0]
    assert answer.code == 0
    assert request.fields == {**request.fields, "brokerName": said["brokerName"],
                              "clusterName": said["brokerClusterName"],
                              "brokerId": said["brokerId"],
                              "brokerAddr": f"127.0.0.1:{said['listenPort']:d}"}
    topics = request.body_json["topicConfigSerializeWrapper"]["topicConfigTable"]
    assert set(topics) | {said["brokerClusterName"], said["brokerName"]} == set(
        said["topicsRegistered"])


def test_the_broker_unregisters_as_its_log_says(decoded):
    """rmq-broker-stop: a new topic makes the broker register again (oneway), and stopping
    it sends UNREGISTER_BROKER, answered; as many of each as its log says."""
    (broker,) = [c for c in truth("rmq-broker-stop")["clients"] if c["kind"] == "broker-log"]
    said = broker["report"]
    _, _, frames = decoded["rmq-broker-stop"]
    registers = _wire_requests(frames, 103)
    assert len(registers) == len(said["registeredOk"]) >= 1
    assert all(r.oneway for r in registers)
    topics = registers[-1].body_json["topicConfigSerializeWrapper"]["topicConfigTable"]
    assert truth("rmq-broker-stop")["topic"] in topics
    calls = _responses_to(decoded["rmq-broker-stop"], 104)
    assert len(calls) == len(said["unregisteredOk"]) == 1
    request, answer = calls[0]
    assert answer.code == 0 and request.fields == {
        "brokerName": said["brokerName"], "clusterName": said["brokerClusterName"],
        "brokerId": said["brokerId"], "brokerAddr": f"127.0.0.1:{said['listenPort']:d}"}


def test_the_long_poll_is_held_as_the_client_saw_it(decoded):
    (consumer,) = [c for c in truth("rmq-long-poll")["clients"] if c["name"] == "consumer"]
    traced = {(f["dir"], f["opaque"]): f["t"] for f in consumer["report"]["frames"]
              if f.get("code") == 11 or f.get("requestCode") == 11}  # fmt: skip
    _, _, frames = decoded["rmq-long-poll"]
    seen_ns = {id(e.record): e.ts_ns for e in frames}
    (request, answer), = _responses_to(decoded["rmq-long-poll"], 11)
    assert request.fields["sysFlag"] & spec.PULL_SUSPEND
    assert request.fields["suspendTimeoutMillis"] == 20000
    wire_ms = (seen_ns[id(answer)] - seen_ns[id(request)]) / 1e6
    client_ms = (traced[("s->c response", request.opaque)]
                 - traced[("c->s request", request.opaque)])
    # (the capture's times against the client's clock: the same hold, to a few ms)
    assert client_ms > 3000 and abs(wire_ms - client_ms) < 50
    assert len(answer.messages) == 1
