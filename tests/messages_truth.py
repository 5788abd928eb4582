"""What the clients of the shipped captures published, message by message, from the client
side's own code (captures/scenarios/: the bodies, application properties and filter values
each scenario set), never from our parser. The truth files count frames and records; the
scenarios say what each message held.

`published(capture)`: every message the clients sent, in the order they sent them (a
capture's one publishing connection); `stored(capture)`: those the broker kept, by offset
(the ones a PublishError refused left out), which is what a Deliver of offset o carries.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"


@dataclass(frozen=True)
class Sent:
    body: bytes
    application_properties: dict | None = None
    filter_value: str | None = None
    amqp: bool = True  # False: the raw client's bytes, no AMQP sections


def scenario(name: str):
    """A scenario module of captures/scenarios (the client side's code)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"captures.scenarios.{name}")


def truth(capture: str) -> dict:
    return json.loads((CAPTURES / f"{capture}.truth.json").read_text())


def published(capture: str) -> list[Sent]:
    body = scenario("_common").body
    if capture == "rstream-publish-confirm-3.10":
        m = scenario("rstream_publish_confirm_3_10")
        return [Sent(body(i)) for i in range(m.BATCHES * m.PER_BATCH)]
    if capture == "rstream-consume-credit-3.10":
        return [Sent(body(i)) for i in range(scenario("rstream_consume_credit_3_10").N)]
    if capture == "rstream-slow-consumer-3.10":
        return [Sent(body(i, 32)) for i in range(scenario("rstream_slow_consumer_3_10").CHUNKS)]
    if capture == "rstream-sub-entry-3.10":
        m = scenario("rstream_sub_entry_3_10")
        return [Sent(body(i, 48)) for i in range(2 * m.SUBS * m.PER_SUB)]
    if capture == "rstream-filter-4.0":
        m = scenario("rstream_filter_4_0")
        regions = ("emea", "apac")  # (main's `regions`, one a batch in turn)
        return [Sent(body(i), {"region": regions[(i // m.PER_BATCH) % 2]},
                     regions[(i // m.PER_BATCH) % 2])
                for i in range(m.BATCHES * m.PER_BATCH)]  # fmt: skip
    if capture == "rstream-sac-4.0":
        return [Sent(body(i)) for i in range(scenario("rstream_sac_4_0").N)]
    if capture == "rstream-superstream-4.0":
        m = scenario("rstream_superstream_4_0")
        return [Sent(body(i), {"key": str(i % m.PARTS)}) for i in range(m.N)]
    if capture.startswith("rbfly-"):
        m = scenario("_rbfly")
        filtering = capture.startswith("rbfly-filter")
        regions = [m.REGIONS[i % 2] for i in range(m.BATCH)] + ["emea"] * m.SINGLE
        return [Sent(body(i), {"region": r}, r if filtering else None)
                for i, r in enumerate(regions)]  # fmt: skip
    if capture.startswith("raw-errors-"):
        # _raw.errors: publish(c, 7, 1, 3) (an undeclared publisher: refused), then
        # publish(c, 1, 1, 5); _raw.publish sends body(publishing id) as raw bytes
        return [Sent(body(i), amqp=False) for i in (1, 2, 3, 1, 2, 3, 4, 5)]
    if capture == "raw-deliver-v2-4.0":
        # _raw.deliver_v2: publish(c, 0, 1 + 10 * b, 10) for b in range(3)
        return [Sent(body(i), amqp=False) for i in range(1, 31)]
    return []


def stored(capture: str) -> list[Sent]:
    sent = published(capture)
    if capture.startswith("raw-errors-"):
        return sent[3:]  # (the 3 PublishError refused)
    return sent


WITH_MESSAGES = ("rstream-publish-confirm-3.10", "rstream-consume-credit-3.10",
                 "rstream-slow-consumer-3.10", "rstream-sub-entry-3.10", "rstream-filter-4.0",
                 "rstream-sac-4.0", "rstream-superstream-4.0", "rbfly-publish-consume-3.10",
                 "rbfly-filter-4.0", "raw-errors-3.10", "raw-errors-4.0",
                 "raw-deliver-v2-4.0")  # fmt: skip
