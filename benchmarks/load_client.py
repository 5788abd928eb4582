"""A real client (rstream, from PyPI) that publishes at a set rate, in batches, for a set
time, to a stream of its own that a consumer on a second connection reads from the start;
the load of `live_load.py`. Loopback only; the stream is deleted at the end.

    python benchmarks/load_client.py --token sd-load-1a2b --rate 20000 --seconds 300

Prints one JSON object on stdout: messages published, confirmed and consumed, the rate
held, and the connection names (`TOKEN-producer`, `TOKEN-consumer`: the capture finds the
client's connections by them, in their PeerProperties).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

HOST = "127.0.0.1"
DRAIN_S = 30.0  # at the end, how long confirms and deliveries may still come


def body(i: int, size: int) -> bytes:
    head = b"sd-load-%09d-" % i
    return (head + b"abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 1))[:size]


async def load(args: argparse.Namespace) -> dict:
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType, Producer

    stream = args.token
    counts = {"published": 0, "confirmed": 0, "publish_errors": 0, "consumed": 0}

    def on_confirm(status) -> None:
        counts["confirmed" if status.is_confirmed else "publish_errors"] += 1

    def on_message(_msg, _ctx) -> None:
        counts["consumed"] += 1

    credentials = {"username": "guest", "password": "guest"}
    async with Producer(HOST, args.port, connection_name=f"{args.token}-producer",
                        **credentials) as producer:  # fmt: skip
        await producer.create_stream(stream)
        consumer = Consumer(HOST, args.port, connection_name=f"{args.token}-consumer",
                            **credentials)  # fmt: skip
        await consumer.start()
        subscription = await consumer.subscribe(
            stream, on_message, initial_credit=10,
            offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
        started = time.monotonic()
        total = int(args.rate * args.seconds)
        late = 0.0  # the most the publishing ran behind its schedule (s)
        window = max(args.batch, int(args.rate * 2))  # unconfirmed messages allowed
        while counts["published"] < total:
            due = started + counts["published"] / args.rate
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
            else:
                late = max(late, now - due)
            n = min(args.batch, total - counts["published"])
            first = counts["published"]
            batch = [body(first + i, args.body_size) for i in range(n)]
            await producer.send_batch(stream, batch, on_publish_confirm=on_confirm)
            counts["published"] += n
            while counts["published"] - counts["confirmed"] - counts["publish_errors"] > window:
                await asyncio.sleep(0.001)
        publishing_s = time.monotonic() - started
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and (
                counts["confirmed"] + counts["publish_errors"] < total
                or counts["consumed"] < total):  # fmt: skip
            await asyncio.sleep(0.01)
        await consumer.unsubscribe(subscription)
        await producer.delete_stream(stream)
        await consumer.close()
    return {**counts, "stream": stream, "rate_asked": args.rate, "batch": args.batch,
            "body_size": args.body_size, "publishing_s": round(publishing_s, 2),
            "rate_held": round(counts["published"] / publishing_s, 1),
            "most_behind_schedule_s": round(late, 3),
            "connection_names": [f"{args.token}-producer", f"{args.token}-consumer"]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--token", required=True, help="the stream's name, unique to the run")
    parser.add_argument("--rate", type=float, required=True, help="messages a second")
    parser.add_argument("--seconds", type=float, required=True, help="how long to publish")
    parser.add_argument("--batch", type=int, default=100, help="messages a Publish frame")
    parser.add_argument("--body-size", type=int, default=100, help="bytes a message")
    parser.add_argument("--port", type=int, default=5552)
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.seconds <= 0 or args.batch <= 0:
        parser.error("--rate, --seconds and --batch take numbers above 0")
    json.dump(asyncio.run(load(args)), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
