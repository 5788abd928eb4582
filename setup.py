"""The optional compiled part (pyproject.toml holds everything else).

streamdissect.protocols.stream._native: the Stream fast path's hottest loops in C, and
streamdissect.capture._records: a classic pcap block's record walk in C, and
streamdissect.cli._json_rows: the JSON report's rows of numbers written in C, built when
a C compiler and the Python headers are there; without them the install goes on and the
pure-Python code (the reference, always shipped) runs instead (protocols/stream/native.py,
capture/native.py, cli/_text_report.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streamdissect.protocols.stream._native",
            ["streamdissect/protocols/stream/_native.c"],
            optional=True,  # no compiler: a warning, and the pure-Python fallback
        ),
        Extension(
            "streamdissect.capture._records",
            ["streamdissect/capture/_records.c"],
            optional=True,
        ),
        Extension(
            "streamdissect.cli._json_rows",
            ["streamdissect/cli/_json_rows.c"],
            optional=True,
        ),
    ]
)
