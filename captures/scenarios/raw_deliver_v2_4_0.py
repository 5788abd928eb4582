"""Raw client on 4.0.5: Deliver v2, StreamStats, super streams, TCP drop without Close."""
from ._common import BROKER_4
from ._raw import deliver_v2

NAME = "raw-deliver-v2-4.0"
BROKER_PORT = BROKER_4
CLIENT = "raw"
SCENARIO = ("raw client on 4.0.5, one connection: ExchangeCommandVersions asking Deliver 1..2, "
            "Create, 30 messages in 3 confirmed Publish frames, Subscribe credit 10 -> Deliver "
            "v2 frames (committed chunk id) with a Credit 1 each, QueryOffset (0x13), "
            "StoreOffset 29, QueryOffset (0x01), StreamStats, CreateSuperStream (0x01, then "
            "0x05), Partitions, Route 'b' and an unbound key, DeleteSuperStream, Unsubscribe, "
            "DeletePublisher, Delete, then the socket is closed without a protocol Close")
COVERS = ["ExchangeCommandVersions", "Deliver v2", "Credit", "StoreOffset", "QueryOffset",
          "StreamStats", "CreateSuperStream", "Partitions", "Route", "DeleteSuperStream"]


def run(rec):
    deliver_v2(rec, BROKER_PORT)
