"""The rbfly scenario, run against either broker (3.10 plain, 4.0.5 with filtering)."""
import asyncio

from rbfly.streams import (
    MessageFilter,
    Offset,
    Publisher,
    PublisherBatchFast,
    stream_message_ctx,
    streams_client,
)

from ._common import HOST, PASSWORD, USER, body, stream_name

BATCH, SINGLE = 50, 5
REGIONS = ("emea", "apac")


def region(ctx) -> str:
    return ctx.app_properties["region"]


async def scenario(rec, port: int, *, filtering: bool) -> None:
    stream = stream_name("rbfly")
    client = streams_client("rabbitmq-stream://%s:%s@%s:%d/" % (USER, PASSWORD, HOST, port))
    await client.create_stream(stream)
    extract = region if filtering else None
    n = 0
    # one batched Publish of 50 (the batch waits for its confirms), then 5 single sends
    async with client.publisher(stream, name="sd-rbfly-batch", filter_extract=extract,
                                cls=PublisherBatchFast) as pub:
        for i in range(BATCH):
            pub.batch(stream_message_ctx(body(i), app_properties={"region": REGIONS[i % 2]}))
        await pub.flush()
        n += BATCH
    async with client.publisher(stream, name="sd-rbfly-single", filter_extract=extract,
                                cls=Publisher) as pub:
        for i in range(SINGLE):
            await pub.send(stream_message_ctx(body(BATCH + i), app_properties={"region": "emea"}))
        n += SINGLE
    # rbfly returns from flush()/send() only once confirmed
    rec.count(published=n, confirmed=n)

    # subscribe by offset reference: QueryOffset -> 0x13 (nothing stored), start at 0
    flt = MessageFilter(region, {"emea"}) if filtering else None
    want = BATCH // 2 + SINGLE if filtering else n
    got = 0
    sub = client.subscribe(stream, offset=Offset.reference("sd-rbfly-reader"), filter=flt,
                           timeout=5)
    async for _msg in sub:
        got += 1
        if got >= want:
            break
    await client.write_offset(stream, "sd-rbfly-reader")  # StoreOffset of the last message
    await sub.aclose()  # Unsubscribe
    rec.count(consumed=got)
    await asyncio.sleep(0.2)
    await client.delete_stream(stream)
    await client.disconnect()  # protocol Close, then TCP close
