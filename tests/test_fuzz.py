"""A short run of the fuzz campaign (the long one is `benchmarks/fuzz.py --minutes N`), and
proof that the harness reports what it is there to find."""

from __future__ import annotations

import random
import sys
import time
from types import SimpleNamespace

import pytest
from test_fuzz_harness import load

from streamdissect.capture import native as capture_native
from streamdissect.protocols import stream as protocol
from streamdissect.protocols.stream import native

fuzz = load()


def test_short_campaign_finds_nothing(tmp_path):
    logged: list[str] = []
    result = fuzz.campaign(
        counts={"frame": 3000, "stream": 300, "pcap": 60}, seed=20, out_dir=tmp_path,
        log=logged.append,
    )  # fmt: skip
    assert result["findings"] == 0, "\n".join(logged)
    assert result["mutator_errors"] == 0
    assert {n: t["inputs"] for n, t in result["targets"].items()} == {
        "frame": 3000, "stream": 300, "pcap": 60,
    }  # fmt: skip
    assert all(t["sampled_for_memory"] for t in result["targets"].values())
    assert not list(tmp_path.iterdir())


def test_a_crash_is_a_finding_saved_with_its_input(tmp_path, monkeypatch):
    real = fuzz.decode_frame

    def buggy(frame, **kwargs):
        if len(frame) > 8 and frame[5] == 0x17:  # Heartbeat-looking keys crash
            raise ValueError("planted bug")
        return real(frame, **kwargs)

    monkeypatch.setattr(fuzz, "decode_frame", buggy)
    logged: list[str] = []
    result = fuzz.campaign(counts={"frame": 3000}, seed=21, out_dir=tmp_path, log=logged.append)
    assert result["findings"] > 0 and "planted bug" in "\n".join(logged)
    saved = result["targets"]["frame"]["saved"]
    assert saved and all(p.startswith(str(tmp_path)) for p in saved)
    with pytest.raises(ValueError, match="planted bug"):
        fuzz.replay("frame", (tmp_path / saved[0].rsplit("/", 1)[1]).read_bytes())


def _spin(seconds: float) -> None:
    """A hang: computing on (by the CPU clock, which the time bound counts)."""
    until = time.process_time() + seconds
    while time.process_time() < until:
        pass


def test_a_hang_is_cut_by_the_time_bound(tmp_path, monkeypatch):
    monkeypatch.setitem(fuzz.TIME_BOUND_S, "frame", 0.05)
    monkeypatch.setattr(fuzz, "run_frame", lambda data: _spin(5))
    logged: list[str] = []
    started = time.process_time()  # (the bound counts CPU time: so does the check)
    result = fuzz.campaign(counts={"frame": 2}, seed=22, out_dir=tmp_path, log=logged.append)
    assert time.process_time() - started < 3  # (uncut: 10 s of spinning)
    assert result["findings"] == 2 and "hang" in "\n".join(logged)


def test_a_memory_hog_is_a_finding(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz, "SAMPLE_MEMORY_EVERY", 1)
    monkeypatch.setattr(fuzz, "run_frame", lambda data: bytearray(64 << 20))
    logged: list[str] = []
    result = fuzz.campaign(counts={"frame": 3}, seed=23, out_dir=tmp_path, log=logged.append)
    assert result["findings"] >= 1 and "memory" in "\n".join(logged)


def test_a_lying_record_is_a_finding(monkeypatch):
    """A record that re-encodes to other bytes than it was decoded from is reported."""
    frame = protocol.encode_record(protocol.make_record("Credit", subscription_id=1, credit=5))
    real = protocol.decode_frame(frame)
    real.credit = 6
    monkeypatch.setattr(fuzz, "decode_frame", lambda data, **kw: real)
    with pytest.raises(fuzz.Finding, match="re-encodes"):
        fuzz.run_frame(frame)


def test_a_columns_report_that_differs_is_a_finding(tmp_path, monkeypatch):
    """The pcap target holds the analyze report from HotFrames (the bulk engine's columns) to
    the record-based one."""
    from streamdissect.protocols.stream import hot

    path = fuzz.ROOT / "captures" / "rstream-consume-credit-3.10.pcap"
    data = path.read_bytes()
    fuzz.run_pcap(data, str(tmp_path / "same.pcap"))  # the real code: no finding
    real = hot.decode

    def off_by_one(*args, **kwargs):
        columns = real(*args, **kwargs)
        values, valid = columns.fields["credit"]
        values[valid] += 1
        return columns

    monkeypatch.setattr(hot, "decode", off_by_one)
    with pytest.raises(fuzz.Finding, match="columns report differs"):
        fuzz.run_pcap(data, str(tmp_path / "planted.pcap"))


@pytest.mark.skipif(native.loaded is None, reason="the C extension is not built or not wanted")
def test_a_compiled_walk_that_differs_is_a_finding(monkeypatch):
    """The stream target holds the compiled walk (protocols/stream/_native.c) to the Python
    one: a compiled walk that notes one frame too few is seen."""
    compiled = native.loaded

    def one_short(*args):
        end, starts, segs, big = compiled.hot_run(*args)
        return end, starts[:-8], segs[:-8], big

    stream = max(fuzz.corpus_streams(), key=len)[: 64 * 1024]  # (hot frames in it)
    fuzz.run_stream(stream)  # the real code: no finding
    monkeypatch.setattr(native, "loaded", SimpleNamespace(hot_run=one_short))
    with pytest.raises(fuzz.Finding, match="compiled walk differs"):
        fuzz.run_stream(stream)


@pytest.mark.skipif(capture_native.loaded is None,
                    reason="the C extension is not built or not wanted")  # fmt: skip
def test_a_compiled_record_walk_that_differs_is_a_finding(tmp_path, monkeypatch):
    """The pcap target holds the compiled record walk (capture/_records.c) to the reference
    engine: one that loses a block's last record is seen."""
    compiled = capture_native.loaded

    def one_lost(*args):
        starts, pos, bad = compiled.record_starts(*args)
        return starts[:-8], pos, bad

    data = (fuzz.ROOT / "captures" / "rstream-consume-credit-3.10.pcap").read_bytes()
    fuzz.run_pcap(data, str(tmp_path / "same.pcap"))  # the real code: no finding
    monkeypatch.setattr(capture_native, "loaded", SimpleNamespace(record_starts=one_lost))
    with pytest.raises(fuzz.Finding):
        fuzz.run_pcap(data, str(tmp_path / "planted.pcap"))


def test_a_framer_that_depends_on_segmentation_is_a_finding(monkeypatch):
    """With every Deliver kept by its head (the report's framing), a frame that comes in
    pieces is decoded from its head as a whole one is: the harness sees when it is not."""
    from streamdissect.framing import framer as framing

    # the stream with the most Delivers (their frame headers: key 8, version 1)
    stream = max(fuzz.corpus_streams(), key=lambda s: s.count(b"\x00\x08\x00\x01"))
    fuzz.run_stream(stream)  # the real code: no finding

    def finish_whole(self, ts_ns):  # planted: a frame that came in pieces decoded whole
        frame = b"".join(self.cur_parts)
        self._decode(self.cur_start, ts_ns, frame, self.cur_total - 4, self.cur_cut)
        self._reset_frame()

    monkeypatch.setattr(framing.Framer, "_finish_frame", finish_whole)
    with pytest.raises(fuzz.Finding, match="deliver_keep_limit.: 0"):
        fuzz.run_stream(stream)


def test_the_scapy_target_has_frames_of_more_than_100_list_items():
    """Seeds of the frame target (and so of its scapy checks) whose lists go past scapy's
    own limit of 100 items: each read whole by the codec, and through check_scapy."""
    import random

    from scapy.config import conf as scapy_conf

    def longest_list(record) -> int:
        lists = [getattr(record, name, None) or [] for name in ("publishing_ids", "streams")]
        entries = record.chunk["num_entries"] if record.command == "Deliver" else 0
        return max([len(v) for v in lists] + [entries])

    long_ones = []
    for frame in fuzz.crafted_frames(random.Random(3)):
        record = protocol.decode_frame(frame)
        assert isinstance(record, protocol.Record), getattr(record, "reason", "")
        if longest_list(record) > scapy_conf.max_list_count:
            long_ones.append(record.command)
            fuzz.check_scapy(frame, record)  # a Finding if the scapy layer reads less
    assert sorted(long_ones) == ["Deliver", "Metadata", "Publish", "Publish", "PublishConfirm"]


def test_a_campaign_leaves_no_scratch_file_behind(tmp_path):
    """run_pcap's gzip'd copy of each input sat beside the scratch file in /dev/shm (memory)
    after every campaign; both go."""
    result = fuzz.campaign(counts={"pcap": 8}, seed=24, out_dir=None, log=lambda _: None,
                           scratch_dir=str(tmp_path))  # fmt: skip
    assert result["targets"]["pcap"]["inputs"] == 8
    assert not list(tmp_path.iterdir())


def test_cutting_captures_into_pieces_does_not_grow_sys_path(tmp_path):
    """check_rotated put tests/ on sys.path once per capture input: 4,000 entries an 8-minute
    campaign (and every failed import walked them all)."""
    capture = (fuzz.CAPTURES / "rstream-publish-confirm-3.10.pcap").read_bytes()
    path = str(tmp_path / "input.pcap")
    fuzz.check_rotated(path, capture)
    before = list(sys.path)
    for _ in range(3):
        assert fuzz.check_rotated(path, capture) == 1
    assert sys.path == before


def test_a_seed_gives_the_same_inputs_whatever_the_clock(monkeypatch):
    """gzip wrote the time into its header, so a seed's gzip'd inputs (and seeds) differed from
    one run to the next."""

    def inputs(now: float) -> list[bytes]:
        monkeypatch.setattr(time, "time", lambda: now)
        rng = random.Random(25)
        frames = fuzz.FrameMutator(rng, fuzz.crafted_frames(rng))
        pcaps = fuzz.PcapMutator(rng, fuzz.corpus_packets(), frames)
        return [pcaps.mutate() for _ in range(200)]

    first, later = inputs(1_700_000_000.0), inputs(1_800_000_000.0)
    assert any(data[:2] == b"\x1f\x8b" for data in first)  # (some are gzip'd)
    assert first == later


def test_a_hang_inside_code_that_catches_its_own_errors_is_still_a_hang(tmp_path, monkeypatch):
    """The codec turns its own exceptions into malformed records; the time bound's exception
    went the same way, and the framer's output then changed with the moment the timer fired
    (a soak on a busy machine reported framer splits that differed)."""

    def guarded(data):
        try:
            _spin(5)
        except Exception:  # noqa: BLE001 - as the code under test guards itself
            return

    monkeypatch.setitem(fuzz.TIME_BOUND_S, "frame", 0.05)
    monkeypatch.setattr(fuzz, "run_frame", guarded)
    logged: list[str] = []
    result = fuzz.campaign(counts={"frame": 2}, seed=26, out_dir=tmp_path, log=logged.append)
    assert result["findings"] == 2 and "hang" in "\n".join(logged)


def test_waiting_for_a_cpu_is_no_hang(tmp_path, monkeypatch):
    """The bound counts the process's CPU time: a campaign at `nice -n 19` on a loaded
    machine waited for the CPU past the bound and reported hangs (waiting stands in here)."""
    monkeypatch.setitem(fuzz.TIME_BOUND_S, "frame", 0.05)
    monkeypatch.setattr(fuzz, "run_frame", lambda data: time.sleep(0.3))
    logged: list[str] = []
    result = fuzz.campaign(counts={"frame": 2}, seed=27, out_dir=tmp_path, log=logged.append)
    assert result["findings"] == 0, "\n".join(logged)


def test_a_sampled_input_leaves_nothing_in_the_campaign(tmp_path, monkeypatch):
    """A sampled input runs in a child under tracemalloc: what it keeps stays there (the
    campaign's own tracemalloc leaked in CPython 3.11), and its verdict comes back."""
    kept: list[bytes] = []
    monkeypatch.setattr(fuzz, "SAMPLE_MEMORY_EVERY", 1)
    monkeypatch.setattr(fuzz, "run_frame", lambda data: kept.append(bytes(1 << 20)))
    result = fuzz.campaign(counts={"frame": 3}, seed=24, out_dir=tmp_path, log=print)
    assert result["findings"] == 0
    assert result["targets"]["frame"]["peak_traced_kib"] >= 1024  # (measured in the child)
    assert kept == []


def test_a_sampled_input_whose_process_dies_is_a_finding(tmp_path, monkeypatch):
    import os
    import signal

    monkeypatch.setattr(fuzz, "SAMPLE_MEMORY_EVERY", 1)
    monkeypatch.setattr(fuzz, "run_frame", lambda data: os.kill(os.getpid(), signal.SIGKILL))
    logged: list[str] = []
    result = fuzz.campaign(counts={"frame": 2}, seed=25, out_dir=tmp_path, log=logged.append)
    assert result["findings"] == 2 and "ended without a verdict" in "\n".join(logged)
