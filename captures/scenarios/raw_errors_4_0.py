"""Raw client on 4.0.5: the error codes, one connection, protocol Close."""
from ._common import BROKER_4
from ._raw import errors

NAME = "raw-errors-4.0"
BROKER_PORT = BROKER_4
CLIENT = "raw"
SCENARIO = ("raw client on 4.0.5, one connection: Create (0x01) and Create again (0x05), "
            "Delete missing (0x02), DeclarePublisher on a missing stream (0x02), Publish with "
            "an undeclared publisher id (PublishError 0x12 x3), QueryPublisherSequence, 5 "
            "confirmed messages, Subscribe (0x01) and the same id again (0x03), Unsubscribe "
            "unknown (0x04), Credit to an unknown subscription (CreditResponse 0x8009 code "
            "0x04), QueryOffset never stored (0x13) and on a missing stream (0x02), Metadata "
            "for an existing and a missing stream, StreamStats (0x01, 0x02), DeleteSuperStream "
            "missing (0x02), DeletePublisher unknown (0x12), Delete while subscribed "
            "(MetadataUpdate 0x06), protocol Close")
COVERS = ["Create", "Delete", "DeclarePublisher", "Publish", "PublishError", "PublishConfirm",
          "QueryPublisherSequence", "Subscribe", "Unsubscribe", "Credit", "QueryOffset",
          "Metadata", "StreamStats", "DeleteSuperStream", "DeletePublisher", "MetadataUpdate",
          "Close"]


def run(rec):
    errors(rec, BROKER_PORT, v4=True)
