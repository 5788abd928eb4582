"""Sanity caps that keep hostile headers from making us allocate or loop without end."""

# No real link layer frame is bigger (tcpdump's own maximum snaplen is 262144).
MAX_PACKET = 256 * 1024
# pcapng blocks other than packets (name resolution, comments, secrets) stay far below.
MAX_BLOCK = 16 * 1024 * 1024
