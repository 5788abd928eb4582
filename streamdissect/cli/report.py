"""`streamdissect report CAPTURE... -o report.html` (or `--parquet DIR`): every analysis of a
capture drawn, in one self-contained HTML file."""

from __future__ import annotations

import argparse
import os
import sys
import time

from streamdissect.cli._live import add_live_options, capture_error, first_frames, with_sources
from streamdissect.cli._options import add_analysis_options
from streamdissect.cli._progress import PROGRESS_MIN_BYTES, progress_bar


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report",
        help="one self-contained HTML file: what needs a look, then every analysis drawn",
        description="Analyse a capture (several files: one capture in time order), or read "
        "the tables a directory holds (analyze --format parquet|csv -o DIR, streamdissect "
        "spark --out DIR), and write one HTML file with the figures embedded: no network "
        "needed to open it.",
    )
    p.add_argument("captures", nargs="*", metavar="CAPTURE",
                   help="capture file ('-': standard input); several are read as one")
    p.add_argument("--parquet", metavar="DIR",
                   help="draw the tables in DIR instead of analysing a capture")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="the HTML file to write")
    p.add_argument("--title", help="the report's heading (default: the inputs' names)")
    add_live_options(p)
    add_analysis_options(p, "times")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=run)
    return p


def run(args) -> int:
    if args.parquet and (args.captures or args.interface):
        print("streamdissect: error: give captures or --parquet DIR, not both", file=sys.stderr)
        return 2
    if args.parquet:
        from streamdissect.report.data import from_parquet

        try:
            data = from_parquet(args.parquet)
        except (FileNotFoundError, OSError, ValueError) as exc:
            print(f"streamdissect: error: {exc}", file=sys.stderr)
            return 2
        return _write(args, data, say=_say(args, long=True))
    return with_sources(args, lambda paths, live, ports: _from_capture(args, paths, live, ports),
                        immediate=False)  # fmt: skip


def _arrow_in_the_heap() -> None:
    """The figures read the large tables as Arrow chunks: their memory from malloc, where
    numpy's and pandas' is, and not pyarrow's own pool (mimalloc), which keeps what it
    freed for Arrow alone (the 1x report's peak a few MB higher with it). Set once the
    analysis is done: pyarrow imported before it raised the analysis's own peak by 25 MB."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _from_capture(args, paths: list, live, ports: tuple[int, ...]) -> int:
    from streamdissect.capture import CaptureError
    from streamdissect.report.data import load

    size = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
    say = _say(args, long=live is not None or size >= PROGRESS_MIN_BYTES
               or any(p == "-" for p in paths))  # fmt: skip
    say(f"reading {', '.join(map(str, paths))}" + (f" ({size / 1e6:,.0f} MB)" if size else ""))
    bar = None if args.quiet else progress_bar(paths)
    try:
        data = load(paths, ports=ports, heuristic=not args.no_heuristic,
                    max_frame=args.max_frame, at_once_ms=args.at_once_ms,
                    on_read=bar.update if bar else None, helper_process=True,
                    watch=first_frames(args.count, live) if args.count is not None else None,
                    engine="stream" if args.count is not None else "auto")  # fmt: skip
    except CaptureError as exc:
        return capture_error(exc, live)
    finally:
        if bar:
            bar.close()
    if live is not None:
        data.source = f"live capture on {args.interface}"
    return _write(args, data, say)


def _write(args, data, say) -> int:
    import matplotlib

    matplotlib.use("Agg")  # (no window, whatever the environment says)
    _arrow_in_the_heap()
    from streamdissect.report.canvas import zone
    from streamdissect.report.html import write

    started = time.monotonic()
    try:
        size = write(data, args.output, tz=zone(args.local), title=args.title,
                     progress=lambda done, total, what: say(f"drawing {what} ({done + 1}/"
                                                            f"{total})") if done < total else None)  # fmt: skip
    except OSError as exc:
        print(f"streamdissect: error: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    say(f"drawn in {time.monotonic() - started:.1f} s")
    print(f"wrote {args.output} ({size / 1e6:.2f} MB)")
    return 0


def _say(args, long: bool):
    """Progress lines on stderr, for long inputs only (and never with -q)."""
    if args.quiet or not long:
        return lambda text: None

    def say(text: str) -> None:
        print(f"streamdissect report: {text}", file=sys.stderr, flush=True)

    return say
