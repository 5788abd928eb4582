"""The optional compiled part (pyproject.toml holds everything else).

streamdissect.protocols.stream._native: the Stream fast path's hottest loops in C, and
streamdissect.protocols.rocketmq._native: RocketMQ's hot frames read for the analyses, built
when a C compiler and the Python headers are there; without them the install goes on and the
pure-Python code (the reference, always shipped) runs instead (each protocol's native.py).
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
            "streamdissect.protocols.rocketmq._native",
            ["streamdissect/protocols/rocketmq/_native.c"],
            optional=True,
        ),
    ]
)
