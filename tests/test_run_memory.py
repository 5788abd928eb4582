"""What a finished run leaves behind (issue 28, point 5): the fuzz campaign's resident memory
grew by steps because every bulk-engine run kept its block buffer after its last event."""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

from streamdissect.engine.dissect import Dissector

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "rstream-publish-confirm-3.10.pcap"
HELD_BOUND = 4 << 20  # the events and the connections' state: far less than a block (16 MiB)


def test_a_finished_run_keeps_no_block_buffer(tmp_path):
    """A gzip'd capture's size is unknown, so the bulk engine reads it in 16 MiB blocks (21 MiB
    with the patch room). Once the run's events are all out, the Dissector (alive: its
    connections are read after the run) must not hold that buffer: it did, from the
    BulkCapture's `buffer` and the fast path's views, in a reference cycle, so even
    dropping the Dissector left it to the cyclic collector; the fuzz process, with several
    such runs an input, ratcheted its resident memory up by 20-60 MiB steps."""
    path = tmp_path / "capture.pcap.gz"
    path.write_bytes(gzip.compress(CAPTURE.read_bytes()))
    tracemalloc.start()
    try:
        dissector = Dissector(engine="auto", helper_process=False)  # (a helper frees its own)
        events = list(dissector.run(str(path)))
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert events and list(dissector.connections)
    assert held < HELD_BOUND, f"{held / 2**20:.1f} MiB held after the run"
