"""Rotated capture sets (tcpdump -C, -G, -W): files dissected apart, stitched into one
capture (facts: what each piece says at its edges; stitch: the plan; apply: the plan on the
pieces' tables)."""
