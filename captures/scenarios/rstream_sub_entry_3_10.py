"""rstream sub-entry batching: gzip and uncompressed sub-batches, then consumed back."""
import asyncio

from rstream import AMQPMessage, CompressionType, Consumer, Producer

from ._common import BROKER_3, HOST, PASSWORD, USER, Confirms, body, stream_name, wait_for

NAME = "rstream-sub-entry-3.10"
BROKER_PORT = BROKER_3
CLIENT = "rstream"
SCENARIO = ("rstream on 3.10: Producer.send_sub_entry 3 sub-batches of 10 messages with gzip "
            "compression (entry byte 0x90) and 3 of 10 without compression (0x80), 60 records "
            "in 6 publishing ids, confirmed per sub-batch; a Consumer reads them back (records "
            "inside sub-batches are delivered as-is; rstream decompresses them)")
COVERS = ["Publish", "PublishConfirm", "Subscribe", "Deliver", "Credit"]

SUBS, PER_SUB = 3, 10


async def main(rec):
    stream = stream_name("subentry")
    confirms = Confirms()
    n = 0
    async with Producer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                        connection_name="sd-sub-entry") as producer:
        await producer.create_stream(stream)
        for ctype in (CompressionType.Gzip, CompressionType.No):
            for _ in range(SUBS):
                msgs = [AMQPMessage(body=body(n + i, 48)) for i in range(PER_SUB)]
                await producer.send_sub_entry(stream, msgs, compression_type=ctype,
                                              on_publish_confirm=confirms)
                n += PER_SUB
            await asyncio.sleep(0.7)  # let the 0.5 s batching timer flush this kind
        await confirms.wait(2 * SUBS)
    confirms.record(rec, n)

    got = []
    async with Consumer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                        connection_name="sd-sub-entry-consumer") as consumer:
        await consumer.subscribe(stream, lambda m, ctx: got.append(ctx.offset), initial_credit=5)
        await wait_for(lambda: len(got) >= n)
        await consumer.delete_stream(stream)
    rec.count(consumed=len(got))


def run(rec):
    asyncio.run(main(rec))
