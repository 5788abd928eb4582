"""The optional compiled part (pyproject.toml holds everything else).

streamdissect.protocols.stream._native: the Stream fast path's hottest loops in C;
streamdissect.protocols.rocketmq._native: RocketMQ's hot frames read for the analyses;
streamdissect.capture._records: a classic pcap block's record walk in C; and
streamdissect.cli._json_rows: the JSON report's rows (numbers, texts) written in C;
streamdissect.analysis._columns: a chunk of table rows made columns. Each is built
when a C compiler and the Python headers are there; without them the install goes on and the
pure-Python code (the reference, always shipped) runs instead (each protocol's native.py,
capture/native.py, cli/_text_report.py, analysis/compact.py).
"""

from setuptools import Extension, setup


def _optional(name: str, *more: str) -> Extension:
    """An extension whose build may fail: a warning, and the pure-Python fallback (`more`:
    its other source files, beside its own, and their header, by their names)."""
    path = name.replace(".", "/")
    folder = path.rsplit("/", 1)[0]
    return Extension(name, [path + ".c", *(f"{folder}/{m}.c" for m in more)], optional=True,
                     depends=[path + ".h"] if more else [])  # fmt: skip


setup(
    ext_modules=[
        _optional("streamdissect.protocols.stream._native"),
        _optional("streamdissect.protocols.rocketmq._native", "_native_runs", "_native_naming",
                  "_native_walk", "_native_events"),
        _optional("streamdissect.capture._records"),
        _optional("streamdissect.cli._json_rows"),
        _optional("streamdissect.analysis._columns"),
    ]
)
