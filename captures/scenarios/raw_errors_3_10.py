"""Raw client on 3.10: the error codes, one connection, protocol Close."""
from ._common import BROKER_3
from ._raw import errors

NAME = "raw-errors-3.10"
BROKER_PORT = BROKER_3
CLIENT = "raw"
SCENARIO = ("raw client on 3.10, one connection: the raw-errors-4.0 sequence without the "
            "commands 3.10 lacks (StreamStats, super streams): 0x05, 0x02, PublishError 0x12, "
            "0x03, 0x04, CreditResponse 0x8009/0x04, 0x13, MetadataUpdate 0x06, protocol Close")
COVERS = ["Create", "Delete", "DeclarePublisher", "Publish", "PublishError", "PublishConfirm",
          "Subscribe", "Unsubscribe", "Credit", "QueryOffset", "Metadata", "MetadataUpdate",
          "Close"]


def run(rec):
    errors(rec, BROKER_PORT, v4=False)
