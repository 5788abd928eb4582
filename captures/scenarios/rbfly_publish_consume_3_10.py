"""rbfly on 3.10: batch and single publish, subscribe by offset reference, protocol Close."""
import asyncio

from ._common import BROKER_3
from ._rbfly import scenario

NAME = "rbfly-publish-consume-3.10"
BROKER_PORT = BROKER_3
CLIENT = "rbfly"
SCENARIO = ("rbfly on 3.10, one connection: Create stream + Metadata, named publisher "
            "(DeclarePublisher + QueryPublisherSequence), one Publish of 50 messages "
            "(PublisherBatchFast) and 5 single Publish frames, confirmed; subscribe by offset "
            "reference (QueryOffset -> 0x13, Subscribe with initial credit 128), 55 messages, "
            "StoreOffset, Unsubscribe, Delete stream, then a protocol Close (code 1 'OK')")
COVERS = ["Create", "Metadata", "DeclarePublisher", "QueryPublisherSequence", "Publish",
          "PublishConfirm", "DeletePublisher", "QueryOffset", "Subscribe", "Deliver",
          "StoreOffset", "Unsubscribe", "Delete", "Close"]


def run(rec):
    asyncio.run(scenario(rec, BROKER_PORT, filtering=False))
