"""RocketMQ remoting (Apache RocketMQ 4.x's name server and broker protocol, TCP 9876/10911).

    from streamdissect.protocols.rocketmq import decode_frame, encode_command, make_command
    record = decode_frame(frame_bytes)        # RemotingCommand or Malformed, never raises
    record.code_name, record.opaque, record.fields["topic"], record.messages

spec.py is the table (codes, languages, headers' fields, V2 keys, system flags); codec.py
the frame and its headers both ways; messages.py the bodies' messages; fastjson.py the
fastjson bodies; framing.py the framer and heuristic; protocol.py the object behind the
seam. docs/protocol-rocketmq.md describes the wire format.
"""

from importlib import import_module

# name -> its module, imported at the first use of the name: the registry imports this
# package for its protocol object (protocol.py), and a capture of other protocols alone
# never reads the codec or the records (~5-8 ms of every command's start)
_FROM = {"decode_frame": "codec", "encode_command": "codec", "make_command": "codec",
         "Malformed": "records", "Message": "records", "RemotingCommand": "records"}  # fmt: skip

__all__ = ["Malformed", "Message", "RemotingCommand", "decode_frame", "encode_command",
           "make_command"]


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_FROM[name]}"), name)
