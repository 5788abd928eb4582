"""`streamdissect frames`: text and jsonl output, anomalies, secrets, errors, pipes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import worsen

from streamdissect.cli import main
from streamdissect.engine.dissect import FrameEvent

AUTH = worsen.CAPTURES / "rstream-auth-failure-3.10.pcap"


def test_text_one_line_per_frame(real, real_frames, capsys):
    path, frames = real.path, real_frames
    assert main(["frames", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(frames)
    first = lines[0].split()
    assert first[0] == "1" and first[1] == "0.000000" and first[3] == "→"
    assert first[4] == "PeerProperties" and "corr=1" in lines[0]
    assert any("←" in line and "code=OK" in line for line in lines)
    assert any("Deliver" in line and "record_count=" in line for line in lines)


def test_jsonl_fields(real, real_frames, capsys):
    path, frames = real.path, real_frames
    assert main(["frames", str(path), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(frames)
    for row in rows:
        for name in (
            "ts_ns",
            "connection",
            "direction",
            "key",
            "command",
            "response",
            "version",
            "size",
            "correlation_id",
            "code",
            "code_name",
            "truncated",
        ):
            assert name in row
        assert isinstance(row["ts_ns"], int) and row["direction"] in ("c2s", "s2c")
    by_command = {r["command"]: r for r in rows}
    assert {"publisher_id", "publishing_ids", "record_count"} <= set(by_command["Publish"])
    assert {"subscription_id", "committed_chunk_id", "chunk", "record_count"} <= set(
        by_command["Deliver"]
    )
    assert {"subscription_id", "credit"} <= set(by_command["Credit"])
    assert {"publisher_id", "publishing_ids"} <= set(by_command["PublishConfirm"])
    assert "chunk_payload" not in by_command["Deliver"]


def test_sasl_password_redacted_unless_asked(capsys):
    main(["frames", str(AUTH), "--format", "jsonl"])
    out = capsys.readouterr().out
    sasl = [json.loads(line) for line in out.splitlines() if '"SaslAuthenticate"' in line]
    request = next(r for r in sasl if not r["response"])
    password = bytes.fromhex(request["sasl_data"]).split(b"\x00")[2]
    assert password == b"***"
    main(["frames", str(AUTH), "--format", "jsonl", "--show-secrets"])
    out = capsys.readouterr().out
    request = next(
        json.loads(line)
        for line in out.splitlines()
        if '"SaslAuthenticate"' in line and '"response": false' in line
    )
    assert bytes.fromhex(request["sasl_data"]).split(b"\x00")[2] not in (b"***", b"")


def test_anomalies_stderr_in_text_and_records_in_jsonl(real, tmp_path, capsys):
    _path, linktype, packets = real
    mid = worsen.write_pcap(tmp_path / "m.pcap", linktype, worsen.midstream(packets, 30))
    assert main(["frames", str(mid)]) == 0
    captured = capsys.readouterr()
    assert "midstream_start" in captured.err and "midstream_start" not in captured.out
    assert main(["frames", str(mid), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    anomalies = [r for r in rows if r["command"] == "Anomaly"]
    assert anomalies and {
        "kind",
        "connection",
        "direction",
        "ts_ns",
        "stream_offset",
        "length",
        "detail",
    } <= set(anomalies[0])


def test_unreadable_input_exits_non_zero_without_traceback(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    result = subprocess.run(
        [sys.executable, "-m", "streamdissect.cli", "frames", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "not a pcap or pcapng" in result.stderr and "Traceback" not in result.stderr


def test_truncated_file_still_exits_zero(real, tmp_path, capsys):
    path = real.path
    data = path.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) - 7])
    assert main(["frames", str(cut)]) == 0
    assert "truncated_file" in capsys.readouterr().err


def test_closed_stdout_does_not_traceback(real):
    path = real.path
    command = f"{sys.executable} -m streamdissect.cli frames --format jsonl {path} | head -1"
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)
    assert result.stdout.count("\n") == 1
    assert "Traceback" not in result.stderr and "Broken pipe" not in result.stderr


def test_port_and_max_frame_options(real, real_frames, tmp_path, capsys):
    _path, linktype, packets = real
    frames = real_frames
    moved = worsen.write_pcap(
        tmp_path / "p.pcap", linktype, worsen.rewrite_port(packets, 5552, 7000)
    )
    assert (
        main(
            [
                "frames",
                str(moved),
                "--port",
                "7000",
                "--port",
                "7001",
                "--no-heuristic",
                "--max-frame",
                "1048576",
            ]
        )
        == 0
    )
    assert len(capsys.readouterr().out.splitlines()) == len(frames)


def _hot_and_generic(path) -> tuple[str, str, int]:
    import io
    import json

    from streamdissect.cli.frames import HotLines, anomaly_dict, frame_dict, jsonl_writer
    from streamdissect.engine.dissect import Dissector

    events = list(Dissector(ports=(5552, 5553), publish_messages=False).run(str(path)))
    written = io.StringIO()
    write = jsonl_writer(written, False, False)
    for event in events:
        write(event)
    generic = "".join(
        json.dumps(frame_dict(e, False, False) if isinstance(e, FrameEvent) else anomaly_dict(e),
                   default=str) + "\n" for e in events)  # fmt: skip
    hot = HotLines()
    fast = sum(hot.line(e) is not None for e in events if isinstance(e, FrameEvent))
    return written.getvalue(), generic, fast


@pytest.mark.parametrize(
    "path",
    worsen.corpus_captures()
    + sorted((Path(__file__).parent / "regressions").glob("*.pcap")),
    ids=lambda p: p.stem,
)
def test_hot_jsonl_lines_are_the_generic_bytes(path):
    """The jsonl lines written from a format for the hottest commands are byte for byte what
    json.dumps of the frame's dict writes."""
    written, generic, _ = _hot_and_generic(path)
    assert written == generic


def test_hot_lines_cover_the_bulk_of_real_traffic():
    path = worsen.CAPTURES / "rstream-slow-consumer-3.10.pcap"
    written, generic, fast = _hot_and_generic(path)
    assert written == generic and fast > 100


def _lines(path, **options) -> str:
    import io

    from streamdissect.cli.frames import jsonl_writer
    from streamdissect.engine.dissect import Dissector

    written = io.StringIO()
    write = jsonl_writer(written, False, False)
    for event in Dissector(ports=(5552, 5553), publish_messages=False, **options).run(str(path)):
        write(event)
    return written.getvalue()


def _odd_hot_capture(tmp_path):
    import struct

    from test_bulk_engine import _frame, frames_capture
    from test_frame_batches import _deliver

    data = struct.pack(">I", 3) + b"abc"
    frames = [_deliver(1, 10, data), _deliver(2, 2**64 - 10, data), _deliver(2, 12, data, crc=7),
              _deliver(2, 13, data, magic=0x40), _frame(0x0009, 1, struct.pack(">Bh", 3, -5)),
              _frame(0x0003, 1, struct.pack(">Bi2Q", 1, 2, 2**64 - 1, 0)),
              _frame(0x0002, 1, struct.pack(">BiQI", 7, 1, 5, 3) + b"abc"),
              _frame(0x0017, 1, b""), _frame(0x0017, 2, b"")]  # fmt: skip
    return frames_capture(tmp_path / "odd.pcap", frames)


@pytest.mark.parametrize(
    "path",
    worsen.corpus_captures()
    + sorted((Path(__file__).parent / "regressions").glob("*.pcap")) + ["odd"],
    ids=lambda p: getattr(p, "stem", p),
)
def test_jsonl_from_runs_is_the_record_paths_bytes(path, tmp_path):
    """`frames --format jsonl` from the bulk engine's HotFrames (run_lines), anomalies in
    their places, is byte for byte the jsonl of the records."""
    from streamdissect.engine.dissect import Dissector
    from streamdissect.protocols.stream.hot import HotFrames

    if path == "odd":
        path = _odd_hot_capture(tmp_path)
        assert any(ev.__class__ is HotFrames for ev in Dissector(columns=True).run(str(path)))
    assert _lines(path, columns="lines") == _lines(path, engine="stream")


@pytest.mark.parametrize("how", ["reorder", "duplicate", "snaplen", "midstream"])
def test_jsonl_from_runs_on_made_worse_copies(tmp_path, how):
    import worsen

    linktype, packets = worsen.read_pcap(worsen.real_capture())
    made = {"reorder": worsen.reorder, "duplicate": worsen.duplicate,
            "snaplen": lambda p: worsen.snaplen(p, 150),
            "midstream": lambda p: worsen.midstream(p, len(p) // 3)}[how](packets)  # fmt: skip
    path = worsen.write_pcap(tmp_path / "w.pcap", linktype, made)
    assert _lines(path, columns="lines") == _lines(path, engine="stream")


def test_version_and_subcommands_registering_themselves(capsys):
    """--version prints the installed version; every module of streamdissect/cli/ with a
    register() is a subcommand (frames and analyze first)."""
    from importlib.metadata import version

    from streamdissect import cli

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"streamdissect {version('streamdissect')}"
    assert cli.subcommand_modules()[:2] == ["frames", "analyze"]
    choices = cli.build_parser()._subparsers._group_actions[0].choices
    assert list(choices)[:2] == ["frames", "analyze"]
