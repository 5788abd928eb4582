"""cli.env keeps freed large blocks in the heap: the bulk engine's per-block numpy temporaries
then stop costing a page fault per 4 KiB each time they are made again."""

import platform
import subprocess
import sys

import pytest

CHURN = """
import resource, sys
if sys.argv[1] == "tuned":
    import streamdissect.cli.env
import numpy as np
def churn():
    for _ in range(50):  # a block's temporaries: 8 MiB of 512 KiB arrays, made and freed
        arrays = [np.ones(1 << 16) for _ in range(16)]
        del arrays
churn()  # (numpy's own first-use faults out of the count)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True,
                         check=True)  # fmt: skip
    return int(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt tuning is glibc's")
def test_freed_blocks_are_reused_without_page_faults():
    plain, tuned = faults("plain"), faults("tuned")
    # 400 MiB made in all: by default the heap gives most of it back, and faults it in again
    assert plain > 20_000
    assert tuned < plain / 20
