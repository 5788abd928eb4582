"""Rotated capture sets: which connections carry on from one piece to the next, and the
frames across each cut.

Pieces are taken in time order. A connection part that starts mid-stream in a piece carries
on a part left open in an earlier piece when they have the same client and server and the
TCP sequence numbers meet (each direction that sent in both: the next part starts within
MAX_SEQ_JUMP of where the earlier one stopped). Pieces linked that way form a set: one
capture cut in files, numbered as one run over them would number it (`host:port-host:port`,
`#2` for a four-tuple's second connection).

A connection of several parts is a chain. At each cut, per direction, the earlier part's
framer is restored and fed the later part's head (facts.boundary_class): the frames it
completes are the frames across the cut, which neither piece has. It must end exactly where
the later piece's own framer found its first frame; then everything that piece decoded is
right, and its framer's end state carries on to the next cut. Stream offsets of a later part
are moved by where it starts in the whole connection.

The plan says, for the pieces' own rows: the global name of each part, the offset shift of
each direction, and the anomalies a single run would not have (the mid-stream start, the
resync at the head, the frame cut at the end); and for each chain: its parts, its
connections row (TCP facts over all parts) and the frames across its cuts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamdissect.engine.anomalies import Anomaly
from streamdissect.engine.state import ConnectionSummary, FrameEvent
from streamdissect.protocols.stream.protocol import TUNE_KEY
from streamdissect.rotated.facts import (
    HEAD_LIMIT,
    PartFacts,
    PieceFacts,
    SideFacts,
    framer_state,
    restore_framer,
)

SEQ_SPACE = 1 << 32
MAX_SEQ_JUMP = 1 << 24  # a cut loses or repeats far less than this of one direction
DIRECTIONS = ("c2s", "s2c")
PartKey = tuple[int, str]  # (piece index, local connection id)


@dataclass
class Chain:
    """A connection of the set made of several parts, or left open before the set's end:
    the pieces' rows for it are replaced by an analysis of all its frames."""

    name: str
    key: int  # the chain's number in the plan (names repeat across independent sets)
    parts: list[PartKey]
    summary: ConnectionSummary
    capture_end_ns: int | None
    frames: list[tuple[int, FrameEvent]] = field(default_factory=list)  # (piece, frame)
    protocol: str | None = None  # the name of the protocol it carries (None: the default)


@dataclass
class Plan:
    names: dict[PartKey, str] = field(default_factory=dict)  # parts of sets of 2+ pieces
    shifts: dict[tuple[int, str, str], int] = field(default_factory=dict)  # (+ direction)
    dropped: set[tuple[int, str, str, str, int]] = field(default_factory=set)
    # (piece, local id, direction) -> [from, to) local offsets of the piece's frames that
    # the frames across the cut replace
    replaced: dict[tuple[int, str, str], tuple[int, int]] = field(default_factory=dict)
    # (piece, local id, direction) -> the negotiated frame max (Tune) of an earlier part,
    # carried into a part whose piece never saw the Tune (its own framer had no limit)
    limits: dict[tuple[int, str, str], int] = field(default_factory=dict)
    # (piece, local id, direction) whose frame in progress at the end of its head (at the
    # upper bound of `replaced`) the frames across the cut read the size and key of already
    # (what they reported of it is theirs)
    decided: set[tuple[int, str, str]] = field(default_factory=set)
    # (piece, local id, direction) -> the local offset from which the piece's frames were
    # taken at its end without the next frame's head (facts: `tail`), when a later part
    # carries the direction on: one run read on, the frames across the cut are its
    tails: dict[tuple[int, str, str], int] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)  # found at the cuts
    chains: dict[int, Chain] = field(default_factory=dict)  # by Chain.key
    part_chain: dict[PartKey, int] = field(default_factory=dict)  # a chain's parts: its key
    sets: list[list[int]] = field(default_factory=list)  # piece indexes, time order

    def chain_of(self, piece: int, local_id: str) -> int | None:
        return self.part_chain.get((piece, local_id))


def _signed(delta: int) -> int:
    delta %= SEQ_SPACE
    return delta - SEQ_SPACE if delta >= SEQ_SPACE // 2 else delta


def _after(first_seq: int, end_seq: int, fin: bool) -> int:
    """Bytes between where a direction stopped and where it goes on (< 0: repeated). A FIN
    takes a sequence number but no byte: a part after it starts one number later, unless
    its first segment is the FIN again or carries no byte."""
    delta = _signed(first_seq - end_seq)
    return delta - 1 if fin and delta > 0 else delta


def _meets(earlier: PartFacts, later: PartFacts) -> bool:
    """Do the sequence numbers of `later` carry on from `earlier`? A later part that shares
    no direction with it (the pure ACKs of the other side, the last packets of a connection
    in the next file) contradicts nothing: it does."""
    for direction in DIRECTIONS:
        a, b = earlier.sides[direction], later.sides[direction]
        if a.started and b.started and abs(_after(b.first_seq, a.end_seq, a.fin)) > MAX_SEQ_JUMP:
            return False
    return True


def plan(pieces: list[PieceFacts]) -> Plan:
    """The stitching plan of a list of pieces (any order; indexes into the list)."""
    order = sorted((i for i, p in enumerate(pieces) if p.first_ns is not None),
                   key=lambda i: (pieces[i].first_ns, pieces[i].path))  # fmt: skip
    links = _links(pieces, order)
    result = Plan()
    for members in _sets(order, links):
        result.sets.append(members)
        if len(members) > 1:
            _plan_set(pieces, members, links, result)
    return result


def _links(pieces: list[PieceFacts], order: list[int]) -> dict[PartKey, PartKey]:
    """later part -> the earlier part it carries on. Any part may be carried on, a closed
    one too (its last ACK can come in the next file), until its four-tuple starts anew."""
    ends: dict[str, list[PartKey]] = {}  # per four-tuple, the parts that may be carried on
    parts = {(i, p.local_id): p for i in order for p in pieces[i].parts}
    links: dict[PartKey, PartKey] = {}
    for i in order:
        for part in pieces[i].parts:
            key = (i, part.local_id)
            waiting = ends.setdefault(part.base, [])
            if part.midstream:
                for candidate in waiting:
                    if candidate[0] != i and _meets(parts[candidate], part):
                        waiting.remove(candidate)
                        links[key] = candidate
                        break
            else:  # a new connection of this four-tuple: the closed ones are over
                waiting[:] = [k for k in waiting if not parts[k].closed]
            waiting.append(key)
    return links


def _sets(order: list[int], links: dict[PartKey, PartKey]) -> list[list[int]]:
    """Pieces linked by a connection, each set in time order."""
    parent = {i: i for i in order}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for (later, _), (earlier, _) in links.items():
        parent[root(later)] = root(earlier)
    sets: dict[int, list[int]] = {}
    for i in order:
        sets.setdefault(root(i), []).append(i)
    return list(sets.values())


def _plan_set(pieces: list[PieceFacts], members: list[int], links: dict[PartKey, PartKey],
              result: Plan) -> None:  # fmt: skip
    uses: dict[str, int] = {}
    parts_of: dict[str, list[tuple[int, PartFacts]]] = {}
    for i in members:
        for part in pieces[i].parts:
            earlier = links.get((i, part.local_id))
            if earlier is not None:
                name = result.names[earlier]
            else:
                n = uses[part.base] = uses.get(part.base, 0) + 1
                name = part.base if n == 1 else f"{part.base}#{n}"
            result.names[(i, part.local_id)] = name
            parts_of.setdefault(name, []).append((i, part))
    end = next((pieces[i].last_frame_ns for i in reversed(members)
                if pieces[i].last_frame_ns is not None), None)  # fmt: skip
    finished = max((pieces[i].end_ns for i in members if pieces[i].end_ns is not None),
                   default=None)  # (the set's last packet: where one run's framers finish)
    for name, parts in parts_of.items():
        if len(parts) > 1 or not parts[-1][1].closed:
            key = len(result.chains)
            result.chains[key] = _chain(name, key, parts, end, result, finished)
            result.part_chain.update(((i, p.local_id), key) for i, p in parts)


def _chain(name: str, key: int, parts: list[tuple[int, PartFacts]], end: int | None,
           result: Plan, finished: int | None = None) -> Chain:  # fmt: skip
    first, last = parts[0][1], parts[-1][1]
    chain = Chain(name, key, [(i, p.local_id) for i, p in parts], None, end,  # type: ignore[arg-type]
                  protocol=first.protocol)
    tunes: list[tuple[int, int, int]] = []  # Tunes among the frames across the cuts
    stream_bytes = {d: _stitch_direction(chain, parts, d, result, tunes, finished)
                    for d in DIRECTIONS}  # fmt: skip
    ends = {p.tcp_end for _, p in parts}  # (as TcpConnection.how_ended, over every part)
    tcp_end = "rst" if "rst" in ends else "fin" if "fin" in ends else "open"
    # (its frames are counted by apply.chain_tables, from the frames it analyses)
    chain.summary = ConnectionSummary(name, first.client, first.server, first.start_ns,
                                      last.end_ns, 0, 0, stream_bytes["c2s"],
                                      stream_bytes["s2c"], tcp_end, first.protocol)  # fmt: skip
    chain.frames.sort(key=lambda item: (item[0], item[1].ts_ns))
    return chain


def _latest_tune(tunes: list[tuple[int, int, int]], first: int, last: int) -> int | None:
    """The frame max of the latest Tune (ts, piece, frame max) across a cut of the pieces
    first..last."""
    found = [t for t in tunes if first <= t[1] <= last]
    return max(found)[2] if found else None


def _stitch_direction(chain: Chain, parts: list[tuple[int, PartFacts]], direction: str,
                      result: Plan, tunes: list[tuple[int, int, int]],
                      finished: int | None = None) -> int:  # fmt: skip
    """Carry one direction across the cuts; its bytes over the whole chain. A Tune holds
    both ways (as the framers learn it): `tunes` are those found across the cuts of the
    directions done before, and this one's are added (the client's Tune, the one that
    counts, is c2s: done first)."""
    state: tuple[dict, int] | None = None  # (framer state, its offset shift)
    end_seq = end_offset = None  # where the direction stopped so far (global offset)
    fin = False  # and whether a FIN came after it
    since = 0  # the first piece whose Tunes across a cut the state may not know
    # the last part with bytes of this direction: later parts (the other direction's last
    # packets) carry nothing of it on, and one run's framer finishes at the set's end
    last = max((n for n, (_, p) in enumerate(parts) if p.sides[direction].started), default=-1)
    for n, (i, part) in enumerate(parts):
        side = part.sides[direction]
        if not side.started:
            result.shifts[(i, part.local_id, direction)] = 0
            continue
        if end_seq is None or side.syn:
            shift = 0
            state = (side.end_state, 0)
        else:
            shift = end_offset + _after(side.first_seq, end_seq, fin)
            result.dropped.add((i, part.local_id, direction, "midstream_start", 0))
            tuned = _latest_tune(tunes, since, i)  # (the other direction's, at the cut)
            if state is not None and tuned is not None and tuned != state[0]["negotiated"]:
                state = (with_limit(state[0], tuned), state[1])
            carried = state[0].get("negotiated") if state is not None else None
            state = _across(chain, i, part, direction, side, state, shift, end_offset, result,
                            tunes)  # fmt: skip
            carried = _latest_tune(tunes, i, i) or carried  # (this direction's, at the cut)
            if carried is not None and state[0].get("negotiated") is None:
                # the piece never saw the Tune: the limit goes on across the cut, for this
                # piece's own frames (apply.limit_anomalies) and the next cut's
                result.limits[(i, part.local_id, direction)] = carried
                state = (with_limit(state[0], carried), state[1])
        result.shifts[(i, part.local_id, direction)] = shift
        # (a Tune the piece's own framers saw is later than those across its cut)
        since = i + 1 if side.end_state.get("negotiated") is not None else i
        end_seq, end_offset = side.end_seq, side.end_offset + shift
        fin = side.fin
        if n + 1 < len(parts) and side.tail is not None:  # (one run read on: see facts)
            result.dropped.add((i, part.local_id, direction, "resync", side.tail[0]))
            result.tails[(i, part.local_id, direction)] = side.tail[1]
        if n + 1 < len(parts) and state is not None:  # (the next part carries this on)
            cut = state[0]
            if cut["cur_start"] >= 0:
                result.dropped.add((i, part.local_id, direction, "truncated",
                                    cut["cur_start"] + state[1] - shift))  # fmt: skip
        all_head = result.replaced.get((i, part.local_id, direction)) == (0, 1 << 62)
        if n == last and (all_head or n + 1 < len(parts)) and state is not None:
            _finish(chain, parts[-1][0], direction, state, finished, result)
    return end_offset or 0


def _across(chain: Chain, piece: int, part: PartFacts, direction: str, side: SideFacts,
            state: tuple[dict, int] | None, shift: int, end_offset: int, result: Plan,
            tunes: list[tuple[int, int, int]]) -> tuple[dict, int]:  # fmt: skip
    """The frames across one cut: the earlier framer fed the later head. Returns the state
    that carries on (framer state, its offset shift); a part that is all head, when its
    direction goes on no further, is finished by _finish."""
    if state is None or side.head is None:
        return side.end_state, shift
    made: list[FrameEvent] = []
    found: list[Anomaly] = []

    def tuned(ts_ns: int, record: Any) -> None:
        # (a Stream Tune: another protocol's records have no `key`)
        if getattr(record, "key", None) == TUNE_KEY and getattr(record, "frame_max", None):
            framer.negotiated_frame_max(record.frame_max)  # (as engine.state's emit does)
            tunes.append((ts_ns, piece, record.frame_max))

    emit, report = _catchers(chain.name, direction, made, found, tuned)

    if side.head_overflow:
        result.anomalies.append(Anomaly(
            part.start_ns, chain.name, direction, "rotation_cut", shift, 0,
            f"frames across the cut between files are lost: no frame start in the first "
            f"{HEAD_LIMIT} bytes of the next file"))  # fmt: skip
        return side.end_state, shift
    framer = restore_framer(state[0], state[1], emit, report)
    _feed(framer, side, shift, end_offset, report)
    if side.head_state is None:  # the piece found no frame start before its end: all head
        result.replaced[(piece, part.local_id, direction)] = (0, 1 << 62)
        result.dropped.add((piece, part.local_id, direction, "resync", 0))
        result.anomalies.extend(found)
        chain.frames.extend((piece, f) for f in made)
        return framer_state(framer), 0
    synced, offset, cur_start = side.head_state
    if (framer.synced, framer.offset, framer.cur_start) != (
            synced, offset + shift, cur_start + shift if cur_start >= 0 else -1):  # fmt: skip
        result.anomalies.append(Anomaly(
            part.start_ns, chain.name, direction, "rotation_cut", shift, 0,
            "the frames across the cut between files do not meet the next file's first "
            "frame: that file's frames of this direction may be misread"))  # fmt: skip
        return side.end_state, shift
    # the piece's own frames decoded with the head are replaced by these
    result.replaced[(piece, part.local_id, direction)] = (
        side.head_sync, cur_start if cur_start >= 0 else offset)  # fmt: skip
    if cur_start >= 0 and framer.cur_head_only is not None:
        result.decided.add((piece, part.local_id, direction))
    result.dropped.add((piece, part.local_id, direction, "resync", 0))
    result.anomalies.extend(found)
    chain.frames.extend((piece, f) for f in made)
    return side.end_state, shift


def _catchers(name: str, direction: str, made: list[FrameEvent], found: list[Anomaly],
              on_record: Any = None) -> tuple[Any, Any]:  # fmt: skip
    """A restored framer's emit and report: its frames into `made` (each also to
    `on_record(ts, record)`), its anomalies into `found`."""
    def emit(offset: int, ts_ns: int, record: Any) -> None:
        made.append(FrameEvent(ts_ns, name, direction, offset, record))
        if on_record is not None:
            on_record(ts_ns, record)

    def report(kind: str, ts_ns: int, offset: int, length: int, detail: str) -> None:
        found.append(Anomaly(ts_ns, name, direction, kind, offset, length, detail))

    return emit, report


def _finish(chain: Chain, piece: int, direction: str, state: tuple[dict, int],
            finished: int | None, result: Plan) -> None:  # fmt: skip
    """The end of a direction whose last part is not where its framer finished in one run
    (a later part has none of its bytes, or its part was all head): its framer, restored,
    finishes at the set's last packet (`finished`), as one run's does; what the piece
    decided at its own end was dropped (tail, truncated)."""
    if finished is None:
        return
    made: list[FrameEvent] = []
    found: list[Anomaly] = []
    framer = restore_framer(state[0], state[1], *_catchers(chain.name, direction, made, found))
    framer.finish(finished)
    result.anomalies.extend(found)
    chain.frames.extend((piece, f) for f in made)


def with_limit(state: dict, frame_max: int) -> dict:
    """A framer state that knows the negotiated frame max, as the framer learns it."""
    framer = restore_framer(state, 0, None, None)
    framer.negotiated_frame_max(frame_max)
    return framer_state(framer)


def _feed(framer: Any, side: SideFacts, shift: int, end_offset: int, report: Any) -> None:
    """Feed the head (local offsets from 0, global from `shift`); bytes before `end_offset`
    (global) were fed already: a retransmission over the cut, reported as the reassembler
    reports one. A hole between is missing."""
    if shift > end_offset:
        framer.missing(shift - end_offset, side.head[0][1] if side.head else 0)
    at = shift  # global offset of the next head byte
    for item, ts_ns in side.head:
        if isinstance(item, int):  # missing bytes
            framer.missing(item, ts_ns)
            at += item
            continue
        already = min(max(end_offset - at, 0), len(item))
        if already == len(item):
            report("retransmission", ts_ns, at, len(item), "")
        elif already:
            report("overlap", ts_ns, at, already, f"{len(item) - already} new bytes")
        if len(item) > already:
            framer.data(memoryview(item)[already:], ts_ns)
        at += len(item)
