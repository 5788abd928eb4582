"""The optional compiled part (pyproject.toml holds everything else).

streamdissect.protocols.stream._native: the Stream fast path's hottest loops in C;
streamdissect.protocols.rocketmq._native: RocketMQ's hot frames read for the analyses;
streamdissect.capture._records: a classic pcap block's record walk in C; and
streamdissect.cli._json_rows: the JSON report's rows (numbers, texts) written in C. Each is built
when a C compiler and the Python headers are there; without them the install goes on and the
pure-Python code (the reference, always shipped) runs instead (each protocol's native.py,
capture/native.py, cli/_text_report.py).
"""

from setuptools import Extension, setup


def _optional(name: str) -> Extension:
    """An extension whose build may fail: a warning, and the pure-Python fallback."""
    return Extension(name, [name.replace(".", "/") + ".c"], optional=True)


setup(
    ext_modules=[
        _optional("streamdissect.protocols.stream._native"),
        _optional("streamdissect.protocols.rocketmq._native"),
        _optional("streamdissect.capture._records"),
        _optional("streamdissect.cli._json_rows"),
    ]
)
