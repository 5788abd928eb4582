"""Sanity caps that keep hostile headers from making us allocate or loop without end."""

# No real link layer frame is bigger (tcpdump's own maximum snaplen is 262144).
MAX_PACKET = 256 * 1024
# pcapng blocks other than packets (name resolution, comments, secrets) stay far below.
MAX_BLOCK = 16 * 1024 * 1024

# Live capture: the kernel's capture buffer, a few seconds of a busy link while the analysis
# catches up (tcpdump's default, 2 MiB, holds a fraction of a second of a loaded broker's
# traffic). Here, not in capture.live, so that the command line's options name it without
# importing the live capture (subprocess, terminal control) at every start.
BUFFER_MIB = 32
