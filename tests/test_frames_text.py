"""The text form of `streamdissect frames` names what it cannot decode."""

from __future__ import annotations

import subprocess
import sys

import worsen

CAPTURE = worsen.CAPTURES / "raw-server-close-3.10.pcap"


def test_unknown_command_shows_its_key_and_the_broker_close_follows():
    out = subprocess.run([sys.executable, "-m", "streamdissect.cli", "frames", str(CAPTURE)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    unknown = [line for line in out if "Unknown" in line]
    assert len(unknown) == 1 and "key=0x0077" in unknown[0] and "→" in unknown[0]
    after = out[out.index(unknown[0]) + 1]
    assert "← Close v1 corr=1" in after and "closing_code=13" in after
    assert any("→ TuneResponse v1" in line for line in out)
