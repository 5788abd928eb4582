"""tshark run with the generated dissector: what `streamdissect wireshark CAPTURE` prints."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

INSTALL_HINT = "tshark not found: install Wireshark's tshark (Debian: apt-get install tshark)"


class TsharkError(Exception):
    pass


def command(plugin: str | Path, capture: str, *, verbose: bool = False,
            display_filter: str | None = None, show_secrets: bool = False,
            ports: Sequence[int] = ()) -> list[str]:  # fmt: skip
    """Two passes (-2): a request shows the frame of its response, found later. `ports`:
    the brokers' ports, instead of the protocol's default, in the dissector's ports
    preference (as `--port` is for `frames`): Wireshark asks a port's dissector before any
    heuristic, so a client whose ephemeral port another dissector owns would otherwise hide
    its connection from the heuristic."""
    exe = shutil.which("tshark")
    if exe is None:
        raise TsharkError(INSTALL_HINT)
    args = [exe, "-n", "-2", "-X", f"lua_script:{plugin}", "-r", capture]
    if verbose:
        args.append("-V")
    if display_filter:
        args += ["-Y", display_filter]
    if show_secrets:
        args += ["-o", "rabbitmq_stream.show_secrets:TRUE"]
    if ports:
        args += ["-o", "rabbitmq_stream.ports:" + ",".join(map(str, sorted(set(ports))))]
    return args


def show(plugin: str | Path, captures: Sequence[str], out: TextIO | None = None,
         err: TextIO | None = None, **options: object) -> int:  # fmt: skip
    """tshark's output for each capture; 1 when tshark fails or cannot load the plugin."""
    out, err = out or sys.stdout, err or sys.stderr
    for capture in captures:
        done = subprocess.run(command(plugin, capture, **options), capture_output=True,  # type: ignore[arg-type]
                              check=False)  # fmt: skip
        out.write(done.stdout.decode("utf-8", "replace"))
        problems = [line for line in done.stderr.decode("utf-8", "replace").splitlines()
                    if not line.startswith("Running as user")]  # fmt: skip
        if problems:
            err.write("\n".join(problems) + "\n")
        if done.returncode != 0 or any("Lua" in line for line in problems):
            return 1
    return 0
