"""The messages table (analyze(messages=True), messages_table(), analyze --messages, CSV and
Parquet) and `frames --messages`: what the clients published (tests/messages_truth.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from messages_truth import CAPTURES, WITH_MESSAGES, published, stored, truth
from test_messages_filter import properties_capture

from streamdissect.analysis import analyze, messages_table
from streamdissect.cli import main
from streamdissect.tables import schema
from streamdissect.tables.export import read_table


def app_properties(cell) -> dict | None:
    """A map cell (pandas: the (key, value) pairs of a row) as the client's dict: its
    values are text (the clients' are strings)."""
    return None if cell is None or cell is pd.NA else dict(cell)


@pytest.mark.parametrize("capture", WITH_MESSAGES)
def test_the_table_holds_what_the_clients_published(capture):
    table = messages_table(str(CAPTURES / f"{capture}.pcap"))
    assert list(table.columns) == schema.column_names("messages")
    assert dict(table.dtypes.astype(str)) == schema.pandas_dtypes("messages")
    sent = table[table["command"] == "Publish"]
    clients = published(capture)
    assert len(sent) == sum(c.get("published", 0) for c in truth(capture)["connections"])
    assert [b.encode() for b in sent["body_preview"]] == [m.body for m in clients]
    assert [app_properties(c) for c in sent["application_properties"]] == \
        [m.application_properties for m in clients]  # fmt: skip
    assert [None if pd.isna(v) else v for v in sent["filter_value"]] == \
        [m.filter_value for m in clients]  # fmt: skip
    assert list(sent["format"]) == ["amqp" if m.amqp else "raw" for m in clients]
    assert (sent["direction"] == "c2s").all() and sent["publisher_id"].notna().all()
    got = table[table["command"] == "Deliver"]
    kept = stored(capture)
    assert [b.encode() for b in got["body_preview"]] == [kept[o].body for o in got["offset"]]
    assert [app_properties(c) for c in got["application_properties"]] == \
        [kept[o].application_properties for o in got["offset"]]  # fmt: skip
    delivered = sum(c.get("delivered_records", 0) for c in truth(capture)["connections"])
    if delivered:
        assert len(got) == delivered
    # every DeclarePublisher and Subscribe is captured (_raw.errors publishes with publisher
    # 7, never declared, for its PublishError)
    undeclared = table["publisher_id"] == 7 if capture.startswith("raw-errors") else False
    assert (table["stream"].isna() == undeclared).all()
    assert (table["body_size"] == [len(b) for b in table["body_preview"]]).all()
    assert not table["body_truncated"].any() and table["error"].isna().all()


def test_properties_are_columns(tmp_path):
    path, sent = properties_capture(tmp_path)
    table = messages_table(str(path))
    assert list(table["subject"]) == [subject for subject, _, _ in sent]
    assert list(table["creation_time_ms"]) == [created for _, created, _ in sent]
    assert list(table["message_id"]) == [f"id-{i}" for i in range(len(sent))]
    assert list(table["body_preview"]) == [body.decode() for _, _, body in sent]
    assert table["content_type"].isna().all()


def test_bodies_are_bounded_or_left_out():
    path = str(CAPTURES / "rbfly-publish-consume-3.10.pcap")
    short = messages_table(path, max_body=10)
    assert (short["body_preview"] == "streamdiss").all() and short["body_truncated"].all()
    assert (short["body_size"] == 64).all()
    none = messages_table(path, bodies=False)
    assert none["body_preview"].isna().all() and (none["body_size"] == 64).all()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_analyze_writes_the_messages_table_when_asked(fmt, tmp_path, capsys):
    path = str(CAPTURES / "rstream-superstream-4.0.pcap")
    assert main(["analyze", "--format", fmt, "-o", str(tmp_path / "plain"), path]) == 0
    assert "messages" not in capsys.readouterr().out  # (made on request only)
    assert main(["analyze", "--messages", "--format", fmt, "-o", str(tmp_path / "m"), path]) == 0
    written = [line for line in capsys.readouterr().out.splitlines() if "messages" in line]
    assert len(written) == 1
    back = read_table(written[0] if fmt == "csv" else str(tmp_path / "m" / "messages"),
                      "messages")  # fmt: skip
    # (the values; read back, strings are in Arrow memory)
    pd.testing.assert_frame_equal(back, messages_table(path), check_dtype=False)
    keys = [app_properties(c)["key"] for c in back[back["command"] == "Publish"]
            ["application_properties"]]  # fmt: skip
    assert keys == [m.application_properties["key"] for m in published("rstream-superstream-4.0")]


def test_the_json_and_text_reports_add_the_messages_when_asked(capsys):
    path = str(CAPTURES / "rbfly-publish-consume-3.10.pcap")
    assert main(["analyze", "--format", "json", "--messages", path]) == 0
    report = json.loads(capsys.readouterr().out)
    bodies = [r["body_preview"].encode() for r in report["messages"] if r["command"] == "Publish"]
    assert bodies == [m.body for m in published("rbfly-publish-consume-3.10")]
    assert main(["analyze", "--format", "json", path]) == 0
    assert "messages" not in json.loads(capsys.readouterr().out)
    assert main(["analyze", "--messages", path]) == 0
    assert "Messages (the first 50)" in capsys.readouterr().out


def test_the_other_tables_are_the_same_with_the_messages():
    path = str(CAPTURES / "rstream-consume-credit-3.10.pcap")
    plain, with_messages = analyze(path), analyze(path, messages=True)
    for name in ("connections", "latency", "confirms", "credit", "deliveries", "throughput",
                 "errors", "anomalies"):  # fmt: skip
        pd.testing.assert_frame_equal(getattr(plain, name), getattr(with_messages, name))
    assert plain.messages.empty and len(with_messages.messages) == 2 * 200


def test_frames_messages_lines_are_the_table_rows(capsys):
    """`frames --format jsonl --messages`: one line a message, the table's place columns."""
    path = str(CAPTURES / "rstream-sub-entry-3.10.pcap")
    assert main(["frames", "--format", "jsonl", "--messages", path]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    table = messages_table(path)
    for name in ("frame", "command", "publishing_id", "offset", "compression", "size"):
        assert [line[name] for line in lines] == [None if pd.isna(v) else v for v in table[name]]
    publish = [line["body"].encode() for line in lines if line["command"] == "Publish"]
    assert publish == [m.body for m in published("rstream-sub-entry-3.10")]
    assert {line["compression"] for line in lines} == {"gzip", "none"}


def typed_properties_rows() -> tuple[list[dict], list[dict]]:
    """Messages table rows of a Deliver whose messages rstream (a real client) encoded with
    application properties of several AMQP types; and the maps the table should hold: a
    string as it is, another value as its JSON text, null as null."""
    from types import SimpleNamespace

    from test_codec_wire import chunk, deliver, simple_entry
    from test_messages_view import rstream_message

    from streamdissect.protocols.stream import decode_frame
    from streamdissect.protocols.stream.messages import MessageRows, table_row

    given = [{"region": "eu", "n": 5, "ok": True, "none": None, "pi": 2.5},
             {"region": "a \"quoted\" é"}, {}]  # fmt: skip
    entries = [simple_entry(rstream_message(body=b"x", application_properties=p))
               for p in given]  # fmt: skip
    record = decode_frame(deliver(chunk(entries, len(entries), chunk_id=7)))
    event = SimpleNamespace(record=record, ts_ns=1, connection="c", direction="s2c",
                            stream_offset=0)  # fmt: skip
    rows = [table_row(row) for row in MessageRows().feed(event)]
    expected = [{"region": "eu", "n": "5", "ok": "true", "none": None, "pi": "2.5"},
                {"region": "a \"quoted\" é"}, None]  # fmt: skip (rstream: no empty section)
    return rows, expected


def test_application_properties_are_a_map_everywhere(tmp_path):
    """pandas (the pairs of a row), Parquet (a MAP column that pd.read_parquet and
    pyarrow read), CSV (a JSON object's text, read back as the map) and the JSON report."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamdissect.cli._text_report import RowStream, json_write
    from streamdissect.tables.convert import dataframe, plain_records
    from streamdissect.tables.export import arrow_table, write_table

    rows, expected = typed_properties_rows()
    assert [row["application_properties"] for row in rows] == expected
    df = dataframe("messages", rows)
    assert [app_properties(c) for c in df["application_properties"]] == expected
    arrow = arrow_table("messages", df)
    assert arrow.schema.field("application_properties").type == pa.map_(pa.string(), pa.string())

    folder = write_table(arrow, str(tmp_path), "messages", "parquet")
    stored = pq.read_table(folder).column("application_properties").to_pylist()
    assert [app_properties(cell) for cell in stored] == expected
    plain = pd.read_parquet(tmp_path / "messages")  # (pandas' own reader, no schema given)
    assert [app_properties(cell) for cell in plain["application_properties"]] == expected
    back = read_table(str(tmp_path / "messages"), "messages")
    assert [app_properties(c) for c in back["application_properties"]] == expected

    csv = write_table(arrow, str(tmp_path), "messages", "csv")
    cells = pd.read_csv(csv, dtype=str, keep_default_na=False)["application_properties"]
    assert [json.loads(cell) if cell else None for cell in cells] == expected
    back = read_table(csv, "messages")
    assert [app_properties(c) for c in back["application_properties"]] == expected

    records = plain_records("messages", rows)
    assert [r["application_properties"] for r in records] == expected
    pieces: list[str] = []
    json_write({"messages": RowStream("messages", rows)}, pieces.append)
    assert "".join(pieces) == json.dumps({"messages": records}, indent=1)
