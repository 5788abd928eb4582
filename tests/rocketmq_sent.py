"""What the RocketMQ clients of the recorded captures sent and received, message by message,
from the client side only: the truth files' sends, receipts and traces (topics, queues,
ids, tags, keys), and each body made as the kit's clients make it (the RocketMQ kit's
clients/: RmqProducer.java's `body`, cpp_prod.py's `body`, prod.js's `body`), never from
our parser.

`sent(capture)`: every message the producers sent, in the order they sent them;
`received(capture)`: every message the consumers got; `body(capture, client, index)`: the
body of a producer's message `index` (the number in its key, `key-3`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketmq_support import truth

# The producers that sent random bytes (captures/rocketmq/record.py: `--body random`, the
# Java client's default seed 42); every other Java producer sent its text bodies.
RANDOM = {("rmq-java-compressed", "producer-random")}
JAVA_SEED = 42


@dataclass(frozen=True)
class Sent:
    topic: str
    msg_id: str | None  # the client's id (UNIQ_KEY); None where the client reports none
    tags: str | None
    keys: str | None
    body: bytes
    compressed: bool | None = None  # as the Java client says (None: it does not)


def java_text(i: int, size: int) -> bytes:
    """RmqProducer.body(i, size, random=false): `msg-i ` then 'a' + k % 26 for each k."""
    head = f"msg-{i} ".encode()
    return bytes(head[k] if k < len(head) else 0x61 + k % 26 for k in range(size))


def java_random(count: int, size: int, seed: int = JAVA_SEED) -> list[bytes]:
    """RmqProducer.body(i, size, random=true) for i in range(count): java.util.Random(seed)
    .nextBytes, one instance for all the messages (a 48-bit LCG; nextInt's bytes, low
    first)."""
    mask = (1 << 48) - 1
    state = (seed ^ 0x5DEECE66D) & mask
    out = []
    for _ in range(count):
        body = bytearray()
        while len(body) < size:
            state = (state * 0x5DEECE66D + 0xB) & mask
            word = state >> 16
            for _ in range(min(size - len(body), 4)):
                body.append(word & 0xFF)
                word >>= 8
        out.append(bytes(body))
    return out


def cpp_body(i: int) -> bytes:
    """cpp_prod.py's body(i) with no --size."""
    return f"Hello RocketMQ from librocketmq {i}".encode()


def js_body(i: int) -> bytes:
    """prod.js's body(i, 0)."""
    return f"Hello RocketMQ from ali-ons {i}".encode()


def _index(keys: str) -> int:
    return int(keys.rsplit("-", 1)[1])


def _client(capture: str, name: str) -> dict:
    return next(c for c in truth(capture)["clients"] if c["name"] == name)


def body(capture: str, client: str, index: int) -> bytes:
    """The body a producer of the capture sent as its message `index`."""
    report = _client(capture, client)["report"]
    kind = report["client"]
    if kind.startswith("java"):
        size = report["sends"][0]["bodyLength"]
        if (capture, client) in RANDOM:
            return java_random(index + 1, size)[index]
        return java_text(index, size)
    return cpp_body(index) if "C++" in kind else js_body(index)


def _properties(text: str) -> dict[str, str]:
    """A properties string as the client's trace recorded it (name \\x01 value \\x02 ...)."""
    return dict(item.split("\x01", 1) for item in text.split("\x02") if "\x01" in item)


def producers(capture: str) -> list[dict]:
    """The producers with a send that reached the broker (a send refused before: none)."""
    return [c for c in truth(capture)["clients"] if c["report"].get("role") == "producer"
            and any("error" not in s for s in c["report"].get("sends") or ())]  # fmt: skip


def sent(capture: str) -> list[Sent]:
    """The producers' messages in the order they sent them (a batch's in its order)."""
    out = []
    for client in producers(capture):
        report, name = client["report"], client["name"]
        topic = report["topic"]
        if report["client"].startswith("java"):
            for send in report["sends"]:
                ids = send["msgId"].split(",")
                for msg_id, tags, keys in zip(ids, send["tags"], send["keys"], strict=True):
                    out.append(Sent(topic, msg_id, tags, keys, body(capture, name, _index(keys)),
                                    send.get("compressedByClient")))  # fmt: skip
        elif "C++" in report["client"]:
            out += [Sent(topic, s["msgId"], s["tags"], s["keys"],
                         body(capture, name, s["index"])) for s in report["sends"]]  # fmt: skip
        else:  # (ali-ons reports no tags nor keys: its trace has the properties it sent)
            frames = [f for f in report["frames"]
                      if f["dir"] == "c->s request" and f["code"] in (10, 310)]  # fmt: skip
            for send, frame in zip(report["sends"], frames, strict=True):
                properties = _properties(frame["header"].get("i") or
                                         frame["header"].get("properties"))  # fmt: skip
                out.append(Sent(topic, None, properties.get("TAGS"), properties.get("KEYS"),
                                body(capture, name, send["index"])))  # fmt: skip
    return out


def received(capture: str) -> list[dict]:
    """Every message the consumers received (as they report it), with `body`: the body its
    producer sent (found by its key's number: the producers' keys are `key-i`, `bk-i`)."""
    out = []
    by_id = {s.msg_id: s for s in sent(capture)}
    for client in truth(capture)["clients"]:
        for got in client["report"].get("received") or ():
            found = by_id.get(got["msgId"])
            if found is not None:
                out.append({**got, "body": found.body})
            else:  # (a producer that reports the broker's ids: by its key, one producer)
                (producer,) = producers(capture)
                out.append({**got, "body": body(capture, producer["name"],
                                                _index(got["keys"]))})  # fmt: skip
    return out
