"""The `analyze` report: a JSON object of tables, or the same tables as readable text."""

from __future__ import annotations

import json
import math
from array import array
from functools import partial
from itertools import chain, repeat
from json.encoder import encode_basestring_ascii
from numbers import Integral
from typing import TYPE_CHECKING

import numpy as np

from streamdissect.analysis.driver import Analysis
from streamdissect.capture.native import optional
from streamdissect.cli._float_texts import exact_parts
from streamdissect.protocols import registry
from streamdissect.tables import schema
from streamdissect.tables.convert import _cast, dataframe, plain_records

if TYPE_CHECKING:
    import pandas as pd


CONNECTION_COLUMNS = [
    "connection", "client", "server", "start_ns", "end_ns", "handshake_ms", "sasl_mechanism",
    "user", "vhost", "frame_max", "heartbeat", "frames_c2s", "frames_s2c", "bytes_c2s",
    "bytes_s2c", "heartbeats_c2s", "heartbeats_s2c", "missed_heartbeat_gaps", "close_code",
    "close_reason", "closed_by", "tcp_end",
]
LAG_COLUMNS = [
    "ts_ns", "connection", "subscription_id", "chunk_first_offset", "num_records",
    "committed_chunk_id", "lag", "delivery_latency_ms",
]

STALL_COLUMNS = ["start_ns", "end_ns", "duration_ms"]  # (each credit row's stalls in JSON)


ROW_CHUNK = 2048  # rows formatted at a time by json_write (~0.6 MB of text; at 512, the
# chunks' fixed costs, a few numpy calls and a row template each, were ~6 % of it)


class RowStream:
    """A table's rows for the JSON report, formatted a chunk at a time, column by column (the
    report of a large capture is written without ever holding all its row dicts)."""

    def __init__(self, table: str, rows: list, columns: list[str] | None = None) -> None:
        self.table, self.rows, self.columns = table, rows, columns

    def __len__(self) -> int:
        return len(self.rows)

    def chunks(self, size: int = 0):
        rows = self.rows
        size = size or ROW_CHUNK
        for at in range(0, len(rows), size):
            yield plain_records(self.table, rows[at : at + size], self.columns)

    def texts(self, level: int, step: str):
        """The rows as json.dumps(indent) writes them inside a list at `level`: one string
        per chunk, each row preceded by ",\n" + indent (the first by "\n" + indent)."""
        names = schema.column_names(self.table)
        kinds = {c.name: c.kind for c in schema.TABLES[self.table]}
        wanted = self.columns if self.columns is not None else names
        where = {n: i for i, n in enumerate(names)}
        item = "\n" + step * (level + 1)
        field = "\n" + step * (level + 2)
        heads = _heads(field, map(encode_basestring_ascii, wanted))
        texts = [_COLUMN_TEXT[kinds[n]] if kinds[n] != schema.MAP
                 else partial(_map_column, field, step) for n in wanted]  # fmt: skip
        pieces = _pieces(item + "{", heads, item + "}")
        specs = bytes(_SPECS[kinds[n]] for n in wanted)
        maps = [i for i, n in enumerate(wanted) if kinds[n] == schema.MAP]
        rows = self.rows
        dict_rows = bool(rows) and isinstance(rows[0], dict)
        by_column = getattr(rows, "column_slices", None)  # (CompactRows: no tuple a row)
        size = ROW_CHUNK
        for at in range(0, len(rows), size):
            if by_column is not None:
                every = by_column(at, min(at + size, len(rows)))
                n = len(every[0]) if every else 0
                columns = [every[where[name]] for name in wanted]
            else:
                chunk = rows[at : at + size]
                n = len(chunk)
                if dict_rows:
                    columns = [[r.get(name) for r in chunk] for name in wanted]
                else:
                    every = list(zip(*chunk))
                    columns = [every[where[name]] for name in wanted]
            if compiled_rows is not None:
                given = list(columns)
                for i in maps:  # (a map's JSON texts made here, written as they are)
                    given[i] = texts[i](columns[i])
                made = compiled_rows.json_rows(pieces, specs, given, n)
                if made is not None:
                    yield made
                    continue
            cells = [_column_format(text, column) for text, column in zip(texts, columns)]
            yield _joined_rows(item + "{", heads, cells, item + "}", n)


def _pieces(opening: str, heads: list[str], close: str) -> list[str]:
    """The text before a row's first value, between two values, after the last, for
    compiled_rows."""
    return [opening + heads[0], *heads[1:], close] if heads else [opening + close]


def _heads(field: str, keys) -> list[str]:
    """What precedes each value of a row (its key's JSON text given): the separator, the
    indent and the key."""
    return [("," if i else "") + field + key + ": " for i, key in enumerate(keys)]


def _joined_rows(opening: str, heads: list[str], cells: list[tuple], close: str, n: int) -> str:
    """`n` rows, comma-separated, each `opening`, its columns (a head each, then the cell's
    value) and `close`. `cells`: each column's _column_format. Rows with a column of texts
    (a send's ids, keys and tags) are one join: the text between two columns that differ
    from row to row given once, repeated (the columns of one value in it); rows of numbers
    only (a Deliver's) are one %-format of the repeated row, ints and floats formatted
    there (%d, %r: as int.__repr__, float.__repr__), which makes no text a number."""
    if any(spec == "%s" for _, spec, _ in cells):
        pieces: list = []
        fixed = "," + opening  # (the first row's comma is cut off at the end)
        for head, (constant, spec, values) in zip(heads, cells):
            fixed += head
            if constant is not None:
                fixed += constant
            else:
                texts = _NUMBER_TEXT[spec](*values)
                pieces += (repeat(fixed), texts)
                fixed = ""
        pieces.append(repeat(fixed + close))
        return "".join(chain.from_iterable(zip(*pieces)))[1:]
    specs, numbers = [], []
    for constant, spec, values in cells:
        specs.append(spec if constant is None else constant.replace("%", "%%"))
        if constant is None:
            numbers += values
    template = (opening + "".join(h.replace("%", "%%") + f for h, f in zip(heads, specs))
                + close)  # fmt: skip
    return ",".join([template] * n) % tuple(chain.from_iterable(zip(*numbers)))


# The rows written by compiled code (_json_rows.c, optional, capture.native's
# STREAMDISSECT_NATIVE): the same text as _column_format and _joined_rows make, a value's
# text chosen by its column's spec (None: a value it leaves to them, which cast it).
compiled_rows = optional("streamdissect.cli._json_rows")
_SPECS = {"int64": ord("i"), "int32": ord("i"), "uint64": ord("i"), "float64": ord("f"),
          "string": ord("t"), "bool": ord("b"), schema.MAP: ord("s")}  # fmt: skip


_NUMBER_TEXT = {  # a column's texts, for a join: as its %-format would write them
    "%s": lambda texts: texts,
    "%d": partial(map, int.__repr__),
    "%r": partial(map, float.__repr__),
    "%d%s": lambda ints, fractions: map(str.__add__, map(int.__repr__, ints), fractions),
}


def _column_format(text, values) -> tuple[str | None, str, list | None]:
    """How a chunk's column goes into its rows: (its one JSON text, "", None) for a column of
    None only, of one int, one string or one bool only (a consumer's connection, its
    subscription id, a send's `compressed`); (None, "%d", [the ints]) for an int column of
    ints only; for a float column of finite floats only, (None, "%d%s", [integer parts,
    fraction texts]) when _float_texts makes their repr so, else (None, "%r", [the floats])
    (a column of `_cells`, typed by its values: either); else (None, "%s", [its JSON texts
    from `text`])."""
    if values.__class__ is array:  # (kept as an array: every value one kind, none None)
        kinds = {int if values.typecode == "q" else float}
        if values.typecode == "q" and text in _INT_TEXTS:
            ints = np.frombuffer(values, dtype=np.int64)
            if (ints == ints[0]).all():
                return int.__repr__(values[0]), "", None
            return None, "%d", [values]
    elif values[0] is None and values.count(None) == len(values):  # (only None equals None)
        kinds = {_NONE_TYPE}
    else:
        kinds = set(map(type, values))
    if len(kinds) == 1:
        kind = kinds.pop()
        if kind is int and text in _INT_TEXTS:
            if values.count(values[0]) == len(values):
                return int.__repr__(values[0]), "", None
            return None, "%d", [values]
        if kind is str and text in _STR_TEXTS and values.count(values[0]) == len(values):
            return encode_basestring_ascii(values[0]), "", None
        if kind is float and text in _FLOAT_TEXTS:
            parts = exact_parts(values)
            if parts is not None:
                return None, "%d%s", parts
            if all(map(math.isfinite, values)):
                return None, "%r", [values]
        if kind is bool and text is _bool_column and values.count(values[0]) == len(values):
            return _BOOL_TEXT[values[0]], "", None
        if kind is _NONE_TYPE:
            return "null", "", None
    return None, "%s", [text(values)]


def _int_cell(v) -> str:
    v = _cast("int64")(v)
    return "null" if v is None else int.__repr__(v)


def _float_cell(v) -> str:
    v = _cast("float64")(v)
    return "null" if v is None else _float_text(v)


def _str_cell(v) -> str:
    v = _cast("string")(v)
    return "null" if v is None else encode_basestring_ascii(v)


def _bool_cell(v) -> str:
    v = _cast("bool")(v)
    return "null" if v is None else "true" if v else "false"


def _one_kind(values, kind: type) -> list[str] | None:
    """The values' JSON texts in one C-level map when every value is a `kind` (a finite one,
    for floats) or every value is None (a v1 Deliver's committed chunk id and lag); else None.
    The usual table column."""
    kinds = set(map(type, values))
    if kinds <= {kind} and (kind is not float or all(map(math.isfinite, values))):
        return list(map(_REPR[kind], values))
    if kinds == _NONE:
        return ["null"] * len(values)
    return None


_NONE_TYPE = type(None)
_NONE = frozenset((_NONE_TYPE,))
_REPR = {int: int.__repr__, float: float.__repr__, str: encode_basestring_ascii}


def _int_column(values) -> list[str]:
    texts = _one_kind(values, int)
    return texts if texts is not None else [
        int.__repr__(v) if v.__class__ is int else "null" if v is None else _int_cell(v)
        for v in values
    ]  # fmt: skip


def _float_column(values) -> list[str]:
    texts = _one_kind(values, float)
    return texts if texts is not None else [
        float.__repr__(v) if v.__class__ is float and v - v == 0
        else "null" if v is None else _float_cell(v)
        for v in values
    ]  # fmt: skip


def _str_column(values) -> list[str]:
    texts = _one_kind(values, str)
    if texts is not None:
        return texts
    return [
        encode_basestring_ascii(v) if v.__class__ is str else "null" if v is None else _str_cell(v)
        for v in values
    ]


def _bool_column(values) -> list[str]:
    if set(map(type, values)) <= _BOOL_KINDS:  # (the usual column: _bool_cell's texts)
        return list(map(_BOOL_TEXT.__getitem__, values))
    return [_bool_cell(v) for v in values]


_BOOL_KINDS = frozenset((bool, type(None)))
_BOOL_TEXT = {True: "true", False: "false", None: "null"}


def _map_column(field: str, step: str, values) -> list[str]:
    """A map column's JSON objects as json.dumps(indent) writes them in a row's `field`."""
    cast = _cast(schema.MAP)
    return ["null" if v is None else json.dumps(cast(v), indent=step).replace("\n", field)
            for v in values]  # fmt: skip


# column kind -> values -> their JSON texts, as plain_records + json.dumps make them
_COLUMN_TEXT = {"int64": _int_column, "int32": _int_column, "uint64": _int_column,
                "float64": _float_column,
                "string": _str_column, "bool": _bool_column}  # fmt: skip


def _peer_properties(rows) -> list[dict]:
    """Each connection's client and server PeerProperties as JSON objects."""
    out = []
    for row in rows:
        row = row if isinstance(row, dict) else dict(zip(schema.column_names("connections"), row))
        out.append({
            "connection": row["connection"],
            "client": json.loads(row["client_properties"] or "null"),
            "server": json.loads(row["server_properties"] or "null"),
        })
    return out


def to_json(a: Analysis, lazy: bool = False, messages: bool = False) -> dict:
    """The report as a JSON-able dict; `lazy`: row tables as RowStream (for json_write);
    `messages`: with the messages table (analyze(messages=True))."""
    table = RowStream if lazy else (lambda *args: plain_records(*args))
    credit = []
    for row in a.credit_rows(stall_lists=not lazy):
        if lazy:  # (the stalls' rows written a chunk at a time)
            row["stalls"] = RowStream("stalls", row["stalls"], STALL_COLUMNS)
        credit.append({k: row[k] for k in (
            "connection", "subscription_id", "stream", "initial_credit", "credits_granted",
            "credit_frames", "chunks_delivered", "records_delivered", "credit_errors",
            "final_credit", "stalls", "stalled_ms_total", "cut_frames")})
    extra = {"messages": table("messages", a.rows("messages"))} if messages else {}
    return {
        "capture": {"first_ns": a.first_ns, "last_ns": a.last_ns},
        "connections": table("connections", a.rows("connections"), CONNECTION_COLUMNS),
        "peer_properties": _peer_properties(a.rows("connections")),
        "latency": table("latency", a.rows("latency")),
        "confirms": table("confirms", a.rows("confirms")),
        "credit": credit,
        "consumer_lag": table("deliveries", a.rows("deliveries"), LAG_COLUMNS),
        "throughput": table("throughput", a.rows("throughput")),
        "errors": table("errors", a.rows("errors")),
        **{s.table: table(s.table, rows) for s, rows in protocol_sections(a)},
        "anomalies": table("anomalies", a.rows("anomalies")),
        **extra,
    }


def protocol_sections(a: Analysis) -> list[tuple]:
    """(section, its rows) of every protocol's report sections (protocols.base.ReportSection)
    the capture gave rows: none for a capture of the default protocol alone."""
    out = []
    for protocol in registry.PROTOCOLS:
        for section in protocol.report_sections:
            try:
                rows = a.rows(section.table)
            except KeyError:  # (that protocol's analyses were not made: no traffic of it)
                continue
            if len(rows):
                out.append((section, rows))
    return out


def wall_clock(ts_ns: int, local: bool = False) -> str:
    """A capture time (ns since the epoch) as a person reads it: `2026-11-21 14:03:12.144356`,
    UTC, or the machine's local time (its offset shown)."""
    from datetime import UTC, datetime

    seconds, ns = divmod(int(ts_ns), 1_000_000_000)
    when = datetime.fromtimestamp(seconds, UTC)
    if local:
        when = when.astimezone()
        return f"{when:%Y-%m-%d %H:%M:%S}.{ns // 1000:06d}{when:%z}"
    return f"{when:%Y-%m-%d %H:%M:%S}.{ns // 1000:06d}"


def _section(title: str, df: pd.DataFrame, columns: list[str] | None = None,
             local: bool = False) -> str:  # fmt: skip
    if columns is not None:
        df = df[[c for c in columns if c in df.columns]]
    line = "=" * len(title)
    if df.empty:
        return f"{title}\n{line}\n(none)\n"
    # capture times (*_ns) as wall-clock times, under their name without the unit
    times = {c: c[:-3] or "time" for c in df.columns if c.endswith("_ns")}
    if times:
        df = df.copy()
        for c in times:
            df[c] = [wall_clock(v, local) if isinstance(v, Integral) else None
                     for v in df[c].astype(object)]  # fmt: skip
        df = df.rename(columns={c: "time" if c == "ts_ns" else name for c, name in times.items()})
    shown = df.astype(object).where(df.notna(), "-")
    shown = shown.map(lambda v: f"{v:.3f}" if isinstance(v, float) else v)
    body = shown.to_string(index=False)
    return f"{title}\n{line}\n{body}\n"


def to_text(a: Analysis, max_rows: int = 50, local: bool = False, messages: bool = False) -> str:
    """The report as text tables: capture times as wall-clock times (UTC, or `local`),
    durations in ms; `messages`: the messages table's first rows too."""
    others = protocol_sections(a)
    parts = _default_sections(a, max_rows, local) if len(a.connections) or not others else []
    for section, rows in others:
        shown = rows[:max_rows] if section.one_row_an_event else rows
        df = _first_lines(dataframe(section.table, shown))
        columns = None if section.columns is None else list(section.columns)
        parts.append(_section(section.title, df, columns, local=local))
    parts.append(_section("Anomalies", dataframe("anomalies", a.rows("anomalies")[:max_rows]),
                          local=local))  # fmt: skip
    if messages:
        first = a.messages.head(max_rows)
        # (topic, tags and keys when a row has them: a protocol whose messages have them)
        named = [name for name in ("topic", "tags", "keys") if first[name].notna().any()]
        parts.append(_section(f"Messages (the first {max_rows})", first, [
            "ts_ns", "connection", "direction", "frame", "command", "publishing_id", "offset",
            "stream", *named, "size", "subject", "application_properties", "body_size",
            "body_preview"], local=local))  # fmt: skip
    return "\n".join(parts)


def _default_sections(a: Analysis, max_rows: int, local: bool) -> list[str]:
    """The default protocol's sections (RabbitMQ Stream): shown when the capture has a
    connection of it, or no other protocol's rows (an empty capture says "(none)" under each);
    a capture of another protocol alone is not given eight empty sections."""
    lag_summary = _lag_summary(a.rows("deliveries"))
    return [
        _section("Connections", a.connections, [
            "connection", "start_ns", "handshake_ms", "user", "vhost", "frame_max", "heartbeat",
            "frames_c2s", "frames_s2c", "heartbeats_c2s", "heartbeats_s2c",
            "missed_heartbeat_gaps", "close_code", "closed_by"], local=local),
        _section("Request latency (ms)", a.latency, local=local),
        _section("Publish confirms", a.confirms, [
            "connection", "publisher_id", "published", "confirmed", "errored", "unconfirmed",
            *_cut_column(a.confirms), "p50_ms", "p95_ms", "p99_ms", "max_ms"], local=local)
        + _cut_note(a.confirms),
        _section("Credit", a.credit, [
            "connection", "subscription_id", "initial_credit", "credits_granted",
            "chunks_delivered", "records_delivered", "stall_count", "stalled_ms_total",
            *_cut_column(a.credit)], local=local) + _cut_note(a.credit),
        _section("Credit stalls", dataframe("stalls", a.rows("stalls")[:max_rows]), local=local),
        _section("Consumer lag (per subscription)", lag_summary, local=local),
        _section("Throughput (per second of capture)", _throughput_summary(a.throughput),
                 local=local),
        _section("Errors", a.errors, local=local),
    ]


CUT_NOTE = ("cut_frames: frames the capture cut (snap length; anomaly not_captured), counted"
            " from their headers; what lay past the cut is not (ids unpaired, a Subscribe's"
            " credit): these figures are lower bounds\n")


def _cut_column(df: pd.DataFrame) -> list[str]:
    """["cut_frames"] when a row of the table has frames cut by the capture, else []."""
    return ["cut_frames"] if "cut_frames" in df and df["cut_frames"].any() else []


def _cut_note(df: pd.DataFrame) -> str:
    return CUT_NOTE if _cut_column(df) else ""


LAG_ROWS = 1 << 13  # Deliver rows summed at a time by _lag_summary


def _lag_summary(rows) -> pd.DataFrame:
    """Per (connection, subscription id), in their order: chunks, records, the largest lag,
    the median and largest delivery latency, as pandas' groupby of the deliveries table
    gives them; read LAG_ROWS rows at a time (a long capture's table is never one
    DataFrame), only the latencies kept whole (for the median)."""
    import numpy as np
    import pandas as pd

    groups: dict = {}  # (connection, subscription id) -> [chunks, records, max lag, latencies]
    for at in range(0, len(rows), LAG_ROWS):
        part = dataframe("deliveries", rows[at : at + LAG_ROWS])
        for key, group in part.groupby(["connection", "subscription_id"], dropna=False,
                                       sort=False):  # fmt: skip
            key = tuple(None if pd.isna(k) else k for k in key)
            kept = groups.setdefault(key, [0, 0, None, []])
            kept[0] += len(group)
            kept[1] += int(group["num_records"].sum())
            max_lag = group["lag"].max()
            if not pd.isna(max_lag):
                kept[2] = int(max_lag) if kept[2] is None else max(kept[2], int(max_lag))
            kept[3].append(group["delivery_latency_ms"].dropna().to_numpy(np.float64))
    if not groups:
        return pd.DataFrame()
    out = []
    for (connection, sid), (chunks, records, max_lag, parts) in sorted(
            groups.items(), key=lambda item: (item[0][0], item[0][1] is None, item[0][1] or 0)):
        values = np.concatenate(parts)
        out.append({"connection": connection, "subscription_id": sid, "chunks": chunks,
                    "records": records, "max_lag": max_lag,
                    "p50_delivery_ms": float(np.median(values)) if len(values) else None,
                    "max_delivery_ms": float(values.max()) if len(values) else None})  # fmt: skip
    return pd.DataFrame(out)


def _first_lines(df: pd.DataFrame) -> pd.DataFrame:
    """Text cells cut at their first line (a RocketMQ remark's second is a FAQ link)."""
    for name in df.columns:
        if df[name].dtype == "string":
            df[name] = df[name].str.split("\n", n=1).str[0]
    return df


def _throughput_summary(tp: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    if tp.empty:
        return tp
    measures = ["published_msgs", "published_bytes", "confirmed_msgs", "delivered_msgs",
                "delivered_bytes"]
    return pd.DataFrame({
        "measure": measures,
        "total": [int(tp[m].sum()) for m in measures],
        "peak_per_s": [int(tp[m].max()) for m in measures],
        "seconds": [len(tp)] * len(measures),
    })


# --- JSON text ---------------------------------------------------------------------------


def _scalar(v) -> str | None:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    t = type(v)
    if t is int:
        return int.__repr__(v)
    if t is str:
        return encode_basestring_ascii(v)
    if t is float:
        if math.isnan(v):
            return "NaN"
        if v in (math.inf, -math.inf):
            return "Infinity" if v > 0 else "-Infinity"
        return float.__repr__(v)
    return None


def _float_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if v in (math.inf, -math.inf):
        return "Infinity" if v > 0 else "-Infinity"
    return float.__repr__(v)


_TEXT = {
    type(None): lambda v: "null",
    bool: lambda v: "true" if v else "false",
    int: int.__repr__,
    str: encode_basestring_ascii,
    float: _float_text,
}


def _flat_rows(rows: list, level: int, step: str) -> str | None:
    """A list of dicts of plain values, as the json module indents it (None: not that)."""
    inner = "\n" + step * (level + 2)
    head = "\n" + step * (level + 1)
    close = "\n" + step * (level + 1) + "}"
    try:
        joined = _same_key_rows(rows, inner, head + "{", close)
        if joined is None:
            keys: dict = {}
            text = _TEXT
            out = [",".join([
                inner + (keys.get(k) or keys.setdefault(k, encode_basestring_ascii(k) + ": "))
                + text[v.__class__](v)
                for k, v in row.items()
            ]) for row in rows]  # fmt: skip
            joined = ",".join([head + "{" + r + close if r else head + "{}" for r in out])
    except (KeyError, AttributeError, TypeError):
        return None
    return "[" + joined + "\n" + step * level + "]"


def _same_key_rows(rows: list, inner: str, opening: str, close: str) -> str | None:
    """_flat_rows' rows, joined, column by column (as RowStream.texts), when
    every row has the first one's keys in its order (a table's rows: thousands of stalls);
    None otherwise."""
    if not rows or rows[0].__class__ is not dict or not rows[0]:
        return None
    names = tuple(rows[0])
    if any(r.__class__ is not dict or tuple(r) != names for r in rows):
        return None
    columns = list(zip(*[r.values() for r in rows]))
    heads = _heads(inner, map(encode_basestring_ascii, names))
    if compiled_rows is not None:  # (each value's text by its type, as _cells)
        made = compiled_rows.json_rows(_pieces(opening, heads, close), b"v" * len(names),
                                       columns, len(rows))  # fmt: skip
        if made is not None:
            return made
    cells = [_column_format(_cells, column) for column in columns]
    return _joined_rows(opening, heads, cells, close, len(rows))


def _cells(values: tuple) -> list[str]:
    """A column's JSON texts, by each value's type (a row of dicts has no schema)."""
    texts = _one_kind(values, int)
    if texts is None:
        texts = _one_kind(values, float)
    if texts is None:
        text = _TEXT
        texts = [text[v.__class__](v) for v in values]
    return texts


# column texts whose all-int (all-finite-float) columns are their values' int (float) reprs
_INT_TEXTS = (_int_column, _cells)
_FLOAT_TEXTS = (_float_column, _cells)
_STR_TEXTS = (_str_column,)  # (_cells of strings: per value, from _TEXT)


def json_text(obj, indent: int = 1) -> str:
    """Exactly `json.dumps(obj, indent=indent)`, several times faster on the report's many
    flat rows (the json module's indenting encoder is pure Python)."""
    parts: list[str] = []
    _dump(obj, 0, " " * indent, _Out(parts.append))
    return "".join(parts)


def json_write(obj, write, indent: int = 1) -> None:
    """json_text(obj) given to `write` piece by piece (RowStream values welcome)."""
    out = _Out(write, flush_at=FLUSH_CHARS)
    _dump(obj, 0, " " * indent, out)
    out.flush()


# json_write hands `write` about this many characters at a time. Counted in characters, not
# pieces: a RowStream piece is a whole chunk of rows, and holding a fixed number of those
# held the whole report (then a joined copy, then the encoded copy), so peak memory grew
# with the capture.
FLUSH_CHARS = 1 << 16


class _Out:
    __slots__ = ("flush_at", "held", "parts", "write")

    def __init__(self, write, flush_at: int = 0) -> None:
        self.write = write
        self.flush_at = flush_at  # characters to gather before writing; 0: write each piece
        self.parts: list[str] = []
        self.held = 0

    def append(self, text: str) -> None:
        if not self.flush_at:
            self.write(text)
            return
        if len(text) >= self.flush_at:  # (a chunk of rows: written as it is, not joined)
            self.flush()
            self.write(text)
            return
        self.parts.append(text)
        self.held += len(text)
        if self.held >= self.flush_at:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.write("".join(self.parts))
            self.parts.clear()
            self.held = 0


def _dump(o, level: int, step: str, out: _Out) -> None:
    if isinstance(o, RowStream):
        if not len(o):
            out.append("[]")
            return
        first = True
        for text in o.texts(level, step):  # (a chunk's text not copied to add the comma)
            out.append("[" if first else ",")
            out.append(text)
            first = False
        out.append("\n" + step * level + "]")
        return
    text = _scalar(o)
    if text is not None:
        out.append(text)
        return
    if isinstance(o, dict):
        if not o:
            out.append("{}")
            return
        inner = "\n" + step * (level + 1)
        first = True
        for k, v in o.items():
            out.append(("{" if first else ",") + inner + encode_basestring_ascii(str(k)) + ": ")
            first = False
            text = _scalar(v)
            if text is not None:
                out.append(text)
            else:
                _dump(v, level + 1, step, out)
        out.append("\n" + step * level + "}")
        return
    if isinstance(o, (list, tuple)):
        if not o:
            out.append("[]")
            return
        if isinstance(o[0], dict):
            text = _flat_rows(o, level, step)
            if text is not None:
                out.append(text)
                return
        inner = "\n" + step * (level + 1)
        first = True
        for v in o:
            out.append(("[" if first else ",") + inner)
            first = False
            _dump(v, level + 1, step, out)
        out.append("\n" + step * level + "]")
        return
    out.append(json.dumps(o, indent=len(step)))  # anything else: the json module decides
