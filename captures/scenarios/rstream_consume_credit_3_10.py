"""rstream Consumer with a small initial credit, StoreOffset and QueryOffset."""
import asyncio

from rstream import Consumer, ConsumerOffsetSpecification, OffsetType
from rstream.exceptions import OffsetNotFound

from ._common import BROKER_3, HOST, PASSWORD, USER, prefill, stream_name, wait_for

NAME = "rstream-consume-credit-3.10"
BROKER_PORT = BROKER_3
CLIENT = "rstream"
SCENARIO = ("rstream on 3.10: a Producer publishes 200 messages in 10 confirmed batches; a "
            "Consumer subscribes from 'first' with initial credit 3 and sends Credit 1 per "
            "Deliver (rstream's strategy), consumes all 200, StoreOffset 'sd-reader' = 199, "
            "QueryOffset 'sd-reader' -> 0x01 and QueryOffset 'sd-never-stored' -> 0x13 no offset, "
            "Unsubscribe, Delete stream")
COVERS = ["Subscribe", "Deliver", "Credit", "StoreOffset", "QueryOffset", "Unsubscribe",
          "Publish", "PublishConfirm"]

N, PER_BATCH, INITIAL_CREDIT = 200, 20, 3


async def main(rec):
    stream = stream_name("consume")
    await prefill(rec, BROKER_PORT, stream, N, PER_BATCH, connection_name="sd-consume-producer")

    got = []
    consumer = Consumer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                        connection_name="sd-consume-consumer")
    await consumer.start()
    sub = await consumer.subscribe(
        stream, lambda msg, ctx: got.append(ctx.offset),
        offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None),
        initial_credit=INITIAL_CREDIT)
    await wait_for(lambda: len(got) >= N)
    await consumer.store_offset(stream, "sd-reader", got[-1])
    await asyncio.sleep(0.2)
    stored = await consumer.query_offset(stream, "sd-reader")
    try:
        await consumer.query_offset(stream, "sd-never-stored")
        rec.notes["never_stored"] = "no error?"
    except OffsetNotFound as e:
        rec.notes["never_stored"] = "OffsetNotFound: %s" % e
    rec.notes["stored_offset"] = stored
    await consumer.unsubscribe(sub)
    await consumer.delete_stream(stream)
    await consumer.close()
    rec.count(consumed=len(got))


def run(rec):
    asyncio.run(main(rec))
