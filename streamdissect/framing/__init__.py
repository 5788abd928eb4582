"""Framing: a direction's ordered TCP bytes cut into protocol frames, with resync after gaps."""
