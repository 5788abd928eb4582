"""RocketMQ's replay table: its frames as a table that turns back into the frame events its
analyses take (protocols.base.Protocol.replay_columns, replay_events), for the Spark job,
which analyses every frame of a server's connections in one task, a rotated set's stitched.

The frames table (`rocketmq_frames`) keeps what people read, not what the analyses read (a
heartbeat's body, a send's messages): a replay row keeps the record itself, pickled (the
job's own intermediate files, never an input). The responses are named again in capture
order (`request_code`, as the framers name them in one run: framing.name_response), since a
piece's framer never saw the requests of an earlier piece."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from streamdissect.framing.events import FrameEvent
from streamdissect.protocols.rocketmq.framing import OpenRequests, name_response
from streamdissect.protocols.rocketmq.records import RemotingCommand

_OTHER = {"c2s": "s2c", "s2c": "c2s"}
ENVELOPE = ("ts_ns", "connection", "direction", "stream_offset")


def replay_schema() -> Any:
    """The replay table's Arrow schema."""
    import pyarrow as pa

    return pa.schema([("ts_ns", pa.int64()), ("connection", pa.string()),
                      ("direction", pa.string()), ("stream_offset", pa.int64()),
                      ("record", pa.binary())])  # fmt: skip


class ReplayRows:
    """The replay table's builder: a row a frame event."""

    def __init__(self) -> None:
        self.kept: list[tuple] = []

    @property
    def rows(self) -> int:
        return len(self.kept)

    def add(self, event: Any) -> None:
        self.kept.append((event.ts_ns, event.connection, event.direction, event.stream_offset,
                          pickle.dumps(event.record, pickle.HIGHEST_PROTOCOL)))  # fmt: skip

    def batches(self, most: int = 65_536) -> list:
        import pyarrow as pa

        schema = replay_schema()
        out = []
        while self.kept:
            rows, self.kept = self.kept[:most], self.kept[most:]
            arrays = [pa.array([row[k] for row in rows], field.type)
                      for k, field in enumerate(schema)]  # fmt: skip
            out.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
        return out


def replay_events(table: Any) -> Iterator[FrameEvent]:
    """The frame events of a replay table in its row order (capture order), each response
    named by the request it answers as one run over the capture names it."""
    open_requests: dict[tuple[str, str], OpenRequests] = {}
    columns = [table[name].to_pylist() for name in (*ENVELOPE, "record")]
    for ts_ns, connection, direction, offset, data in zip(*columns, strict=True):
        record = pickle.loads(data)  # (the job's own files: see the docstring)
        if record.__class__ is RemotingCommand:
            own = open_requests.setdefault((connection, direction), OpenRequests())
            peer = open_requests.setdefault((connection, _OTHER[direction]), OpenRequests())
            if record.response:
                record.request_code = None  # (named here, from the frames before it)
            name_response(record, own, peer)
        yield FrameEvent(ts_ns, connection, direction, offset, record)
