"""A consumer that runs out of credit: initial credit 2, one Credit per sleep."""
import asyncio
import time

from rstream import AMQPMessage, Producer, schema
from rstream.client import Client
from rstream.constants import OffsetType

from ._common import BROKER_3, HOST, PASSWORD, USER, body, stream_name, wait_for

NAME = "rstream-slow-consumer-3.10"
BROKER_PORT = BROKER_3
CLIENT = "rstream"
SCENARIO = ("rstream on 3.10: a Producer publishes 40 single-message batches, each waited for "
            "(so 40 one-record chunks); a low-level rstream Client subscribes with initial "
            "credit 2 and, each time every granted chunk has arrived (credit exhausted), "
            "sleeps 150 ms (sleeps_ns) and then sends Credit 1, until all 40 chunks are in")
COVERS = ["Subscribe", "Deliver", "Credit", "Unsubscribe"]

CHUNKS, INITIAL_CREDIT, SLEEP_S = 40, 2, 0.15


async def main(rec):
    stream = stream_name("slow")
    async with Producer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                        connection_name="sd-slow-producer") as producer:
        await producer.create_stream(stream)
        for i in range(CHUNKS):
            await producer.send_wait(stream, AMQPMessage(body=body(i, 32)))
        rec.count(published=CHUNKS, confirmed=CHUNKS)  # send_wait returned for each

        client = Client(HOST, BROKER_PORT, frame_max=1024 * 1024, heartbeat=60,
                        connection_name="sd-slow-consumer")
        await client.start()
        await client.authenticate("/", USER, PASSWORD)
        chunks, records = [0], [0]

        def on_deliver(frame: schema.Deliver):
            chunks[0] += 1
            records[0] += frame.num_entries

        client.add_handler(schema.Deliver, on_deliver, name="0")
        await client.run_queue_listener_task(0, on_deliver)
        await client.subscribe(stream, 0, schema.OffsetSpec(OffsetType.FIRST),
                               initial_credit=INITIAL_CREDIT)
        granted, sleeps = INITIAL_CREDIT, []
        while chunks[0] < CHUNKS:
            await wait_for(lambda: chunks[0] >= granted)  # out of credit now
            if chunks[0] >= CHUNKS:
                break
            t0 = time.time_ns()
            await asyncio.sleep(SLEEP_S)
            sleeps.append([t0, time.time_ns()])
            await client.credit(0, 1)
            granted += 1
        await client.unsubscribe(0)
        from ._common import rstream_port
        rec.count(rstream_port(client), sleeps_ns=sleeps, consumed_chunks=chunks[0],
                  consumed=records[0])
        await client.close()
        await producer.delete_stream(stream)


def run(rec):
    asyncio.run(main(rec))
