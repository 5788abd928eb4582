"""rstream Producer: create a stream, publish 10 batches of 10 messages with confirms."""
import asyncio

from rstream import AMQPMessage, Producer

from ._common import BROKER_3, HOST, PASSWORD, USER, Confirms, body, stream_name

NAME = "rstream-publish-confirm-3.10"
BROKER_PORT = BROKER_3
CLIENT = "rstream"
SCENARIO = ("rstream Producer on 3.10: handshake, Create stream, Metadata (leader lookup), "
            "DeclarePublisher, 10 Publish v1 frames of 10 AMQP messages (64-byte bodies), "
            "PublishConfirm, DeletePublisher, Delete stream, TCP close without a protocol Close (rstream 1.1.1 never sends Close)")
COVERS = ["PeerProperties", "SaslHandshake", "SaslAuthenticate", "Tune", "Open", "Create",
          "Metadata", "DeclarePublisher", "Publish", "PublishConfirm",
          "DeletePublisher", "Delete", "Heartbeat"]

BATCHES, PER_BATCH = 10, 10


async def main(rec):
    stream = stream_name("pubconf")
    confirms = Confirms()
    async with Producer(HOST, BROKER_PORT, username=USER, password=PASSWORD,
                        connection_name="sd-publish-confirm") as producer:
        await producer.create_stream(stream)
        n = 0
        for b in range(BATCHES):
            batch = [AMQPMessage(body=body(n + i)) for i in range(PER_BATCH)]
            await producer.send_batch(stream, batch, on_publish_confirm=confirms)
            n += PER_BATCH
        await confirms.wait(n)
        await producer.delete_stream(stream)
    confirms.record(rec, n)


def run(rec):
    asyncio.run(main(rec))
