"""rstream client negotiating a 1 s heartbeat, then idling so heartbeats flow both ways."""
import asyncio

from rstream.client import Client

from ._common import BROKER_3, HOST, PASSWORD, USER

NAME = "rstream-heartbeat-3.10"
BROKER_PORT = BROKER_3
CLIENT = "rstream"
SCENARIO = ("rstream low-level Client on 3.10 asking heartbeat=1 s: Tune negotiates 1 s, the "
            "connection idles 4.5 s while both sides send Heartbeat frames, then the client "
            "drops the TCP connection without a protocol Close (rstream 1.1.1 behaviour)")
COVERS = ["Tune", "Open", "Heartbeat"]

IDLE_S = 4.5


async def main(rec):
    client = Client(HOST, BROKER_PORT, frame_max=1024 * 1024, heartbeat=1,
                    connection_name="sd-heartbeat")
    await client.start()
    await client.authenticate("/", USER, PASSWORD)
    t0 = __import__("time").time_ns()
    await asyncio.sleep(IDLE_S)
    rec.notes["idle_ns"] = [t0, __import__("time").time_ns()]
    rec.notes["negotiated_heartbeat_s"] = client._heartbeat
    await client.close()


def run(rec):
    asyncio.run(main(rec))
