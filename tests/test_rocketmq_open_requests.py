"""A direction's open requests (framing.OpenRequests): each response named by the request it
answers, and the memory a burst of open requests took given back once it is answered (a
dict keeps its largest table when emptied: ~295 KB for the 10,003 requests a direction of
the RocketMQ benchmark capture held at once), also when a few requests stay open for good
(long polls)."""

from __future__ import annotations

import random
import sys

from streamdissect.protocols.rocketmq.codec import make_command
from streamdissect.protocols.rocketmq.framing import OpenRequests, name_response

BURST = 10_003
CODES = (10, 11, 36)  # SEND_MESSAGE, PULL_MESSAGE, HEART_BEAT
SMALL = 4 * 1024  # bytes: a dict of a few dozen entries; the burst's is ~70 times that


def commands(code: int) -> tuple:
    """A request and its response with `code`, real records (encoded, then decoded)."""
    return make_command(code), make_command(code, response=True)


REQUESTS_AND_RESPONSES = {code: commands(code) for code in CODES}


def ask(own: OpenRequests, code: int, opaque: int) -> None:
    request = REQUESTS_AND_RESPONSES[code][0]
    request.opaque = opaque
    name_response(request, own, None)


def answer(own: OpenRequests, client: OpenRequests, opaque: int) -> int | None:
    """The request code the client's request `opaque` names its response by (from the
    server's direction, `own`)."""
    response = REQUESTS_AND_RESPONSES[CODES[0]][1]
    response.opaque, response.request_code = opaque, None
    name_response(response, own, client)
    return response.request_code


def test_a_burst_answered_gives_its_memory_back():
    client, server = OpenRequests(), OpenRequests()
    for opaque in range(BURST):
        ask(client, CODES[opaque % 3], opaque)
    peak = sys.getsizeof(client.calls)
    assert peak > 200_000
    named = [answer(server, client, opaque) for opaque in range(BURST)]
    assert named == [CODES[opaque % 3] for opaque in range(BURST)]
    assert sys.getsizeof(client.calls) < SMALL
    assert answer(server, client, 0) is None  # (answered already: forgotten)


def test_a_burst_answered_but_long_polls_gives_its_memory_back_and_keeps_them():
    client, server = OpenRequests(), OpenRequests()
    polls = {3, 999, 5_000, 9_998, 10_002}  # PULL_MESSAGEs held by the broker
    for opaque in range(BURST):
        ask(client, CODES[1] if opaque in polls else CODES[0], opaque)
    for opaque in range(BURST):
        if opaque not in polls:
            assert answer(server, client, opaque) == CODES[0]
    assert sys.getsizeof(client.calls) < SMALL
    for opaque in sorted(polls):  # the polls answered at last: still named
        assert answer(server, client, opaque) == CODES[1]


def test_naming_as_a_plain_dict_names_it_through_bursts():
    """Requests and responses in a random order with bursts of thousands open: each
    response named as a plain dict of the open requests names it."""
    rng = random.Random(26)
    client, server = OpenRequests(), OpenRequests()
    reference: dict[int, int] = {}
    next_opaque = 0
    for _ in range(40):
        for _ in range(rng.choice((3, 50, 2_000, 6_000))):  # asked
            code = rng.choice(CODES)
            opaque = next_opaque if rng.random() < 0.98 else rng.randrange(next_opaque + 1)
            next_opaque += 1
            ask(client, code, opaque)
            reference.pop(opaque, None)
            reference[opaque] = code
        open_now = list(reference)
        rng.shuffle(open_now)
        keep = rng.choice((0, 0, 5, 100))
        for opaque in open_now[keep:] + [next_opaque + 7]:  # (and one never asked)
            assert answer(server, client, opaque) == reference.pop(opaque, None)
    assert sys.getsizeof(client.calls) < SMALL


def test_oneway_requests_are_not_kept():
    client = OpenRequests()
    request = make_command(CODES[2], oneway=True, opaque=1)
    name_response(request, client, None)
    assert client.calls == {}


def test_a_framer_restored_has_its_open_requests_as_they_were():
    """The bulk engine undoes a connection's block by a framer's snapshot: the open requests
    of the undone walk must not stay behind (a response would be named by a request the
    restored framer never saw, or a request asked twice)."""
    from streamdissect.protocols.base import FramerOptions
    from streamdissect.protocols.rocketmq.protocol import RocketMQProtocol

    options = FramerOptions(1 << 20, False, None, True)
    framer = RocketMQProtocol().framer(lambda *a: None, lambda *a: None, options, [])
    ask(framer.requests, CODES[0], 1)
    saved = [(name, value) for name, value in framer.snapshot() if name == "requests"]
    ask(framer.requests, CODES[1], 2)  # (the walk that is undone)
    framer.restore(saved)
    assert framer.requests.calls == {1: CODES[0]}
    ask(framer.requests, CODES[2], 3)  # (and the snapshot is not the live one)
    framer.restore(saved)
    assert framer.requests.calls == {1: CODES[0]}
