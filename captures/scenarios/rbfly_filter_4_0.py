"""rbfly on 4.0.5 with Bloom filter values: Publish v2 and a filtered subscription."""
import asyncio

from ._common import BROKER_4
from ._rbfly import scenario

NAME = "rbfly-filter-4.0"
BROKER_PORT = BROKER_4
CLIENT = "rbfly"
SCENARIO = ("rbfly on 4.0.5, one connection: as rbfly-publish-consume-3.10 but with a filter "
            "extractor, so every Publish is v2 with filter values 'emea'/'apac'; the "
            "subscription carries filter.0=emea (no match-unfiltered) and rbfly drops "
            "non-matching records client-side; ends with a protocol Close")
COVERS = ["Publish v2", "PublishConfirm", "QueryOffset", "Subscribe", "Deliver", "StoreOffset",
          "Unsubscribe", "Close"]


def run(rec):
    asyncio.run(scenario(rec, BROKER_PORT, filtering=True))
