"""The `streamdissect` command as a process: output complete, exit status kept, a reader
that goes away early is no error."""

import json
import subprocess
import sys

import pytest
import worsen

CAPTURES = worsen.CAPTURES
CAPTURE = CAPTURES / "rstream-slow-consumer-3.10.pcap"
BIG = CAPTURES / "rstream-consume-credit-3.10.pcap"  # > 64 KiB of jsonl with --payloads


def test_output_flushed_before_the_quick_exit():
    out = subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "--format", "json",
                          str(CAPTURE)], check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)  # the whole document, not a cut one
    assert report["credit"][0]["credit_frames"] == 38


def test_exit_status_kept():
    out = subprocess.run([sys.executable, "-m", "streamdissect", "analyze", "/nonexistent.pcap"],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "cannot open" in out.stderr


def test_reader_gone_early_is_quiet():
    # more output than a pipe holds, so the writer does meet the closed pipe
    argv = ["frames", "--format", "jsonl", "--payloads", str(BIG)]
    whole = subprocess.run([sys.executable, "-m", "streamdissect", *argv], check=True,
                           capture_output=True, timeout=120).stdout
    assert len(whole) > 1 << 16  # a pipe holds 64 KiB
    proc = subprocess.Popen([sys.executable, "-m", "streamdissect", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(16)
    proc.stdout.close()  # like `| head -c 16`
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"Exception" not in err, err.decode()


@pytest.mark.parametrize("argv", [["frames", "--port"], ["analyze", "--port"],
                                  ["analyze", "--rocketmq-port"], ["wireshark", "--port"],
                                  ["compare", "--uri", "rabbitmq-stream://127.0.0.1:1/", "--port"],
                                  ["spark", "--out", "/nonexistent/out", "--port"]])  # fmt: skip
@pytest.mark.parametrize("value, says", [("0", "a TCP port is 1-65535, not 0"),
                                         ("70000", "a TCP port is 1-65535, not 70000"),
                                         ("x", "not a port number: 'x'")])  # fmt: skip
def test_a_port_option_takes_a_tcp_port_only(argv, value, says):
    """A port outside 1-65535 is a usage error (exit 2, said), not a filter that matches
    nothing or a tshark preference tshark refuses."""
    out = subprocess.run([sys.executable, "-m", "streamdissect", *argv, value, str(CAPTURE)],
                         check=False, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_subcommands_run_imports_are_made_before_the_freeze():
    """`command()` imports what the subcommand's run imports (its RUN_IMPORTS) before it
    freezes the import-time objects: each name imports, and is in before the freeze."""
    script = ("import gc, sys, streamdissect.cli as cli\n"
              "cli._imported_frozen(['analyze'])\n"
              "frozen = gc.get_freeze_count()\n"
              "from streamdissect.cli import analyze\n"
              "print(frozen > 0, len(analyze.RUN_IMPORTS), "
              "all(name in sys.modules for name in analyze.RUN_IMPORTS))\n")
    frozen, names, imported = _printed(script).split()
    assert frozen == "True" and int(names) > 0 and imported == "True"


def test_analyzes_start_leaves_out_what_it_does_not_use():
    """The start of `analyze` (its module, its RUN_IMPORTS, the subcommands listed) imports
    no dataclasses (its classes are slotted.py's), no pkgutil (which imports inspect and
    typing) and no tempfile (imported at the first spill of CompactRows)."""
    left_out = "{'dataclasses', 'pkgutil', 'tempfile'}"
    printed = _printed("import sys\n"
                       "before = set(sys.modules)\n"
                       "import streamdissect.cli as cli\n"
                       "cli._imported_frozen(['analyze'])\n"
                       "cli.subcommand_modules()\n"
                       f"print(sorted({left_out} & (set(sys.modules) - before)))\n")
    assert printed.strip() == "[]", printed


def _printed(script: str) -> str:
    """What `script` prints, run in a new interpreter."""
    return subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True, timeout=120).stdout
