"""What every protocol's message view shares (`frames -V`, `--messages`, the messages
table): a body's bytes as people read them, printable UTF-8 as text, else hex, cut at
`--max-body` bytes; and a hex dump's lines. It names no protocol: each protocol's own view
(its sections, properties, damage) is its package's."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import NamedTuple

DEFAULT_MAX_BODY = 256  # bytes of a body shown (text or hex) unless asked otherwise
HEX_ROW = 16


def printable_text(data: bytes) -> str | None:
    """The bytes as text when they are printable UTF-8 (newlines and tabs allowed), else None."""
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError:
        return None
    if text.isprintable():
        return text
    plain = text.replace("\n", "").replace("\r", "").replace("\t", "")
    return text if plain.isprintable() else None


class BytesPreview(NamedTuple):
    """A body's bytes as shown: `value` is text or hex (`encoding`), cut at max_body bytes."""

    value: str
    encoding: str  # "text" or "hex"
    truncated: bool


def bytes_preview(raw: bytes, max_body: int | None) -> BytesPreview:
    """`raw` as text when its first `max_body` bytes (None: all) are printable UTF-8, else
    as hex; a cut that falls inside a character keeps the text before that character."""
    cut = raw if max_body is None or len(raw) <= max_body else raw[:max_body]  # (no copy)
    text = printable_text(cut)
    if text is None and len(cut) < len(raw):
        text = next(filter(None, (printable_text(cut[:-drop]) for drop in (1, 2, 3)
                                  if drop < len(cut))), None)  # fmt: skip
    if text is not None:
        return BytesPreview(text, "text", len(text.encode()) < len(raw))
    return BytesPreview(cut.hex(), "hex", len(cut) < len(raw))


def hex_lines(data: bytes, limit: int | None = None) -> list[str]:
    """A hex dump, 16 bytes a line with their printable characters, of the first `limit`
    bytes (None: all), and a last line saying how many more there are."""
    shown = data if limit is None else data[:limit]
    lines = []
    for at in range(0, len(shown), HEX_ROW):
        row = shown[at : at + HEX_ROW]
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{at:04x}  {row.hex(' '):<{HEX_ROW * 3 - 1}}  {text}")
    if len(shown) < len(data):
        lines.append(f"... {len(data) - len(shown)} more bytes")
    return lines


SECONDS: dict[int, str] = {}  # a second since the epoch as wall_clock_ms writes it
MOST_SECONDS = 4096  # (then the memo starts again: a hostile capture's times all differ)


def wall_clock_ms(ms: int) -> str:
    """Milliseconds since the epoch as a UTC wall-clock time (a hostile value: said so)."""
    try:
        second = SECONDS.get(ms // 1000)  # (a capture's chunks share their seconds)
    except TypeError:
        return "not a time"
    if second is None:
        try:
            when = datetime.fromtimestamp(ms / 1000, UTC)
        except (OverflowError, ValueError, OSError, TypeError):
            return "not a time"
        second = when.strftime("%Y-%m-%d %H:%M:%S.")
        if len(SECONDS) >= MOST_SECONDS:
            SECONDS.clear()
        SECONDS[ms // 1000] = second
    return second + f"{ms % 1000:03d} UTC"


def body_words(row: dict, size: str) -> list[str]:
    """The last words of a `--messages` text line: `body=SIZE` and the body's preview (when
    the row has one: not with --no-bodies), `...` when it is cut, then any damage."""
    body = f"body={size}"
    if "body" in row:
        body += " " + json.dumps(row["body"], ensure_ascii=False, default=str)
        if row["body_truncated"]:
            body += "..."
    words = [body]
    if row["error"] is not None:
        words.append(f"[damaged: {row['error']}]")
    return words
