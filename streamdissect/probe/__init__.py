"""The probe face: a live client built on the codec, and the comparison of a capture with a
live broker.

Each module has one job: `uri` (the connection URI), `errors` (a failure names its step),
`wire` (the socket, TLS and the record of every byte for `--pcap`), `session` (the
handshake, calls with correlation ids, heartbeats, Close), `checks` (what `probe` asks),
`writes` (the `--allow-writes` round trip on a temporary stream), `captured` (what a capture
asked and was answered), `compare` (the replay and its differences), `pcap` (a session
written as a capture), `text` (the text reports) and `testing` (a misbehaving broker for
tests). Frames are encoded and decoded by `streamdissect.protocols.stream` only.
"""
