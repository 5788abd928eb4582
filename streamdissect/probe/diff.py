"""A captured response against the live one, field by field, each difference with a kind:

- protocol: what the broker's protocol does differently (a response code no state explains,
  a missing or extra field or statistic, another frame version or key, SASL mechanisms,
  command versions, a refused command);
- server: who the server is (peer properties such as the version; advertised addresses);
- state: what the broker holds now (streams that no longer exist, offsets, sequences,
  statistics' values, routes, partitions).
"""

from __future__ import annotations

from streamdissect.probe.checks import command_name
from streamdissect.protocols.stream import message_spec
from streamdissect.protocols.stream.codes import ResponseCode, code_name
from streamdissect.protocols.stream.records import jsonable

ABSENT = "(absent)"
# codes that say what exists now, not how the broker speaks
STATE_CODES = frozenset((
    ResponseCode.STREAM_DOES_NOT_EXIST, ResponseCode.STREAM_ALREADY_EXISTS,
    ResponseCode.STREAM_NOT_AVAILABLE, ResponseCode.SUBSCRIPTION_ID_DOES_NOT_EXIST,
    ResponseCode.PUBLISHER_DOES_NOT_EXIST, ResponseCode.NO_OFFSET,
    ResponseCode.ACCESS_REFUSED, ResponseCode.VIRTUAL_HOST_ACCESS_FAILURE,
))  # fmt: skip
# (command, field) -> (kind of an entry present on one side only, kind of a changed value);
# any other field holds state
KINDS = {
    ("PeerProperties", "properties"): ("server", "server"),
    ("SaslHandshake", "mechanisms"): ("protocol", "protocol"),
    ("ExchangeCommandVersions", "commands"): ("protocol", "protocol"),
    ("StreamStats", "statistics"): ("protocol", "state"),
    ("Metadata", "brokers"): ("state", "server"),
}
STATE = ("state", "state")
# lists of structs compared entry by entry, matched by this member
IDENTITY = {
    ("Metadata", "brokers"): "reference",
    ("Metadata", "stream_metadata"): "stream",
    ("ExchangeCommandVersions", "commands"): "key",
}
UNORDERED = frozenset({("SaslHandshake", "mechanisms")})  # (the order means nothing)


def row(command: str, field: str, captured, live, kind: str) -> dict:
    return {"command": command, "field": field, "captured": jsonable(captured),
            "live": jsonable(live), "kind": kind}  # fmt: skip


def code_kind(captured: int | None, live: int | None) -> str:
    return "state" if {captured, live} & STATE_CODES else "protocol"


def diff_response(command: str, captured, live, quirk: str | None = None) -> list[dict]:
    """Rows for each way the live response differs from the captured one."""
    rows = []
    if quirk:
        rows.append(row(command, "key", f"0x{captured.key:04x}", quirk, "protocol"))
    if captured.version != live.version:
        rows.append(row(command, "version", captured.version, live.version, "protocol"))
    if captured.code != live.code:  # (the fields of another code are not comparable)
        rows.append(row(command, "code", code_name(captured.code), code_name(live.code),
                        code_kind(captured.code, live.code)))  # fmt: skip
        return rows
    fields = message_spec(command, response=True).fields_for(min(captured.version, live.version))
    for field in fields:
        kinds = KINDS.get((command, field.name), STATE)
        _walk(rows, command, field.name, field.name, getattr(captured, field.name, None),
              getattr(live, field.name, None), kinds)  # fmt: skip
    return rows


def _keyed(command: str, top: str, items: list) -> dict | None:
    member = IDENTITY.get((command, top))
    if member is None or not all(isinstance(i, dict) and member in i for i in items):
        return None
    if member == "key":
        return {command_name(i[member]): i for i in items}
    return {str(i[member]): i for i in items}


def _walk(rows: list, command: str, top: str, path: str, captured, live,
          kinds: tuple[str, str]) -> None:  # fmt: skip
    if captured == live:
        return
    presence, value = kinds
    if isinstance(captured, list) and isinstance(live, list):
        if (command, top) in UNORDERED:
            if sorted(map(str, captured)) != sorted(map(str, live)):
                rows.append(row(command, path, sorted(captured), sorted(live), value))
            return
        keyed = (_keyed(command, top, captured), _keyed(command, top, live))
        if keyed[0] is not None and keyed[1] is not None:
            captured, live = keyed
    if isinstance(captured, dict) and isinstance(live, dict):
        for key in sorted(set(captured) | set(live), key=str):
            where = f"{path}.{key}"
            if key not in captured or key not in live:
                rows.append(row(command, where, captured.get(key, ABSENT),
                                live.get(key, ABSENT), presence))  # fmt: skip
            elif key == "code":
                if captured[key] != live[key]:
                    rows.append(row(command, where, code_name(captured[key]),
                                    code_name(live[key]),
                                    code_kind(captured[key], live[key])))  # fmt: skip
            else:
                _walk(rows, command, top, where, captured[key], live[key], kinds)
        return
    rows.append(row(command, path, captured, live, value))
