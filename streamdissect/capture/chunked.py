"""Large buffered reads over a plain or gzip'd file, handing out memoryviews.

The readers never hold more than one read chunk (plus one record) in memory, whatever the
file size. Views point into the current chunk: whoever keeps packet bytes beyond the packet
must copy them (bytes(view)) so an old chunk is not pinned.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import stat
import sys
import zlib
from collections.abc import Callable
from typing import BinaryIO

from streamdissect.capture.errors import CaptureError

READ_CHUNK = 1 << 20  # big enough that read() calls vanish from profiles
GZIP_MAGIC = b"\x1f\x8b"
STDIN = "-"  # the path that means standard input (a pipe: packets as they arrive)


class ChunkedFile:
    """A window `buf[pos:]` over the file; `base` is the file offset of `buf[0]`."""

    def __init__(self, path: str, on_read: Callable[[int], None] | None = None) -> None:
        if path == STDIN:
            raw: BinaryIO | Pipe = Pipe(sys.stdin.buffer)
            on_read = None  # (no size to measure progress against)
        else:
            try:
                raw = open(path, "rb")  # noqa: SIM115 (closed by close())
            except OSError as exc:
                raise CaptureError(f"{path}: cannot open: {exc.strerror or exc}") from exc
            if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):  # a pipe: read as it comes
                raw = Pipe(raw, owned=True)
                on_read = None
        # gzip is detected by its magic, not by the file name.
        self.is_gzip = raw.read(2) == GZIP_MAGIC
        # the bytes it holds, when known before reading it (not a pipe's, nor gzip'd ones)
        self.size: int | None = None
        if not isinstance(raw, Pipe) and not self.is_gzip:
            self.size = os.fstat(raw.fileno()).st_size
        raw.seek(0)
        self._file: BinaryIO | Gunzip = Gunzip(raw) if self.is_gzip else raw
        self._raw = raw
        self.path = path
        self.buf = b""
        self.view = memoryview(self.buf)
        self.pos = 0
        self.base = 0
        self.eof = False
        # Why reading stopped early ("gzip stream cut", ...), for the truncated_file anomaly.
        self.damage: str | None = None
        # Told how many bytes of the file (compressed ones for gzip) each read consumed:
        # progress bars without a per-packet cost.
        self._on_read = on_read
        self._raw_position = 0

    def fileno(self) -> int:
        """The descriptor its bytes are read from."""
        return self._raw.fileno()

    def close(self) -> None:
        self._file.close()
        self._raw.close()

    def __enter__(self) -> ChunkedFile:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def offset(self) -> int:
        """File offset (in the decompressed stream) of the next unread byte."""
        return self.base + self.pos

    @property
    def available(self) -> int:
        return len(self.buf) - self.pos

    def _read(self, size: int) -> bytes:
        if self.eof:
            return b""
        try:
            data = self._file.read(size)
        except zlib.error as exc:
            self.damage = f"gzip stream damaged: {exc}"
            data = b""
        except OSError as exc:
            self.damage = f"read error: {exc}"
            data = b""
        if self._on_read is not None:
            position = self._raw.tell()
            self._on_read(position - self._raw_position)
            self._raw_position = position
        if not data:
            self.eof = True
            if isinstance(self._file, Gunzip) and self._file.cut and not self.damage:
                self.damage = "gzip stream cut short"
        return data

    def readinto(self, view: memoryview) -> int:
        """The next bytes into `view`, as many as one read gives (a pipe's: what has come);
        0 at the end. The bulk engine's reads: after the header, straight into its blocks."""
        have = len(self.buf) - self.pos
        if have:  # (what ensure() read ahead comes first)
            n = min(have, len(view))
            view[:n] = self.view[self.pos : self.pos + n]
            self.pos += n
            return n
        if isinstance(self._file, Pipe):
            return self._file.readinto(view)
        if isinstance(self._file, Gunzip):
            # A READ_CHUNK at a time: a block's worth inflated at once (8 MiB or more, as much
            # again joined) stayed in the helper's heap, over the main process's peak.
            n = 0
            while n < len(view):
                data = self._read(min(len(view) - n, READ_CHUNK))
                view[n : n + len(data)] = data
                n += len(data)
                if not data:
                    break
            return n
        if self.eof:
            return 0
        try:
            n = self._file.readinto(view)
        except OSError as exc:
            self.damage, n = f"read error: {exc}", 0
        if self._on_read is not None and n:
            self._on_read(n)
            self._raw_position += n
        if not n:
            self.eof = True
        return n

    def ensure(self, need: int) -> bool:
        """Make `need` bytes available at `pos`; False when the file ends first."""
        have = len(self.buf) - self.pos
        if have >= need:
            return True
        parts = [self.buf[self.pos :]]
        while have < need:
            data = self._read(max(READ_CHUNK, need - have))
            if not data:
                break
            parts.append(data)
            have += len(data)
        self.base += self.pos
        self.buf = b"".join(parts)
        self.view = memoryview(self.buf)
        self.pos = 0
        return have >= need

    def take(self, size: int) -> memoryview | None:
        """The next `size` bytes as a view, or None when the file ends first."""
        if len(self.buf) - self.pos < size and not self.ensure(size):
            return None
        start = self.pos
        self.pos = start + size
        return self.view[start : self.pos]

    def skip(self, size: int) -> bool:
        """Discard `size` bytes without ever holding them all; False at an early end."""
        while size > 0:
            have = len(self.buf) - self.pos
            if have == 0 and not self.ensure(1):
                return False
            step = min(size, len(self.buf) - self.pos)
            self.pos += step
            size -= step
        return True

    def at_end(self) -> bool:
        return not self.ensure(1)


class Pipe:
    """A pipe (standard input, a live capture's, a FIFO) read as it arrives: read() returns
    what has come (one call of the underlying read, as tcpdump -U writes a packet at a
    time), never waiting for a whole chunk; the first bytes read are kept for one seek(0)
    back (gzip detection). Standard input is not closed: it stays the process's own."""

    def __init__(self, raw: BinaryIO, owned: bool = False) -> None:
        self._raw = raw
        self._owned = owned  # (closed with this reader; standard input is not)
        _widen(raw)
        self._kept = b""
        self._replay = b""
        self._position = 0

    def read(self, size: int = -1) -> bytes:
        if self._replay:
            data, self._replay = self._replay[:size], self._replay[size:]
        else:
            read1 = getattr(self._raw, "read1", self._raw.read)
            data = read1(size if size > 0 else READ_CHUNK)
            if self._position == 0 and not self._kept:  # (the magic: all of what was asked)
                while data and 0 < len(data) < size:
                    more = read1(size - len(data))
                    if not more:
                        break
                    data += more
                self._kept = data
        self._position += len(data)
        return data

    def readinto(self, view: memoryview) -> int:
        """What has come, into `view`: one read, then more while more is already waiting
        (a pipe hands over 64 KiB a read; waiting for no more keeps a live capture's frames
        coming as its packets do); 0 at the end."""
        data = self.read(len(view))
        n = len(data)
        view[:n] = data
        fileno = getattr(self._raw, "fileno", None)
        while n and n < len(view) and fileno is not None and select.select([fileno()], [], [], 0)[0]:
            more = self.read(len(view) - n)
            if not more:
                break
            view[n : n + len(more)] = more
            n += len(more)
        return n

    def seek(self, offset: int) -> None:
        """Only back to the start, before anything but the first read."""
        if offset != 0 or self._position > len(self._kept):
            raise OSError("standard input cannot seek")
        self._replay, self._position = self._kept, 0

    def tell(self) -> int:
        return self._position

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        if self._owned:
            self._raw.close()


PIPE_ROOM = 1 << 20  # (Linux lets anyone make a pipe this large: fs/pipe-max-size)


def _widen(raw: BinaryIO) -> None:
    """A pipe made to hold PIPE_ROOM bytes, not 64 KiB, where the system allows it: a writer
    (cat, a capture tool) then runs 16 times less often to keep up with our reads. On a
    busy machine each of its turns may wait for a CPU, and with a 64 KiB pipe the reads come
    back short (what had come) and the blocks small: slower, and a peak memory that
    depends on the timing."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        fd = raw.fileno()
        if (stat.S_ISFIFO(os.fstat(fd).st_mode) and hasattr(fcntl, "F_SETPIPE_SZ")
                and fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_ROOM):  # fmt: skip
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_ROOM)


class Gunzip:
    """gzip decompression that keeps every byte decompressed before a cut or damage
    (gzip.GzipFile raises and loses the partial read); members are concatenated."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._z = zlib.decompressobj(wbits=31)
        self._input = b""
        self._in_member = False
        self.cut = False

    def read(self, size: int) -> bytes:
        out: list[bytes] = []
        have = 0
        while have < size:
            if not self._input:
                self._input = self._raw.read(READ_CHUNK)
                if not self._input:
                    self.cut = self._in_member  # the file ended inside a member
                    break
            if self._z.eof:  # the previous member is complete; another one follows
                self._z = zlib.decompressobj(wbits=31)
            piece = self._z.decompress(self._input, size - have)
            self._in_member = not self._z.eof
            self._input = self._z.unused_data if self._z.eof else self._z.unconsumed_tail
            out.append(piece)
            have += len(piece)
        return b"".join(out)

    def close(self) -> None:
        self._raw.close()
