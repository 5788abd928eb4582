"""The generated Wireshark dissector, run by Debian's real tshark on every shipped capture:
the same frames per connection and direction as `streamdissect frames --format jsonl`
(key, version, correlation id, code, size and every field the line carries), and the same
request/response pairs as `streamdissect analyze --format json`'s latency table (and,
pair by pair, as its requests table). Both outputs are the reference: the codec's and the analysis' own tests hold them to the
captures' truth files; nothing here is expected from the dissector's own output."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
import tshark_pdml
import worsen
from tshark_pdml import Pdu

from streamdissect.analysis import analyze
from streamdissect.protocols.stream import spec
from streamdissect.protocols.stream.analysis.latency import NOT_CALLS

CAPTURES = worsen.corpus_captures()
# Names a frames line carries besides the fields: what tshark shows as header or not at all.
META = {"ts_ns", "connection", "direction", "stream_offset", "command", "response", "code_name",
        "truncated", "key", "version", "size", "correlation_id", "code"}  # fmt: skip
# A struct member whose own name is a header field's, or another field's of another type,
# is named container.member (README: Wireshark and tshark).
QUALIFIED = {"key", "code", "reference"}
CHUNK_NAMES = {"chunk_id": "first_offset"}
BYTES = {"challenge", "sasl_data"}


def streamdissect(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "streamdissect", *args], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout


# (a capture's jsonl and its trees are made once, for the tests of both tables)
pdus = functools.cache(tshark_pdml.pdus)


@functools.cache
def jsonl(capture: Path) -> list[dict]:
    return [json.loads(line) for line in streamdissect("frames", "--format", "jsonl",
                                                          str(capture)).splitlines()]  # fmt: skip


def test_tshark_is_installed_with_lua():
    """The test command installs it (scripts/brokers.sh): missing, it fails there."""
    version = subprocess.run([tshark_pdml.tshark(), "--version"], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    assert "with Lua" in version


def test_every_shipped_capture_is_tested():
    assert len(CAPTURES) >= 15
    assert {p.name.split("-")[0] for p in CAPTURES} >= {"raw", "rstream", "rbfly"}


# --- the same frames as the jsonl ---------------------------------------------------------


def singular(name: str) -> str:
    return name[:-1] if name.endswith("s") else name + "_item"


def expected_fields(row: dict) -> dict[str, list]:
    """Filter name -> the values the tree should show, in wire order, from a frames line."""
    out: dict[str, list] = defaultdict(list)

    def add(name: str, value, container: str | None = None) -> None:
        if value is None:
            return
        if name == "chunk":
            for member, v in value.items():
                out["chunk." + CHUNK_NAMES.get(member, member)].append(v)
        elif isinstance(value, dict):
            for k, v in value.items():
                out[f"{name}.key"].append(k)
                out[f"{name}.value"].append(v)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    for member, v in item.items():
                        add(member, v, name)
                else:
                    add(singular(name), item, name)
        elif name == "offset" and row.get("offset_type") == 5:
            out["offset_timestamp"].append(value)
        else:
            out[f"{container}.{name}" if container and name in QUALIFIED else name].append(value)

    for name, value in row.items():
        if name not in META:
            add(name, value)
    return out


def shown(pdu: Pdu, name: str, like) -> list:
    if name in BYTES:
        values = [e.get("value", "") for e in pdu.all.get(tshark_pdml.PREFIX + name, [])]
        # the dissector shows PLAIN's names and hides the password; the jsonl writes "***"
        return [v + "2a2a2a" if name == "sasl_data" else v for v in values]
    texts = pdu.shows(name)
    if isinstance(like, bool):
        return [bool(int(t)) for t in texts]
    if isinstance(like, int):
        return [int(t, 0) for t in texts]
    return texts


def frame_of(pdu: Pdu) -> dict:
    return {name: pdu.number_of(name) for name in ("key", "version", "size", "correlation_id",
                                                   "code")}  # fmt: skip


def by_direction(rows: list[dict], found: list[Pdu]) -> dict:
    """(connection, direction) -> [(row, pdu)], the tshark trees matched by endpoints."""
    sides = {}
    for row in rows:
        client, server = row["connection"].split("#")[0].split("-")
        sides[(client, server)] = (row["connection"], "c2s")
        sides[(server, client)] = (row["connection"], "s2c")
    rows_of, pdus_of = defaultdict(list), defaultdict(list)
    for row in rows:
        rows_of[(row["connection"], row["direction"])].append(row)
    for pdu in found:
        pdus_of[sides.get((pdu.src, pdu.dst), (pdu.src, pdu.dst))].append(pdu)
    assert set(pdus_of) == set(rows_of)
    return {side: (rows_of[side], pdus_of[side]) for side in rows_of}


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_same_frames_as_the_jsonl(plugin, capture):
    rows = [r for r in jsonl(capture) if r["command"] != "Anomaly"]
    assert rows and not any("#" in r["connection"] for r in rows)
    found = pdus(plugin, capture)
    compared = Counter()
    for side, (lines, trees) in by_direction(rows, found).items():
        assert len(trees) == len(lines), side
        for row, pdu in zip(lines, trees, strict=True):
            where = (side, pdu.number, row["command"])
            assert frame_of(pdu) == {k: row[k] for k in frame_of(pdu)}, where
            if row.get("unknown") or row.get("malformed"):
                assert ("unknown" if row.get("unknown") else "malformed") in pdu.experts()
                continue
            assert pdu.one("command") == row["command"], where
            for name, values in expected_fields(row).items():
                assert shown(pdu, name, values[0]) == values, (where, name)
                compared[name] += len(values)
            assert "malformed" not in pdu.experts(), where
    assert compared, "no field compared"


def test_the_key_fields_are_compared():
    """The fields the issue names are among those the comparison reaches on the corpus."""
    names = set()
    for capture in CAPTURES:
        for row in jsonl(capture):
            names |= set(expected_fields(row))
    assert {"publisher_id", "publishing_id", "subscription_id", "credit", "stream",
            "chunk.first_offset", "chunk.num_entries", "entry_count", "errors.code",
            "properties.key", "mechanism", "username"} <= names  # fmt: skip


# --- the same pairs as analyze's latency table ---------------------------------------------


def latency_from_trees(rows: list[dict], found: list[Pdu]) -> dict[str, dict]:
    """Per command: calls, answered, open requests, orphan responses, duplicate ids and the
    response times, counted from the trees the way analysis.latency counts records."""
    stats: dict[str, dict] = {}

    def of(command: str) -> dict:
        return stats.setdefault(command, {"calls": 0, "answered": 0, "orphan_responses": 0,
                                          "duplicate_ids": 0, "times": [], "pairs": []})  # fmt: skip

    for (connection, direction), (_, trees) in by_direction(rows, found).items():
        for pdu in trees:
            command = pdu.one("command")
            tune = command == "Tune"
            if command is None or (not tune and (command in NOT_CALLS
                                                 or pdu.one("correlation_id") is None)):  # fmt: skip
                continue
            responding = (direction == "c2s") if tune else pdu.one("response") == "1"
            row = of(command)
            if not responding:
                row["calls"] += 1
                row["answered"] += pdu.one("response_in") is not None
                row["duplicate_ids"] += "duplicate_id" in pdu.experts()
            elif pdu.one("response_to") is None:
                row["orphan_responses"] += 1
                assert "orphan_response" in pdu.experts()
            else:
                row["times"].append(float(pdu.one("time")) * 1000)
                asked = "s2c" if direction == "c2s" else "c2s"
                row["pairs"].append((connection, asked, pdu.number_of("correlation_id"),
                                     int(Decimal(pdu.one("time")) * 10**9)))  # fmt: skip
    return stats


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_same_pairs_as_the_latency_table(plugin, capture):
    rows = [r for r in jsonl(capture) if r["command"] != "Anomaly"]
    report = json.loads(streamdissect("analyze", "--format", "json", str(capture)))
    stats = latency_from_trees(rows, pdus(plugin, capture))
    table = {row["command"]: row for row in report["latency"]}
    assert set(table) == {c for c, s in stats.items() if s["calls"] or s["orphan_responses"]}
    for command, row in table.items():
        got = stats[command]
        assert got["calls"] == row["calls"], command
        assert got["answered"] == row["answered"], command
        assert got["calls"] - got["answered"] == row["open_requests"], command
        assert got["orphan_responses"] == row["orphan_responses"], command
        assert got["duplicate_ids"] == row["duplicate_ids"], command
        assert len(got["times"]) == row["answered"], command
        if got["times"]:
            assert min(got["times"]) == pytest.approx(row["min_ms"], abs=0.0011), command
            assert max(got["times"]) == pytest.approx(row["max_ms"], abs=0.0011), command
    # and pair by pair: the same requests answered after the same nanoseconds
    answered = analyze(str(capture)).requests.query("status == 'answered'")
    expected = Counter(
        (r.connection, r.direction, r.command, None if pd.isna(r.correlation_id)
         else int(r.correlation_id), int(r.response_ts_ns) - int(r.request_ts_ns))
        for r in answered.itertuples()
    )  # fmt: skip
    got_pairs = Counter((c, d, command, corr, ns) for command, got in stats.items()
                        for c, d, corr, ns in got["pairs"])  # fmt: skip
    assert got_pairs == expected


def test_a_response_time_filter_works(plugin):
    """`rabbitmq_stream.time > 0.01` keeps just the responses slower than 10 ms."""
    capture = next(p for p in CAPTURES if p.name.startswith("rstream-publish-confirm"))
    rows = jsonl(capture)
    slow = [t for t in latency_from_trees(rows, pdus(plugin, capture)).values()
            for ms in t["times"] if ms > 10]  # fmt: skip
    kept = pdus(plugin, capture, "-Y", "rabbitmq_stream.time > 0.01")
    times = [float(t) for p in kept for t in p.shows("time", direct=True)]
    assert len([t for t in times if t > 0.01]) == len(slow)
    assert all(pdu.shows("time", direct=True) for pdu in kept if pdu.one("time") is not None)


def test_calls_are_what_analysis_pairs():
    """The plugin pairs the commands with correlation ids, and Tune; analysis.latency
    pairs every command but its NOT_CALLS."""
    from streamdissect.wireshark.layouts import pairing

    paired = {m.command for m in spec.MESSAGES if pairing(m)}
    assert paired == set(spec.COMMANDS) - NOT_CALLS
