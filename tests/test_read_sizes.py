"""capture.blocks.read_blocks: how much each read takes. The reads make the blocks, and the
blocks a run's memory (the helper's slots are touched as far as they go), so a rotated set
and a pipe are read in the reads one file would be: a set's files go on where the last one's
reads were, and a short read of a pipe is filled further while `more` says so (the helper:
while the parent is busy)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import worsen

from streamdissect.capture import packet_columns
from streamdissect.capture.blocks import Reading, read_blocks
from streamdissect.capture.errors import ignore_anomaly
from streamdissect.capture.limits import MAX_PACKET
from streamdissect.capture.pcap import RECORD_HEADER_SIZE
from streamdissect.capture.sources import open_sources

BLOCK, FIRST = 9_000, 1_000


def walked(paths: list[str], more=None) -> tuple[list[int], list[int]]:
    """(the bytes each read asked for, the bytes each walk was given: the block) over a
    capture of `paths`, read in this process into one buffer."""
    sources = open_sources(paths, lambda path: ignore_anomaly)
    asked, blocks = [], []
    for source in sources:
        read, walk = source.bytes.readinto, source.walker.walk

        def readinto(view, read=read):
            asked.append(len(view))
            return read(view)

        def counted(buf, pos, end, offset_of, walk=walk):
            blocks.append(end - pos)
            return walk(buf, pos, end, offset_of)

        source.bytes.readinto, source.walker.walk = readinto, counted
    size = BLOCK + RECORD_HEADER_SIZE + MAX_PACKET + packet_columns.PAD
    try:
        for _ in read_blocks(Reading(sources, BLOCK), memoryview(bytearray(size)), size,
                             lambda: 0, FIRST, more):  # fmt: skip
            pass
    finally:
        for source in sources:
            source.close()
    return asked, blocks


def test_the_files_of_a_set_go_on_where_the_last_ones_reads_were(tmp_path):
    paths = [str(p) for p in worsen.pieces(worsen.real_capture(), tmp_path, 4)]
    asked, _ = walked(paths)
    # (the first file: FIRST, twice that, ... up to BLOCK; never back to FIRST after it)
    assert asked[:4] == [FIRST, 2 * FIRST, 4 * FIRST, 8 * FIRST]
    assert asked[4:] == [BLOCK] * len(asked[4:])
    assert len(paths) == 4 and len(asked) > 4 + len(paths)  # (every file read in full blocks)


def _fifo(path: Path, folder: Path) -> tuple[str, subprocess.Popen]:
    """A FIFO that dd fills with the file's bytes, 500 at a time: reads of it come back short."""
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    feeder = subprocess.Popen(["dd", f"if={path}", f"of={fifo}", "bs=500", "status=none"])
    return str(fifo), feeder


def test_a_pipe_filled_further_is_read_in_the_blocks_of_the_file(tmp_path):
    path = worsen.real_capture()
    _, of_file = walked([str(path)])
    fifo, feeder = _fifo(path, tmp_path)
    _, of_pipe = walked([fifo], more=lambda fd: True)
    assert feeder.wait(timeout=60) == 0
    assert of_pipe == of_file
    assert len(of_file) > 5  # (the ramp and full blocks after it)
