"""rstream super stream: CreateSuperStream, Route, Partitions, DeleteSuperStream on 4.0.5."""
import asyncio

from rstream import (
    AMQPMessage,
    RouteType,
    SuperStreamConsumer,
    SuperStreamCreationOption,
    SuperStreamProducer,
)

from ._common import BROKER_4, HOST, PASSWORD, USER, Confirms, body, stream_name, wait_for

NAME = "rstream-superstream-4.0"
BROKER_PORT = BROKER_4
CLIENT = "rstream"
SCENARIO = ("rstream on 4.0.5: SuperStreamProducer creates a 3-partition super stream "
            "(CreateSuperStream), routes 30 messages with keys '0'/'1'/'2' (one Route: rstream "
            "1.1.1 caches the first Route answer for every key, so all 30 land in partition "
            "-0), a "
            "SuperStreamConsumer looks up the partitions (Partitions) and consumes all 30, "
            "then the super stream is deleted (DeleteSuperStream)")
COVERS = ["CreateSuperStream", "Route", "Partitions", "DeleteSuperStream", "Publish",
          "Subscribe", "Deliver"]

N, PARTS = 30, 3


async def routing_key(msg) -> str:
    return msg.application_properties["key"]


async def main(rec):
    name = stream_name("super")
    confirms = Confirms()
    producer = SuperStreamProducer(
        HOST, BROKER_PORT, username=USER, password=PASSWORD, super_stream=name,
        super_stream_creation_option=SuperStreamCreationOption(n_partitions=PARTS),
        routing=RouteType.Key, routing_extractor=routing_key,
        connection_name="sd-super-producer")
    await producer.start()
    for i in range(N):
        await producer.send(AMQPMessage(body=body(i), application_properties={"key": str(i % PARTS)}),
                            on_publish_confirm=confirms)
    await confirms.wait(N)
    confirms.record(rec, N)

    got = []
    consumer = SuperStreamConsumer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                                   super_stream=name, connection_name="sd-super-consumer")
    await consumer.start()
    await consumer.subscribe(lambda m, c: got.append(c.stream), initial_credit=10)
    await wait_for(lambda: len(got) >= N)
    rec.notes["consumed_by_partition"] = {s: got.count(s) for s in sorted(set(got))}
    await consumer.unsubscribe()
    await consumer.close()
    await producer.delete_super_stream(name)
    await producer.close()
    rec.count(consumed=len(got))


def run(rec):
    asyncio.run(main(rec))
