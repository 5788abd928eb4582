"""Single active consumer: two rstream consumers with the same name; handover on cancel."""
import asyncio
from collections import Counter

from rstream import Consumer, OffsetSpecification, OffsetType

from ._common import BROKER_4, HOST, PASSWORD, USER, prefill, stream_name, wait_for

NAME = "rstream-sac-4.0"
BROKER_PORT = BROKER_4
CLIENT = "rstream"
SCENARIO = ("rstream on 4.0.5, single active consumer: 50 messages published; consumers A and "
            "B (separate connections) subscribe with single-active-consumer=true, name=sd-sac; "
            "the broker sends ConsumerUpdate active=1 to A (A answers offset 'first' and "
            "consumes); A unsubscribes, the broker sends ConsumerUpdate active=1 to B (B "
            "answers 'first' and consumes all 50 again)")
COVERS = ["ConsumerUpdate", "Subscribe", "Unsubscribe", "Deliver", "Credit"]

N = 50


async def main(rec):
    stream = stream_name("sac")
    await prefill(rec, BROKER_PORT, stream, N, N, connection_name="sd-sac-producer")

    got, updates = Counter(), []

    def listener(tag):
        async def on_update(is_active, ctx):
            updates.append((tag, is_active))
            return OffsetSpecification(OffsetType.FIRST, 0)
        return on_update

    props = {"single-active-consumer": "true", "name": "sd-sac"}
    a = Consumer(HOST, BROKER_PORT, username=USER, password=PASSWORD, connection_name="sd-sac-A")
    b = Consumer(HOST, BROKER_PORT, username=USER, password=PASSWORD, connection_name="sd-sac-B")
    await a.start()
    await b.start()
    sub_a = await a.subscribe(stream, lambda m, c: got.update(["A"]), properties=dict(props),
                              consumer_update_listener=listener("A"), initial_credit=10)
    await wait_for(lambda: got["A"] >= N)
    await b.subscribe(stream, lambda m, c: got.update(["B"]), properties=dict(props),
                      consumer_update_listener=listener("B"), initial_credit=10)
    await asyncio.sleep(0.5)
    await a.unsubscribe(sub_a)  # handover
    await wait_for(lambda: got["B"] >= N)
    rec.notes["consumer_updates"] = updates
    rec.notes["consumed_by"] = dict(got)
    await a.close()
    await b.delete_stream(stream)
    await b.close()


def run(rec):
    asyncio.run(main(rec))
