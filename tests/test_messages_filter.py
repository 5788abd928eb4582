"""`-Y` over message fields (message.properties.subject, message.application_properties.region,
message.body, message.properties.creation_time...): the frames and the messages it selects
are those a Python filter over the clients' own records selects (tests/messages_truth.py)."""

from __future__ import annotations

import json

import pytest
from messages_truth import CAPTURES, published, stored
from test_messages_view import one_connection, rstream_message

from streamdissect.cli import main
from streamdissect.protocols.stream import encode_record, make_record


def region(sent) -> str | None:
    return None if sent is None else (sent.application_properties or {}).get("region")


def key(sent) -> str | None:
    return None if sent is None else (sent.application_properties or {}).get("key")


def body_holds(sent, *parts: bytes) -> bool:
    return sent is not None and any(part in sent.body for part in parts)


# (filter, the same over a client's record; None: a frame without messages, whose message
# fields all compare as null, as a field a frame lacks does)
FILTERS = [
    ('message.application_properties.region == "apac"', lambda s: region(s) == "apac"),
    ('message.application_properties.region != "apac"', lambda s: region(s) != "apac"),
    ('message.body contains "msg-0000"', lambda s: body_holds(s, b"msg-0000")),
    ('message.body matches "-0000[2-4]-"', lambda s: body_holds(s, b"-00002-", b"-00003-",
                                                                  b"-00004-")),
    ('message.application_properties.key == "2" or message.body contains "00005"',
     lambda s: key(s) == "2" or body_holds(s, b"00005")),
    ('not message.application_properties.region == "emea"', lambda s: region(s) != "emea"),
    ("message", lambda s: s is not None),
]  # fmt: skip
CAPTURES_WITH_PROPERTIES = ("rbfly-publish-consume-3.10", "rbfly-filter-4.0",
                            "rstream-filter-4.0", "rstream-superstream-4.0",
                            "raw-deliver-v2-4.0")  # fmt: skip


def jsonl(capsys, *args: str) -> list[dict]:
    assert main(["frames", "--format", "jsonl", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def client_record(capture: str, row: dict, order: dict):
    """The client's record of a --messages row: a Publish's by the order the client sent
    them, a Deliver's by its offset (what the broker stored there)."""
    if row["command"] == "Publish":
        order["sent"] = order.get("sent", -1) + 1
        return published(capture)[order["sent"]]
    return stored(capture)[row["offset"]]


@pytest.mark.parametrize("capture", CAPTURES_WITH_PROPERTIES)
@pytest.mark.parametrize("expression, wanted", FILTERS)
def test_message_filters_select_what_a_python_filter_over_the_clients_records_does(
        capture, expression, wanted, capsys):  # fmt: skip
    path = str(CAPTURES / f"{capture}.pcap")
    every = jsonl(capsys, "--messages", path)
    order: dict = {}
    records = [client_record(capture, row, order) for row in every]
    assert [r["body"].encode() for r in every] == [s.body for s in records]  # (the pairing)
    expected = [row for row, sent in zip(every, records, strict=True) if wanted(sent)]
    got = jsonl(capsys, "--messages", "-Y", expression, path)
    assert [(r["frame"], r["index"]) for r in got] == [(r["frame"], r["index"]) for r in expected]
    # frames: a frame is selected when any of its messages is (one without: on null fields)
    assert main(["frames", path]) == 0
    numbers = [int(line.split()[0]) for line in capsys.readouterr().out.splitlines()]
    carrying = {row["frame"] for row in every}
    assert main(["frames", "-Y", expression, path]) == 0
    frames = [int(line.split()[0]) for line in capsys.readouterr().out.splitlines()]
    without = [n for n in numbers if n not in carrying and wanted(None)]
    assert frames == sorted({row["frame"] for row in expected} | set(without))
    assert len(frames) == len(jsonl(capsys, "-Y", expression, path))


def test_frame_fields_and_message_fields_together(capsys):
    path = str(CAPTURES / "rbfly-publish-consume-3.10.pcap")
    expression = 'direction == "s2c" and message.application_properties.region == "apac"'
    got = jsonl(capsys, "--messages", "-Y", expression, path)
    apac = [s.body for s in stored("rbfly-publish-consume-3.10") if region(s) == "apac"]
    assert [r["body"].encode() for r in got] == apac  # (each delivered once, in order)
    assert {r["command"] for r in got} == {"Deliver"}


def properties_capture(tmp_path):
    """Publish frames of messages with subjects and creation times, as rstream encodes them."""
    from rstream._pyamqp.message import Properties

    sent = [("order", 1795308251000 + i * 1000, b"ok %d" % i) for i in range(4)] + [
        ("refund", 1795308251000 + i * 1000, b"timeout %d" % i) for i in range(4, 6)]
    frames = []
    for i, (subject, created, body) in enumerate(sent):
        message = rstream_message(properties=Properties(subject=subject, creation_time=created,
                                                        message_id=f"id-{i}"), body=body)
        frames.append((encode_record(make_record("Publish", publisher_id=1, messages=[
            {"publishing_id": i, "filter_value": None, "entry": message}])), False))
    return one_connection(tmp_path / "properties.pcap", frames), sent


@pytest.mark.parametrize("expression, wanted", [
    ('message.properties.subject == "order"', lambda s, t, b: s == "order"),
    ("message.properties.creation_time > 1795308253000", lambda s, t, b: t > 1795308253000),
    ('message.body contains "timeout"', lambda s, t, b: b"timeout" in b),
    (('message.properties.subject == "order" and message.properties.creation_time <= '
      "1795308252000"), lambda s, t, b: s == "order" and t <= 1795308252000),
    ('message.properties.message_id matches "^id-[13]$"',
     lambda s, t, b: t in (1795308252000, 1795308254000)),
])  # fmt: skip
def test_properties_in_filters(expression, wanted, tmp_path, capsys):
    path, sent = properties_capture(tmp_path)
    got = jsonl(capsys, "--messages", "-Y", expression, str(path))
    assert [r["publishing_id"] for r in got] == [i for i, m in enumerate(sent) if wanted(*m)]


def test_an_unknown_message_field_is_an_error_that_points_at_it(capsys):
    path = str(CAPTURES / "rbfly-publish-consume-3.10.pcap")
    assert main(["frames", "-Y", 'message.propertiez.subject == "x"', path]) == 2
    err = capsys.readouterr().err
    assert "unknown message field 'message.propertiez.subject'" in err
    assert "^" in err


def test_no_bodies_leaves_the_body_out_of_filters_too(capsys):
    path = str(CAPTURES / "rbfly-publish-consume-3.10.pcap")
    assert jsonl(capsys, "--messages", "--no-bodies", "-Y", "message.body", path) == []
    assert len(jsonl(capsys, "--messages", "-Y", "message.body", path)) == 55 * 2
    rows = jsonl(capsys, "--messages", "--no-bodies", path)
    assert rows and all("body" not in r and r["body_size"] == 64 for r in rows)


@pytest.mark.parametrize("fmt", ["jsonl", "text"])
def test_count_with_messages_counts_messages(fmt, capsys):
    """-c N with --messages: the first N messages the filter selects, and no more read."""
    path = str(CAPTURES / "rbfly-publish-consume-3.10.pcap")
    args = ["frames", "--format", fmt, "--messages", "-c", "5", "-Y",
            'message.application_properties.region == "apac"', path]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    apac = [s.body.decode() for s in published("rbfly-publish-consume-3.10")
            if region(s) == "apac"][:5]  # fmt: skip
    if fmt == "jsonl":
        assert [json.loads(line)["body"] for line in out] == apac
    else:
        assert len(out) == 5 and all(body in line for body, line in zip(apac, out, strict=True))
