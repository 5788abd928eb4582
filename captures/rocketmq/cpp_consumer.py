"""The C++ client's push consumer (PyPI rocketmq 0.4.4, librocketmq), as the kit's
clients/cpp/cpp_cons.py, but writing its report with bytes fields as text (the kit's
script fails on them: the wheel hands msg.id, tags and keys over as bytes).

usage: python cpp_consumer.py --topic T [--group CG_CPP] [--expect N] [--timeout S] --out FILE
(run it with the kit's venv Python, which has the wheel)."""
import argparse
import json
import sys
import threading
import time

from rocketmq.client import PushConsumer


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


ap = argparse.ArgumentParser()
ap.add_argument("--namesrv", default="127.0.0.1:9876")
ap.add_argument("--topic", default="TopicTest")
ap.add_argument("--group", default="CG_CPP")
ap.add_argument("--filter", default="*")
ap.add_argument("--expect", type=int, default=0)
ap.add_argument("--timeout", type=float, default=15)
ap.add_argument("--out")
a = ap.parse_args()
got, lock = [], threading.Lock()


def on_message(msg):
    with lock:
        got.append({"msgId": text(msg.id), "topic": text(msg.topic), "tags": text(msg.tags),
                    "keys": text(msg.keys), "queueId": msg.queue_id,
                    "queueOffset": msg.queue_offset, "bodyLength": len(msg.body)})
    print("GOT", text(msg.id), text(msg.tags), len(msg.body), flush=True)


consumer = PushConsumer(a.group)
consumer.set_namesrv_addr(a.namesrv)
consumer.subscribe(a.topic, on_message, a.filter)
consumer.start()
end = time.time() + a.timeout
while time.time() < end and (not a.expect or len(got) < a.expect):
    time.sleep(0.2)
time.sleep(2)  # let the offset be committed
consumer.shutdown()
if a.out:
    with open(a.out, "w") as f:
        json.dump({"client": "PyPI rocketmq 0.4.4 (librocketmq C++)", "role": "consumer",
                   "topic": a.topic, "group": a.group, "received": got}, f, indent=1)
print("done: received %d messages" % len(got))
sys.exit(0 if len(got) >= a.expect else 1)
