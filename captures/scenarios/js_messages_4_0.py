"""The RabbitMQ Stream JavaScript client: messages with AMQP properties, application
properties and text/binary bodies, published and consumed back (captures/js/messages.js).

On the 4.0 broker: the JS client (1.0.0) always sends ExchangeCommandVersions after Open,
which 3.10.8 answers with a Close, so it cannot talk to the 3.10 broker at all.
Needs node and the npm package: NODE_PATH (or SD_JS_MODULES) names the node_modules
folder holding rabbitmq-stream-js-client (README: captures/).
"""
import json
import os
import subprocess
import tempfile
from pathlib import Path

from ._common import BROKER_4, stream_name

NAME = "js-messages-4.0"
BROKER_PORT = BROKER_4
CLIENT = "rabbitmq-stream-js-client"
SCENARIO = ("rabbitmq-stream-js-client on 4.0: Create, DeclarePublisher, 6 messages with AMQP "
            "properties (message id, subject, content type, correlation id, creation time; the "
            "last without), application properties (string and int values), text and binary "
            "bodies; each flushed and confirmed before the next (one Publish frame each); a consumer from the first offset gets them back; Delete")
COVERS = ["PeerProperties", "SaslHandshake", "SaslAuthenticate", "Tune", "Open",
          "ExchangeCommandVersions", "Create", "Metadata", "DeclarePublisher", "Publish",
          "PublishConfirm", "Subscribe", "Deliver v2", "Credit", "Delete"]

PROGRAM = Path(__file__).resolve().parent.parent / "js" / "messages.js"
_client_version = {"text": CLIENT}


def client_version() -> str:
    """The client's name and version, as the JS program read them from its package.json."""
    return _client_version["text"]


def _node_env() -> dict:
    env = dict(os.environ)
    modules = os.environ.get("SD_JS_MODULES") or os.environ.get("NODE_PATH") \
        or "/tmp/jsclient/node_modules"  # fmt: skip
    env["NODE_PATH"] = modules
    return env


def run(rec):
    with tempfile.TemporaryDirectory(prefix="sd-js-") as tmp:
        out = Path(tmp) / "client.json"
        subprocess.run(["node", str(PROGRAM), str(BROKER_PORT), stream_name("js"), str(out)],
                       env=_node_env(), check=True, timeout=60)
        report = json.loads(out.read_text())
    _client_version["text"] = f"{report['client']} (node {report['node']})"
    for c in report["connections"]:
        conn = rec.new_conn(c["client_port"], c["server_port"])
        conn.wrote(bytes.fromhex(c["c2s_hex"]))
        conn.read(bytes.fromhex(c["s2c_hex"]))
        conn.opened_ns = int(c["opened_ns"])
        if c["closed_ns"]:
            conn.closed_ns = int(c["closed_ns"])
            conn.close_kind = "close"
    # API counts, attached by build_truth to the one connection carrying each traffic
    rec.count(published=len(report["sent"]), confirmed=len(report["confirmed"]))
    rec.count(consumed=len(report["received"]))
    rec.notes["stream"] = report["stream"]
    rec.notes["messages"] = {"sent": report["sent"], "received": report["received"]}
