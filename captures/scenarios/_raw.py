"""Raw-client scenarios (captures/rawclient.py, frames encoded with streamdissect's codec)."""
from __future__ import annotations

import time

from rawclient import RawClient

from ._common import body, stream_name


def publish(c: RawClient, publisher_id: int, first_id: int, n: int, size: int = 64) -> None:
    c.send("Publish", publisher_id=publisher_id, messages=[
        {"publishing_id": first_id + i, "filter_value": None, "entry": body(first_id + i, size)}
        for i in range(n)])


def confirmed_ids(c: RawClient, n: int) -> None:
    got = 0
    while got < n:
        got += len(c.wait(lambda r: r.command == "PublishConfirm").publishing_ids)


def errors(rec, port: int, *, v4: bool) -> None:
    """One connection walking through the error codes, then a protocol Close."""
    s = stream_name("rawerr")
    missing = s + "-missing"
    c = RawClient(rec, port, "errors")
    c.handshake()
    c.request("Create", stream=s, arguments={})                       # 0x01
    c.request("Create", stream=s, arguments={})                       # 0x05 already exists
    c.request("Delete", stream=missing)                               # 0x02 does not exist
    c.request("DeclarePublisher", publisher_id=0, publisher_reference="", stream=missing)  # 0x02
    publish(c, 7, 1, 3)                                               # 3 x PublishError 0x12
    c.wait(lambda r: r.command == "PublishError")
    c.request("DeclarePublisher", publisher_id=1, publisher_reference="sd-raw", stream=s)
    c.request("QueryPublisherSequence", publisher_reference="sd-raw", stream=s)
    publish(c, 1, 1, 5)
    confirmed_ids(c, 5)
    c.request("Subscribe", subscription_id=0, stream=s, offset_type=1, offset=None, credit=1,
              properties={})                                          # 0x01
    c.request("Subscribe", subscription_id=0, stream=s, offset_type=1, offset=None, credit=1,
              properties={})                                          # 0x03 already exists
    c.request("Unsubscribe", subscription_id=9)                       # 0x04 does not exist
    c.send("Credit", subscription_id=9, credit=1)                     # 0x8009 code 0x04
    c.wait(lambda r: r.command == "Credit" and r.response)
    c.request("QueryOffset", reference="sd-never-stored", stream=s)   # 0x13 no offset
    c.request("QueryOffset", reference="sd-x", stream=missing)        # 0x02
    c.request("Metadata", streams=[s, missing])
    if v4:
        c.request("StreamStats", stream=s)                            # 0x01
        c.request("StreamStats", stream=missing)                      # 0x02
        c.request("DeleteSuperStream", super_stream=missing)          # 0x02
    c.request("DeletePublisher", publisher_id=5)                      # 0x12 publisher missing
    c.request("DeletePublisher", publisher_id=1)
    c.request("Delete", stream=s)                                     # + MetadataUpdate 0x06
    c.wait(lambda r: r.command == "MetadataUpdate")
    c.close()


def deliver_v2(rec, port: int) -> None:
    """Deliver v2 via ExchangeCommandVersions, StreamStats, super stream commands; TCP drop."""
    s = stream_name("rawv2")
    sup = stream_name("rawsuper")
    c = RawClient(rec, port, "deliver-v2")
    c.handshake()
    c.request("ExchangeCommandVersions", commands=[
        {"key": 0x0008, "min_version": 1, "max_version": 2},   # ask for Deliver v2
        {"key": 0x0002, "min_version": 1, "max_version": 2},
        {"key": 0x001A, "min_version": 1, "max_version": 1}])
    c.request("Create", stream=s, arguments={})
    c.request("DeclarePublisher", publisher_id=0, publisher_reference="", stream=s)
    for b in range(3):
        publish(c, 0, 1 + 10 * b, 10)
        confirmed_ids(c, 10)
    c.request("Subscribe", subscription_id=3, stream=s, offset_type=1, offset=None, credit=10,
              properties={})
    records = 0
    while records < 30:
        d = c.wait(lambda r: r.command == "Deliver")
        records += d.chunk["num_records"]
        c.send("Credit", subscription_id=3, credit=1)
    c.request("QueryOffset", reference="sd-v2", stream=s)
    c.send("StoreOffset", reference="sd-v2", stream=s, offset=29)
    time.sleep(0.2)
    c.request("QueryOffset", reference="sd-v2", stream=s)
    c.request("StreamStats", stream=s)
    c.request("CreateSuperStream", super_stream=sup, partitions=[sup + "-a", sup + "-b"],
              binding_keys=["a", "b"], arguments={})
    c.request("CreateSuperStream", super_stream=sup, partitions=[sup + "-a", sup + "-b"],
              binding_keys=["a", "b"], arguments={})                  # 0x05 already exists
    c.request("Partitions", super_stream=sup)
    c.request("Route", routing_key="b", super_stream=sup)
    c.request("Route", routing_key="zzz", super_stream=sup)           # no route: empty list
    c.request("DeleteSuperStream", super_stream=sup)
    c.request("Unsubscribe", subscription_id=3)
    c.request("DeletePublisher", publisher_id=0)
    c.request("Delete", stream=s)
    c.drop()


def server_close(rec, port: int) -> None:
    """Tune answered as 0x8014 (the Java client's form), then a Close started by the broker:
    an unknown command key makes it close with 0x0d, and the client answers 0x8016."""
    c = RawClient(rec, port, "server-close")
    c.handshake(tune_reply_as_response=True)
    c.request("Metadata", streams=["sd-nothing-here"])
    frame = (6).to_bytes(4, "big") + (0x0077).to_bytes(2, "big") + (1).to_bytes(2, "big") + b"\0\0"
    c.sock.sendall(frame)  # no such command: raw bytes, the codec has no record for it
    c.conn.wrote(frame)
    close = c.wait(lambda r: r.command == "Close" and not r.response)
    c.send("Close", response=True, correlation_id=close.correlation_id, code=1)
    c.drain(1.0)
    c._shut("server")
