"""RocketMQ's analyses on the recorded captures, held to what the clients wrote down
(captures/rocketmq/*.truth.json: the Java and JavaScript clients' traces of every frame they
sent and got, the raw client's frames, the producers' send results, the consumers' messages,
the broker's log). Nothing expected here comes from streamdissect."""

from __future__ import annotations

import collections

import pytest
from rocketmq_support import CAPTURES, DIRECTIONS, NAMES, client_port, truth

from streamdissect.analysis.driver import analyze
from streamdissect.protocols.rocketmq import spec
from streamdissect.tables import schema

TRACED = ("java-trace", "js-trace", "raw")
# The Java client sends UPDATE_CONSUMER_OFFSET oneway (4.9.x: updateConsumerOffsetOneway);
# its trace records the flag before the client marks the call oneway, so it shows 0 there.
JAVA_ONEWAY = frozenset((spec.UPDATE_OFFSET_CODE,))
# captures whose every client traced its frames (the others have a C++ client or a broker
# that only say what they sent or logged)
FULLY_TRACED = [n for n in NAMES if all(c["kind"] in TRACED for c in truth(n)["clients"])]


@pytest.fixture(scope="module")
def analyses() -> dict:
    return {name: analyze(str(CAPTURES / f"{name}.pcap")) for name in NAMES}


def traced_frames(name: str) -> list[dict]:
    """Every traced frame; a Java request sent oneway with its oneway flag."""
    out = []
    for c in truth(name)["clients"]:
        for f in c["report"].get("frames", ()) if c["kind"] in TRACED else ():
            if c["kind"] == "java-trace" and f["dir"] == "c->s request" \
                    and f["code"] in JAVA_ONEWAY:  # fmt: skip
                f = dict(f, flag=f["flag"] | spec.ONEWAY_FLAG)
            out.append(f)
    return out


def traced_calls(name: str) -> list[tuple[dict, dict | None]]:
    """(request, its response or None) of every traced request that expects a response."""
    frames = traced_frames(name)
    responses = {(f["clientPort"], DIRECTIONS[f["dir"]][0], f["opaque"]): f for f in frames
                 if DIRECTIONS[f["dir"]][1]}  # fmt: skip
    other = {"c2s": "s2c", "s2c": "c2s"}
    out = []
    for f in frames:
        direction, response = DIRECTIONS[f["dir"]]
        if response or f["flag"] & spec.ONEWAY_FLAG:
            continue
        out.append((f, responses.get((f["clientPort"], other[direction], f["opaque"]))))
    return out


def traced_ports(name: str) -> set[int]:
    return {f["clientPort"] for f in traced_frames(name)}


def rows(analysis, table: str, ports: set[int] | None = None) -> list[dict]:
    """The table's rows as dicts (a table of a row a message or call gives tuples in its
    column order)."""
    names = schema.column_names(table)
    out = [r if isinstance(r, dict) else dict(zip(names, r)) for r in analysis.rows(table)]
    if ports is not None:
        out = [r for r in out if client_port(r["connection"]) in ports]
    return out


def test_fully_traced_captures_are_the_expected_ones():
    assert set(FULLY_TRACED) == {"rmq-errors", "rmq-java-compressed", "rmq-java-json",
                                 "rmq-java-rocketmq-batch", "rmq-js", "rmq-long-poll"}  # fmt: skip


@pytest.mark.parametrize("name", FULLY_TRACED)
def test_every_traced_call_is_paired_with_its_response(analyses, name):
    calls = traced_calls(name)
    assert calls
    found = {(client_port(r["connection"]), r["direction"], r["opaque"]): r
             for r in rows(analyses[name], "rocketmq_requests", traced_ports(name))}  # fmt: skip
    for request, response in calls:
        row = found[(request["clientPort"], DIRECTIONS[request["dir"]][0], request["opaque"])]
        assert row["request_code"] == request["code"]
        if response is None:
            assert row["status"] == "open", request
            continue
        assert row["status"] == "answered"
        assert row["code"] == response["code"]
        assert row["remark"] == response.get("remark")
        # the wire sees the call inside the client's view of it (client clocks in ms)
        client_ms = response["t"] - request["t"]
        assert 0 < row["latency_ms"] <= client_ms + 1, (request, row)


@pytest.mark.parametrize("name", FULLY_TRACED)
def test_latency_counts_calls_per_request_code_server_and_direction(analyses, name):
    expected = collections.Counter()
    answered = collections.Counter()
    for request, response in traced_calls(name):
        key = (request["code"], request["serverPort"], DIRECTIONS[request["dir"]][0])
        expected[key] += 1
        answered[key] += response is not None
    ports = traced_ports(name)
    own = {r["server"] for r in rows(analyses[name], "rocketmq_requests", ports)}
    got = {(r["request_code"], int(r["server"].rsplit(":", 1)[1]), r["direction"]): r
           for r in rows(analyses[name], "rocketmq_latency")
           if r["server"] in own and r["calls"]}  # fmt: skip
    assert {k: r["calls"] for k, r in got.items()} == dict(expected)
    assert {k: r["answered"] for k, r in got.items()} == dict(answered)
    for row in got.values():
        if row["answered"]:
            assert row["min_ms"] <= row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"]


@pytest.mark.parametrize("name", FULLY_TRACED)
def test_errors_are_the_non_zero_responses_the_clients_got(analyses, name):
    expected = collections.Counter()
    remarks = {}
    for request, response in traced_calls(name):
        if response is not None and response["code"] != 0:
            key = (request["code"], response["code"], request["header"].get("topic"))
            expected[key] += 1
            remarks.setdefault(key, response.get("remark"))
    got = {(r["request_code"], r["code"], r["topic"]): r
           for r in rows(analyses[name], "rocketmq_errors")}  # fmt: skip
    assert {k: r["count"] for k, r in got.items()} == dict(expected)
    assert {k: r["remark"] for k, r in got.items()} == remarks
    for (request_code, code, _topic), row in got.items():
        assert row["request_name"] == spec.request_name(request_code)
        assert row["code_name"] == spec.response_name(code)


def test_the_errors_capture_has_each_deliberate_error(analyses):
    names = {
        (r["request_name"], r["code_name"]) for r in rows(analyses["rmq-errors"], "rocketmq_errors")
    }
    assert {("GET_ROUTEINFO_BY_TOPIC", "TOPIC_NOT_EXIST"), ("unknown(9999)", "REQUEST_CODE_NOT_SUPPORTED"),
            ("SEND_MESSAGE", "NO_PERMISSION"), ("PULL_MESSAGE", "PULL_OFFSET_MOVED"),
            ("PULL_MESSAGE", "PULL_NOT_FOUND"), ("PULL_MESSAGE", "SUBSCRIPTION_NOT_EXIST")} <= names  # fmt: skip


def _sends(name: str) -> list[dict]:
    return [s for c in truth(name)["clients"] for s in c["report"].get("sends", ())]


@pytest.mark.parametrize("name", [n for n in NAMES if _sends(n)])
def test_every_send_result_is_a_sends_row(analyses, name):
    """Each message a producer sent, found by the id its client reported: the Java client's
    UNIQ_KEY (a batch's, comma-separated), the JavaScript client's offset id, the C++
    client's own id."""
    producers = [c["report"] for c in truth(name)["clients"] if c["report"].get("sends")]
    ports = {c["clientPort"] for p in producers for c in p.get("connections") or ()}
    table = rows(analyses[name], "rocketmq_sends", ports)
    by_id = {}
    for row in table:
        by_id[row["msg_id"]] = by_id[row["offset_msg_id"]] = row
    results = [s for s in _sends(name) if "msgId" in s]
    assert sum(s.get("messages", 1) for s in results) == len(table)
    for send in results:
        ids = send["msgId"].split(",")
        for index, msg_id in enumerate(ids):
            row = by_id[msg_id]
            assert row["status"] == "SEND_OK"  # (the C++ client's status 0 is SEND_OK)
            assert str(send["status"]) in ("SEND_OK", "0")
            assert row["queue_offset"] == send["queueOffset"] + index
            if "queueId" in send:
                assert row["queue_id"] == int(send["queueId"])
            if "offsetMsgId" in send:
                assert row["offset_msg_id"] == send["offsetMsgId"].split(",")[index]
                assert row["msg_id"] == msg_id
            if "bodyLength" in send:
                assert row["size"] == send["bodyLength"]
            if "compressedByClient" in send:
                assert row["compressed"] == send["compressedByClient"]
            if isinstance(send.get("tags"), list):
                assert row["tags"] == send["tags"][index] and row["keys"] == send["keys"][index]
            assert row["batch_index"] == index and row["latency_ms"] > 0


def test_a_batch_send_is_a_row_a_message(analyses):
    batch = [r for r in rows(analyses["rmq-java-rocketmq-batch"], "rocketmq_sends")
             if r["request_name"] == "SEND_BATCH_MESSAGE"]  # fmt: skip
    assert [r["batch_index"] for r in batch] == [0, 1, 2, 3]
    assert len({r["opaque"] for r in batch}) == 1


@pytest.mark.parametrize("name", FULLY_TRACED)
def test_every_traced_pull_is_a_pulls_row(analyses, name):
    pulls = [(q, a) for q, a in traced_calls(name) if q["code"] == spec.PULL_CODE]
    found = {(client_port(r["connection"]), r["opaque"]): r
             for r in rows(analyses[name], "rocketmq_pulls", traced_ports(name))}  # fmt: skip
    assert len(found) == len(pulls)
    for request, response in pulls:
        row = found[(request["clientPort"], request["opaque"])]
        asked = request["header"]
        assert row["consumer_group"] == asked["consumerGroup"] and row["topic"] == asked["topic"]
        assert row["queue_id"] == int(asked["queueId"])
        if "queueOffset" in asked:
            assert row["queue_offset"] == int(asked["queueOffset"])
        assert row["long_poll"] == bool(int(asked["sysFlag"]) & spec.PULL_SUSPEND)
        if response is None:
            assert row["response_ts_ns"] is None
            continue
        assert row["code"] == response["code"] and row["remark"] == response.get("remark")
        given = response["header"]
        for column, key in (
            ("next_begin_offset", "nextBeginOffset"),
            ("min_offset", "minOffset"),
            ("max_offset", "maxOffset"),
        ):
            assert row[column] == (int(given[key]) if key in given else None)
        if "messages" in response:
            assert row["messages"] == len(response["messages"])
            assert row["bytes"] == sum(m["wireBodyLength"] for m in response["messages"])


def test_the_broker_held_the_long_poll_until_the_send(analyses):
    """The consumer's first pull waits on an empty queue; the producer's send ends it."""
    facts = truth("rmq-long-poll")
    first = rows(analyses["rmq-long-poll"], "rocketmq_pulls")[0]
    (request, _response), *_ = [c for c in traced_calls("rmq-long-poll")
                                if c[0]["code"] == spec.PULL_CODE]  # fmt: skip
    assert first["long_poll"] and first["messages"] == 1
    assert first["suspend_timeout_ms"] == request["header"]["suspendTimeoutMillis"]
    assert first["held_ms"] == first["latency_ms"]
    # it began before the producer started and ended after
    started_ns = facts["notes"]["producerStartedMs"] * 1_000_000
    assert first["request_ts_ns"] < started_ns < first["response_ts_ns"]


@pytest.mark.parametrize("name", FULLY_TRACED)
def test_offsets_are_the_commits_and_max_offsets_on_the_wire(analyses, name):
    committed, commits, max_offsets = {}, collections.Counter(), {}
    for f in traced_frames(name):
        h = f["header"]
        pull_commit = (f["code"] == spec.PULL_CODE
                       and int(h.get("sysFlag", 0)) & spec.PULL_COMMIT_OFFSET)  # fmt: skip
        if f["dir"] == "c->s request" and (f["code"] == spec.UPDATE_OFFSET_CODE or pull_commit):
            key = (h["consumerGroup"], h["topic"], int(h["queueId"]))
            committed[key] = int(h["commitOffset"])
            commits[key] += 1
    for request, response in traced_calls(name):
        if request["code"] == spec.PULL_CODE and response and "maxOffset" in response["header"]:
            max_offsets[(request["header"]["topic"], int(request["header"]["queueId"]))] = int(
                response["header"]["maxOffset"]
            )
    got = {(r["consumer_group"], r["topic"], r["queue_id"]): r
           for r in rows(analyses[name], "rocketmq_offsets")}  # fmt: skip
    assert {k: r["committed_offset"] for k, r in got.items() if r["commits"]} == committed
    assert {k: r["commits"] for k, r in got.items() if r["commits"]} == dict(commits)
    for (group, topic, queue), row in got.items():
        assert row["max_offset"] == max_offsets.get((topic, queue))
        if row["max_offset"] is not None and row["committed_offset"] is not None:
            assert row["lag"] == row["max_offset"] - row["committed_offset"]


def test_committed_offsets_follow_what_the_consumer_received(analyses):
    """The batch capture's consumer got every message and committed past each: its lag is
    0 on every queue it pulled a message from."""
    received = collections.Counter()
    for c in truth("rmq-java-rocketmq-batch")["clients"]:
        for m in c["report"].get("received", ()):
            received[m["queueId"]] = max(received[m["queueId"]], m["queueOffset"] + 1)
    got = {r["queue_id"]: r for r in rows(analyses["rmq-java-rocketmq-batch"], "rocketmq_offsets")}
    for queue, offset in received.items():
        assert got[queue]["committed_offset"] == offset and got[queue]["lag"] == 0


@pytest.mark.parametrize("name", FULLY_TRACED)
def test_clients_are_the_heartbeats_and_unregistrations_traced(analyses, name):
    heartbeats = collections.Counter()
    unregistered = collections.defaultdict(set)
    for f in traced_frames(name):
        if f["dir"] != "c->s request":
            continue
        if f["code"] == spec.HEARTBEAT_CODE:
            heartbeats[f["clientPort"]] += 1
        if f["code"] == spec.UNREGISTER_CLIENT_CODE:
            h = f["header"]
            unregistered[h["clientID"]] |= {h.get("producerGroup"), h.get("consumerGroup")} - {None}
    table = rows(analyses[name], "rocketmq_clients")
    assert sum(r["heartbeats"] for r in table) == sum(heartbeats.values())
    got = {r["client_id"]: set((r["unregistered_groups"] or "").split(",")) - {""}
           for r in table if r["unregistered_ns"] is not None}  # fmt: skip
    assert got == dict(unregistered)


def test_a_heartbeat_names_the_consumer_group_and_its_subscription(analyses):
    facts = truth("rmq-long-poll")
    consumer = next(c["report"] for c in facts["clients"] if c["report"]["role"] == "consumer")
    row = next(r for r in rows(analyses["rmq-long-poll"], "rocketmq_clients") if r["heartbeats"])
    assert row["consumer_groups"] == consumer["group"]
    assert row["subscriptions"] == consumer["topic"]


@pytest.mark.parametrize("name", ["rmq-broker-register", "rmq-broker-stop"])
def test_broker_registrations_are_what_the_broker_logged(analyses, name):
    """The broker's log says which registrations the name server answered OK. Its log
    covers the broker's life: in the stop capture, only the unregistration is the capture's
    (the registration after the topic's creation is sent oneway: no OK line for it)."""
    broker = next(c["report"] for c in truth(name)["clients"] if c["kind"] == "broker-log")
    table = rows(analyses[name], "rocketmq_broker_registrations")
    ok = collections.Counter(r["request_name"] for r in table if r["code_name"] == "SUCCESS")
    assert ok["UNREGISTER_BROKER"] == len(broker["unregisteredOk"])
    if name == "rmq-broker-register":
        assert ok["REGISTER_BROKER"] == len(broker["registeredOk"]) == 1
    else:
        assert any(r["request_name"] == "REGISTER_BROKER" and r["code"] is None for r in table)
        assert truth(name)["topic"] in table[0]["topic_names"].split(",")
    for row in table:
        assert row["broker_name"] == broker["brokerName"]
        assert row["server"].endswith(":9876")
    if "topicsRegistered" in broker:
        (row,) = table
        assert row["topic_names"].split(",") == sorted(broker["topicsRegistered"])
        assert row["topics"] == len(broker["topicsRegistered"])
        assert row["cluster_name"] == broker["brokerClusterName"]
        assert row["broker_id"] == broker["brokerId"]
        assert row["broker_addr"].endswith(f":{broker['listenPort']}")


@pytest.mark.parametrize("name", NAMES)
def test_the_tables_convert_to_their_schema(analyses, name):
    from streamdissect.tables import schema

    for table in schema.analysis_tables("rocketmq"):
        frame = analyses[name]._frame(table)
        assert list(frame.columns) == schema.column_names(table)
        assert analyses[name].arrow(table).num_rows == len(frame)


def test_only_the_tables_asked_for_are_made(analyses):
    from streamdissect.analysis.driver import analyze_events
    from streamdissect.engine.dissect import Dissector

    dissector = Dissector(engine="stream")
    events = dissector.run(str(CAPTURES / "rmq-errors.pcap"))
    a = analyze_events(events, tcp_connections_after=lambda: list(dissector.connections),
                       tables=["rocketmq_errors"], protocol_of=dissector.protocol_of.get)  # fmt: skip
    assert rows(a, "rocketmq_errors") == rows(analyses["rmq-errors"], "rocketmq_errors")
    assert rows(a, "rocketmq_sends") == [] and rows(a, "rocketmq_pulls") == []


@pytest.mark.parametrize("name", NAMES)
def test_the_report_only_analysis_gives_the_same_latency_without_a_row_a_call(analyses, name):
    report_only = analyze(str(CAPTURES / f"{name}.pcap"), report_only=True)
    assert rows(report_only, "rocketmq_requests") == []
    assert rows(report_only, "rocketmq_latency") == rows(analyses[name], "rocketmq_latency")
    # and the latency table counts what the requests table holds
    requests = rows(analyses[name], "rocketmq_requests")
    for row in rows(analyses[name], "rocketmq_latency"):
        mine = [r for r in requests if (r["request_code"], r["server"], r["direction"])
                == (row["request_code"], row["server"], row["direction"])]  # fmt: skip
        status = collections.Counter(r["status"] for r in mine)
        assert row["answered"] == status["answered"]
        assert row["oneway"] == status["oneway"]
        assert row["orphan_responses"] == status["orphan_response"]
        assert row["calls"] == row["answered"] + status["open"] + status["duplicate"]
        if row["answered"]:
            latencies = sorted(r["latency_ms"] for r in mine if r["status"] == "answered")
            assert (row["min_ms"], row["max_ms"]) == (latencies[0], latencies[-1])
