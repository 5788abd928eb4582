"""SASL PLAIN passwords of a capture never reach an output unless --show-secrets asks.

Checked on the corpus capture with a wrong password ("wrong-secret-pw") and on one with the
successful "guest"/"guest" login (there the user name is shown, so the check looks for the
password in its PLAIN form). Outputs are found, not listed: every subcommand of the CLI in
every --format, every `*_table` of streamdissect.analysis, the reprs of every event and
record, anomalies, logs and warnings. A face added later is checked the same way; one that
needs other arguments than a capture makes this test fail until it is taught them.
"""

from __future__ import annotations

import argparse
import json
import logging
import warnings
from pathlib import Path

import pytest
import worsen

from streamdissect import analysis
from streamdissect.cli import build_parser, main
from streamdissect.engine.dissect import Dissector, FrameEvent
from streamdissect.protocols.stream import decode_frame, encode_record

CAPTURES = worsen.CAPTURES
WRONG = (CAPTURES / "rstream-auth-failure-3.10.pcap", b"wrong-secret-pw")
GUEST = (CAPTURES / "rstream-publish-confirm-3.10.pcap", b"\x00guest\x00guest")


def forms(secret: bytes) -> list[str]:
    """How the secret would look in text, hex, a bytes repr or JSON."""
    text = secret.decode()
    return [
        text,
        secret.hex(),
        secret.hex().upper(),
        repr(secret)[2:-1],
        json.dumps(text)[1:-1],
    ]


def leaks(output: str, secret: bytes) -> list[str]:
    return [form for form in forms(secret) if form in output]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _files(fmt: str) -> list[str]:
    """A format that writes files gets a directory (OUT: the test's tmp_path)."""
    return ["-o", "OUT"] if fmt in ("csv", "parquet") else []


def written(directory: Path) -> str:
    """Every file a command wrote, as text (Parquet read back: its bytes may be compressed;
    a single file, such as report's HTML, as it is)."""
    import pyarrow.parquet as pq

    if directory.is_file():
        return directory.read_text(encoding="utf-8", errors="replace")
    texts = []
    for path in sorted(directory.rglob("*")):
        if path.suffix == ".csv":
            texts.append(path.read_text())
        elif path.suffix == ".parquet":
            texts.append(pq.read_table(path).to_pandas().to_csv())
    return "\n".join(texts)


# probe reads no capture (tests/test_probe.py checks that its own password never shows);
# compare reads the capture and replays it against the real 3.10 broker
NO_CAPTURE = {"probe"}
LIVE_BROKER = "rabbitmq-stream://guest:guest@127.0.0.1:5552/"
NEEDS = {"spark": pytest.mark.spark, "compare": pytest.mark.broker, "wireshark": pytest.mark.tshark}


def cli_runs() -> list:
    runs = []
    for name, parser in subcommands().items():
        if name in NO_CAPTURE:
            continue
        formats = [None]
        for action in parser._actions:
            if "--format" in action.option_strings:
                formats = list(action.choices)
        # (spark writes files only: where, and one local core; report writes one file)
        base = {"spark": ["--out", "OUT", "--master", "local[1]"],
                "report": ["-o", "OUT"], "compare": [LIVE_BROKER]}.get(name, [])  # fmt: skip
        for fmt in formats:
            runs.append((name, [*base, *([] if fmt is None else ["--format", fmt,
                                                                 *_files(fmt)])]))  # fmt: skip
        # every on/off switch too (--payloads, ...), in every format
        for action in parser._actions:
            if isinstance(action, argparse._StoreTrueAction) and action.dest != "show_secrets":
                for fmt in formats:
                    fmt_options = [*base, *([] if fmt is None else ["--format", fmt,
                                                                    *_files(fmt)])]  # fmt: skip
                    runs.append((name, [action.option_strings[0], *fmt_options]))
    return [pytest.param(name, options, marks=NEEDS.get(name, ())) for name, options in runs]


@pytest.fixture(params=[WRONG, GUEST], ids=["wrong-password", "guest"])
def capture(request) -> tuple[Path, bytes]:
    path, secret = request.param
    assert secret in path.read_bytes(), "the capture must carry the password"
    return request.param


@pytest.mark.parametrize("name, options", cli_runs(), ids=lambda v: str(v))
def test_every_cli_output_hides_the_password(capture, name, options, capsys, caplog, tmp_path,
                                             request):
    path, secret = capture
    if name == "spark":  # (on the tests' shared Spark session, which its job does not stop)
        request.getfixturevalue("spark_kept")
    caplog.set_level(logging.DEBUG)
    options = [str(tmp_path / "out") if o == "OUT" else o for o in options]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([name, str(path), *options]) == 0
    out, err = capsys.readouterr()
    assert out or ("--messages" in options and path == WRONG[0])  # (it has no messages)
    files = written(tmp_path / "out") if (tmp_path / "out").exists() else ""
    assert files or not {"-o", "--out"} & set(options)
    everything = "\n".join([out, err, caplog.text, files, *(str(w.message) for w in caught)])
    assert leaks(everything, secret) == []


def test_show_secrets_shows_it_so_the_checks_can_fail(capsys):
    """The same check on frames --show-secrets finds the password: the test is not blind."""
    for path, secret in (WRONG, GUEST):
        assert main(["frames", str(path), "--format", "jsonl", "--show-secrets"]) == 0
        assert secret.hex() in capsys.readouterr().out
    assert main(["frames", str(WRONG[0]), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (request,) = [r for r in rows if r["command"] == "SaslAuthenticate" and not r["response"]]
    assert bytes.fromhex(request["sasl_data"]) == b"\x00guest\x00***"
    assert request["username"] == "guest"


def test_every_pandas_table_hides_the_password(capture):
    path, secret = capture
    names = [n for n in analysis.__all__ if n.endswith("_table")]
    assert "frames_table" in names and "connections_table" in names
    for name in names:
        table = getattr(analysis, name)(str(path))
        dumped = table.to_csv() + table.to_json() + table.to_string() + repr(table.to_dict())
        assert leaks(dumped, secret) == [], name
    shown = analysis.frames_table(str(path), show_secrets=True)
    assert secret.hex() in shown.to_csv()


def test_reprs_of_events_records_anomalies_and_connections_hide_it(capture):
    path, secret = capture
    dissector = Dissector()
    texts = []
    for event in dissector.run(str(path)):
        texts += [repr(event), str(event)]
        if isinstance(event, FrameEvent):
            texts += [repr(event.record), str(event.record), repr(event.record.to_dict())]
    texts += [repr(a) for a in dissector.anomalies]
    texts += [repr(c) for c in dissector.connections]
    assert any("SaslAuthenticate" in t for t in texts)
    assert leaks("\n".join(texts), secret) == []


def test_broken_sasl_frames_hide_it_too(capture):
    """A SaslAuthenticate that does not decode (bad layout, unknown version, cut) keeps its
    raw bytes: neither its repr nor its dict may show them."""
    path, secret = capture
    request = next(
        e.record for e in Dissector().run(str(path))
        if isinstance(e, FrameEvent) and e.record.command == "SaslAuthenticate"
        and not e.record.response
    )  # fmt: skip
    frame = encode_record(request)
    variants = [
        frame + b"x",  # trailing byte: Malformed
        frame[:6] + b"\x00\x09" + frame[8:],  # version 9: Unknown
        frame[:-1],  # cut: truncated
        frame[:4] + b"\x80\x13" + frame[6:],  # the response key: Malformed
    ]
    for raw in variants:
        record = decode_frame(raw)
        text = repr(record) + str(record) + json.dumps(record.to_dict())
        assert leaks(text, secret) == [], raw
        assert secret.hex() in json.dumps(record.to_dict(show_secrets=True)) or record.truncated
