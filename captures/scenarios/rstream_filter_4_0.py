"""rstream Publish v2 with filter values, and a filtering consumer, on 4.0.5."""
import asyncio
from collections import Counter

from rstream import AMQPMessage, Consumer, FilterConfiguration, Producer, amqp_decoder

from ._common import BROKER_4, HOST, PASSWORD, USER, Confirms, body, stream_name, wait_for

NAME = "rstream-filter-4.0"
BROKER_PORT = BROKER_4
CLIENT = "rstream"
SCENARIO = ("rstream on 4.0.5: ExchangeCommandVersions (filtering check), a Producer with a "
            "filter_value_extractor publishes 4 batches of 10 messages (Publish v2, filter "
            "values 'emea'/'apac' alternating per batch, so chunks carry a Bloom filter); a "
            "Consumer subscribes with filter.0=emea, match-unfiltered=false and a client-side "
            "predicate: the broker skips chunks whose Bloom filter has no 'emea' (chunk-level, "
            "so a merged chunk may still carry 'apac' records that the predicate drops)")
COVERS = ["ExchangeCommandVersions", "Publish v2", "PublishConfirm", "Subscribe", "Deliver"]

BATCHES, PER_BATCH = 4, 10


async def region(msg) -> str:
    return msg.application_properties["region"]


def msg_region(msg) -> str:
    props = {(k.decode() if isinstance(k, bytes) else k): v
             for k, v in (msg.application_properties or {}).items()}
    v = props.get("region")
    return v.decode() if isinstance(v, bytes) else str(v)


async def main(rec):
    stream = stream_name("filter")
    confirms = Confirms()
    regions = ["emea", "apac"]
    async with Producer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                        connection_name="sd-filter-producer",
                        filter_value_extractor=region) as producer:
        await producer.create_stream(stream)
        n = 0
        for b in range(BATCHES):
            msgs = [AMQPMessage(body=body(n + i), application_properties={"region": regions[b % 2]})
                    for i in range(PER_BATCH)]
            await producer.send_batch(stream, msgs, on_publish_confirm=confirms)
            n += PER_BATCH
        await confirms.wait(n)
    confirms.record(rec, n)

    got = Counter()
    async with Consumer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                        connection_name="sd-filter-consumer") as consumer:
        def cb(msg, ctx):
            got[msg_region(msg)] += 1

        await consumer.subscribe(
            stream, cb, initial_credit=10, decoder=amqp_decoder,
            filter_input=FilterConfiguration(
                ["emea"], predicate=lambda m: msg_region(m) == "emea", match_unfiltered=False))
        await wait_for(lambda: sum(got.values()) >= n // 2)
        await asyncio.sleep(0.5)
        await consumer.delete_stream(stream)
    rec.count(consumed=sum(got.values()))
    rec.notes["consumed_by_region"] = dict(got)


def run(rec):
    asyncio.run(main(rec))
