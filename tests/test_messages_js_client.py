"""The messages of the RabbitMQ Stream JavaScript client's capture (captures/js-messages-4.0:
AMQP properties, application properties with string and integer values, text and binary
bodies) under `frames -V`, `-Y` on message fields and the messages table, against what the
client itself says it sent and received (the truth file's notes.messages, written by
captures/js/messages.js). The committed capture is read: neither node nor the client is
needed here."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pandas as pd
import pytest
from messages_truth import CAPTURES, truth

from streamdissect.analysis import messages_table
from streamdissect.cli import main

CAPTURE = "js-messages-4.0"
PATH = str(CAPTURES / f"{CAPTURE}.pcap")
FRAME_LINE = re.compile(r"^\s*(\d+)\s+\S+\s+\S+ ([→←]) (\w+)")
HEX_LINE = re.compile(r"^[0-9a-f]{4}  ((?:[0-9a-f]{2} )*[0-9a-f]{2})")
# the truth's property names, as the view, the filters and the table name them
PROPERTIES = ("message_id", "subject", "content_type", "correlation_id", "creation_time_ms")


def client() -> dict:
    """What the client sent (in order, one Publish frame each) and received (by offset)."""
    return truth(CAPTURE)["notes"]["messages"]


def test_the_truth_is_one_message_a_publish_frame_and_a_chunk():
    """The layout the frame-level checks below rely on, as the client's bytes counted it."""
    connections = truth(CAPTURE)["connections"]
    publish_frames = sum(c["frames"]["c2s"].get("0x0002 v1", 0) for c in connections)
    deliver_frames = sum(c["frames"]["s2c"].get("0x0008 v2", 0) for c in connections)
    sent, received = client()["sent"], client()["received"]
    assert publish_frames == sum(c.get("published", 0) for c in connections) == len(sent) == 6
    assert deliver_frames == sum(c.get("delivered_records", 0) for c in connections) == 6
    assert [int(m["offset"]) for m in received] == list(range(len(sent)))
    assert [m["body_hex"] for m in received] == [m["body_hex"] for m in sent]
    assert any(m["properties"] is None for m in sent)  # (one message without properties)
    assert {type(v) for m in sent for v in m["application_properties"].values()} == {str, int}


def verbose_messages(text: str) -> list[dict]:
    """The messages of a -V output: frame number and command, then each section by its
    header line with its field lines (`key: value` as written), a body's text or hex bytes."""
    messages: list[dict] = []
    frame: dict = {}
    section: str | None = None
    for line in text.splitlines():
        head = FRAME_LINE.match(line)
        if head:
            frame, section = {"frame": int(head[1]), "command": head[3]}, None
            continue
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        if re.match(r"message \d+", stripped):
            messages.append({**frame, "indent": indent, "sections": {}})
            continue
        if not messages or indent <= messages[-1]["indent"] or messages[-1].get("frame") != \
                frame.get("frame"):  # fmt: skip
            section = None
            continue
        message = messages[-1]
        if indent == message["indent"] + 4:
            section = stripped.split(" ", 1)[0].rstrip(":")
            message["sections"][section] = {}
            body = re.match(r"body \(data, (\d+) bytes, (text|binary)\):(?: (.*))?$", stripped)
            if body:
                message["body_kind"], message["body_size"] = body[2], int(body[1])
                message["body_text"] = body[3]
                message["body_hex"] = ""
        elif section == "body" and indent == message["indent"] + 8:
            message["body_hex"] += HEX_LINE.match(stripped)[1].replace(" ", "")
        elif section is not None and indent == message["indent"] + 8:
            key, value = stripped.split(": ", 1)
            message["sections"][section][key] = value
    return messages


def shown_properties(sent: dict) -> dict:
    """A message's properties as -V writes them: strings quoted, the content type a symbol,
    the creation time as UTC wall-clock time with its milliseconds."""
    p = sent["properties"]
    if p is None:
        return {}
    created = datetime.fromtimestamp(p["creation_time_ms"] / 1000, tz=UTC)
    ms = p["creation_time_ms"]
    return {"message_id": f'"{p["message_id"]}"', "subject": f'"{p["subject"]}"',
            "correlation_id": f'"{p["correlation_id"]}"',
            "content_type": f'symbol "{p["content_type"]}"',
            "creation_time": f"{created:%Y-%m-%d %H:%M:%S}.{ms % 1000:03d} UTC ({ms} ms)"}


def shown_application_properties(sent: dict) -> dict:
    return {k: f'"{v}"' if isinstance(v, str) else str(v)
            for k, v in sent["application_properties"].items()}  # fmt: skip


def assert_shown_as_sent(block: dict, sent: dict) -> None:
    wanted_sections = {"application_properties", "body"} | \
        ({"properties"} if sent["properties"] else set())  # fmt: skip
    assert set(block["sections"]) == wanted_sections  # (every section the client set, no other)
    assert block["sections"].get("properties", {}) == shown_properties(sent)
    assert block["sections"]["application_properties"] == shown_application_properties(sent)
    body = bytes.fromhex(sent["body_hex"])
    assert block["body_size"] == len(body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        assert block["body_kind"] == "text" and block["body_text"] == f'"{text}"'
    else:
        assert block["body_kind"] == "binary" and block["body_hex"] == sent["body_hex"]


def test_verbose_shows_every_section_the_client_set_with_its_value(capsys):
    assert main(["frames", "-V", PATH]) == 0
    blocks = verbose_messages(capsys.readouterr().out)
    published = [b for b in blocks if b["command"] == "Publish"]
    delivered = [b for b in blocks if b["command"] == "Deliver"]
    sent, received = client()["sent"], client()["received"]
    assert len(published) == len(sent) and len(delivered) == len(received)
    for block, message in zip(published, sent, strict=True):
        assert_shown_as_sent(block, message)
    # what the consumer got (its properties as the client decoded them; {} when none)
    for block, message in zip(delivered, received, strict=True):
        assert_shown_as_sent(block, {**message, "properties": message["properties"] or None})
    assert {b["body_kind"] for b in published} == {"text", "binary"}


def numbered_frames(capsys, *args: str) -> list[tuple[int, str]]:
    assert main(["frames", *args, PATH]) == 0
    heads = (FRAME_LINE.match(line) for line in capsys.readouterr().out.splitlines())
    return [(int(h[1]), h[3]) for h in heads if h]


def prop(name):
    return lambda m: (m["properties"] or {}).get(name)


def app(name):
    return lambda m: m["application_properties"].get(name)


def body_text(m) -> str:
    return bytes.fromhex(m["body_hex"]).decode("utf-8", "replace")


# (filter, the same over the client's own record of a message)
FILTERS = [
    ('message.properties.subject == "blob"', lambda m: prop("subject")(m) == "blob"),
    ('message.properties.subject == "order"', lambda m: prop("subject")(m) == "order"),
    ('message.properties.message_id == "js-4"', lambda m: prop("message_id")(m) == "js-4"),
    ('message.properties.correlation_id == "corr-1"',
     lambda m: prop("correlation_id")(m) == "corr-1"),
    ('message.properties.content_type == "text/plain"',
     lambda m: prop("content_type")(m) == "text/plain"),
    ("message.properties.creation_time > 1795867203250",
     lambda m: (prop("creation_time_ms")(m) or 0) > 1795867203250),
    ('message.application_properties.region == "emea"', lambda m: app("region")(m) == "emea"),
    ('message.application_properties.lang == "fr"', lambda m: app("lang")(m) == "fr"),
    ("message.application_properties.qty == 42", lambda m: app("qty")(m) == 42),
    ("message.application_properties.qty > 10", lambda m: app("qty")(m) > 10),
    ("message.application_properties.qty < 0", lambda m: app("qty")(m) < 0),
    ('message.body contains "order"', lambda m: "order" in body_text(m)),
    ('message.properties.subject == "none such"', lambda m: False),
]  # fmt: skip


@pytest.mark.parametrize("expression, wanted", FILTERS)
def test_message_filters_select_the_frames_of_the_messages_the_truth_says(expression, wanted,
                                                                          capsys):  # fmt: skip
    """The n-th Publish frame carries the n-th message sent, the n-th Deliver the message at
    offset n (test_the_truth_is_one_message_a_publish_frame_and_a_chunk)."""
    every = numbered_frames(capsys)
    publish = [n for n, command in every if command == "Publish"]
    deliver = [n for n, command in every if command == "Deliver"]
    sent, received = client()["sent"], client()["received"]
    expected = [n for n, m in zip(publish, sent, strict=True) if wanted(m)] + \
        [n for n, m in zip(deliver, received, strict=True) if wanted(m)]  # fmt: skip
    assert [n for n, _ in numbered_frames(capsys, "-Y", expression)] == sorted(expected)


def table_map(cell) -> dict | None:
    return None if cell is None or cell is pd.NA else dict(cell)


def table_row_of(sent: dict) -> dict:
    """What the messages table should hold for a message: its properties (null when not
    set), the application properties as a map of text (an integer as its digits) and the
    body preview (text, or hex when the body is not printable UTF-8)."""
    p = sent["properties"] or {}
    body = bytes.fromhex(sent["body_hex"])
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    printable = text is not None and text.isprintable()
    return {**{name: p.get(name) for name in PROPERTIES},
            "application_properties": {k: str(v) for k, v in
                                       sent["application_properties"].items()},
            "body_size": len(body), "body_preview": text if printable else sent["body_hex"],
            "body_encoding": "text" if printable else "hex"}  # fmt: skip


def table_rows(table: pd.DataFrame) -> list[dict]:
    rows = []
    for _, r in table.iterrows():
        row = {name: None if pd.isna(r[name]) else r[name] for name in PROPERTIES}
        row.update(application_properties=table_map(r["application_properties"]),
                   body_size=r["body_size"], body_preview=r["body_preview"],
                   body_encoding=r["body_encoding"])  # fmt: skip
        rows.append(row)
    return rows


def test_the_messages_table_holds_what_the_client_published_and_got():
    table = messages_table(PATH)
    sent, received = client()["sent"], client()["received"]
    published = table[table["command"] == "Publish"]
    delivered = table[table["command"] == "Deliver"]
    assert table_rows(published) == [table_row_of(m) for m in sent]
    assert [str(v) for v in published["publishing_id"]] == [m["publishing_id"] for m in sent]
    assert table_rows(delivered) == [table_row_of({**m, "properties": m["properties"] or None})
                                     for m in received]  # fmt: skip
    assert [str(v) for v in delivered["offset"]] == [m["offset"] for m in received]
    assert (published["stream"] == truth(CAPTURE)["notes"]["stream"]).all()
    assert (delivered["stream"] == truth(CAPTURE)["notes"]["stream"]).all()
    assert not table["body_truncated"].any() and table["error"].isna().all()
