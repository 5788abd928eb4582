"""Message bodies can hold personal data: `--no-bodies` leaves them out of every output of
the commands that take it, in every format and with every other switch; without it, the
outputs that show bodies do show them (so the check is not blind), and those that never
show a body by default (frames text and jsonl, analyze without --messages) do not.

The options are found, not listed: every on/off switch and --format choice of each command
that has --no-bodies."""

from __future__ import annotations

import argparse

import pytest
from messages_truth import CAPTURES
from test_secrets import forms, subcommands

from streamdissect.cli import main

# (a capture of each protocol with messages, and a part of one of its client's bodies)
BODIES = {
    "stream": (CAPTURES / "rbfly-publish-consume-3.10.pcap",
               b"streamdissect-msg-00017-"),  # (_common.body(17))
    "rocketmq": (CAPTURES / "rocketmq" / "rmq-java-json.pcap",
                 b"msg-3 ghijklmnopqrstuvwxyz"),  # (RmqProducer's body(3, 128), the kit's)
}  # fmt: skip
ALWAYS_BODIES = {"--payloads"}  # shows the raw bytes: it does not go with --no-bodies
SHOW_BODIES = {"-V", "--messages"}  # (analyze: --messages; frames: -V, --messages)
# the Spark job, with its messages table asked for (it shows bodies then), in local Spark
SPARK = ["--tables", "connections,messages", "--master", "local[1]"]


def runs(with_bodies_off: bool) -> list:
    out = []
    for name, parser in subcommands().items():
        options = {o for a in parser._actions for o in a.option_strings}
        if "--no-bodies" not in options:
            continue
        formats = next((list(a.choices) for a in parser._actions
                        if "--format" in a.option_strings), [None])  # fmt: skip
        switches = [a.option_strings[0] for a in parser._actions
                    if isinstance(a, argparse._StoreTrueAction)
                    and a.dest not in ("no_bodies", "show_secrets")
                    and a.option_strings[0] not in ALWAYS_BODIES]  # fmt: skip
        for fmt in formats:
            for switch in [None, *switches]:
                args = [name, *([] if fmt is None else ["--format", fmt])]
                args += SPARK if name == "spark" else []
                args += [] if switch is None else [switch]
                args += ["--no-bodies"] if with_bodies_off else []
                marks = [pytest.mark.spark] if name == "spark" else []
                out += [pytest.param(args, protocol, id=f"{protocol}: {' '.join(args)}",
                                     marks=marks) for protocol in BODIES]  # fmt: skip
    return out


def everything(args: list[str], protocol: str, capsys, tmp_path) -> str:
    files = ["-o", str(tmp_path / "out")] if {"csv", "parquet"} & set(args) else []
    if args[0] == "spark":
        files = ["--out", str(tmp_path / "out")]
    assert main([*args, *files, str(BODIES[protocol][0])]) == 0
    out, err = capsys.readouterr()
    texts = [out, err]
    for path in sorted((tmp_path / "out").rglob("*")) if files else []:
        if path.suffix == ".csv":
            texts.append(path.read_text())
        elif path.suffix == ".parquet":
            import pyarrow.parquet as pq

            texts.append(pq.read_table(path).to_pandas().to_csv())
    return "\n".join(texts)


@pytest.mark.parametrize(("args", "protocol"), runs(with_bodies_off=True))
def test_no_bodies_leaves_every_body_out(args, protocol, capsys, tmp_path):
    output = everything(args, protocol, capsys, tmp_path)
    assert [form for form in forms(BODIES[protocol][1]) if form in output] == []


@pytest.mark.parametrize(("args", "protocol"), runs(with_bodies_off=False))
def test_bodies_are_shown_only_where_asked_for(args, protocol, capsys, tmp_path):
    output = everything(args, protocol, capsys, tmp_path)
    shown = [form for form in forms(BODIES[protocol][1]) if form in output] != []
    asked = bool(SHOW_BODIES & set(args)) or "connections,messages" in args
    assert shown == asked, "a body shown by default, or not when asked"


@pytest.mark.parametrize("protocol", BODIES)
def test_the_html_report_shows_no_body(protocol, tmp_path):
    """`report` has no --no-bodies: it never shows a message's body (its figures and tables
    are of frames, calls and counts)."""
    page = tmp_path / "report.html"
    assert main(["report", "-q", "-o", str(page), str(BODIES[protocol][0])]) == 0
    text = page.read_text(errors="replace")
    assert len(text) > 10_000  # (a report was written)
    assert [form for form in forms(BODIES[protocol][1]) if form in text] == []
