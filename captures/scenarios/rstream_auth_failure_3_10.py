"""rstream with a wrong password: SaslAuthenticate answered with 0x08."""
import asyncio

from rstream import Producer

from ._common import BROKER_3, HOST, USER, WRONG_PASSWORD

NAME = "rstream-auth-failure-3.10"
BROKER_PORT = BROKER_3
CLIENT = "rstream"
SCENARIO = ("rstream Producer on 3.10 with the wrong password 'wrong-secret-pw' (PLAIN): "
            "PeerProperties, SaslHandshake, SaslAuthenticate -> code 0x08 authentication "
            "failure; the broker then closes the TCP connection")
COVERS = ["PeerProperties", "SaslHandshake", "SaslAuthenticate"]


async def main(rec):
    producer = Producer(HOST, BROKER_PORT, username=USER, password=WRONG_PASSWORD,
                        connection_name="sd-auth-failure", max_retries=1)
    try:
        await asyncio.wait_for(producer.start(), 10)
    except Exception as e:  # the client raises on code 0x08
        rec.notes["client_error"] = "%s: %s" % (type(e).__name__, e)
    else:
        raise SystemExit("authentication unexpectedly succeeded")
    await asyncio.sleep(0.5)  # let the broker close its side while we still read
    rec.notes["password"] = WRONG_PASSWORD


def run(rec):
    asyncio.run(main(rec))
