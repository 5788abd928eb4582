"""Raw client on 3.10: Tune reply as 0x8014, then closes started by the broker."""
from ._common import BROKER_3
from ._raw import server_close

NAME = "raw-server-close-3.10"
BROKER_PORT = BROKER_3
CLIENT = "raw"
SCENARIO = ("raw client on 3.10, one connection answering Tune with key 0x8014 (the Java "
            "client's form), Metadata for a missing stream, then an unknown command key 0x0077 "
            "-> the broker's own Close (code 0x0d 'unknown frame', correlation id 1) and the "
            "client's Close response 0x8016. (3.10 and 4.0 do not enforce frame_max on "
            "Publish: a 9 KB Publish after negotiating 8192 only got PublishError 0x12.)")
COVERS = ["Tune", "Metadata", "Close"]


def run(rec):
    server_close(rec, BROKER_PORT)
