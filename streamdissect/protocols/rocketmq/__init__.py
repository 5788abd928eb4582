"""RocketMQ remoting (Apache RocketMQ 4.x's name server and broker protocol, TCP 9876/10911).

    from streamdissect.protocols.rocketmq import decode_frame, encode_command, make_command
    record = decode_frame(frame_bytes)        # RemotingCommand or Malformed, never raises
    record.code_name, record.opaque, record.fields["topic"], record.messages

spec.py is the table (codes, languages, headers' fields, V2 keys, system flags); codec.py
the frame and its headers both ways; messages.py the bodies' messages; fastjson.py the
fastjson bodies; framing.py the framer and heuristic; protocol.py the object behind the
seam. docs/protocol-rocketmq.md describes the wire format.
"""

from streamdissect.protocols.rocketmq.codec import decode_frame, encode_command, make_command
from streamdissect.protocols.rocketmq.records import Malformed, Message, RemotingCommand

__all__ = ["Malformed", "Message", "RemotingCommand", "decode_frame", "encode_command",
           "make_command"]
