"""Analyses over a capture's frames: latency, confirms, credit, lag, lifecycle, errors.

The names below are loaded when first asked for: the collectors (protocols/stream/analysis)
use this package's helpers (compact, fields, percentiles) and the driver uses the
collectors, so importing a helper must not import the driver.
"""

from importlib import import_module

__all__ = [
    "Analysis", "analyze", "analyze_events", "anomalies_table", "backlog_table",
    "confirms_table", "connections_table", "credit_balance_table", "credit_table",
    "deliveries_table", "errors_table", "frames_table", "latency_table", "messages_table",
    "publishes_table",
    "requests_table", "stalls_table", "throughput_table",
]  # fmt: skip
_DRIVER = ("Analysis", "analyze", "analyze_events")  # (the *_table functions: tables.py)


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = import_module(f"{__name__}.{'driver' if name in _DRIVER else 'tables'}")
    value = globals()[name] = getattr(module, name)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
