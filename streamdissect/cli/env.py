"""Process settings of the command line, made before anything imports numpy."""

import os

# The command line never multiplies matrices. Without this, importing numpy starts an
# OpenBLAS thread per CPU: start-up time on a many-core machine, and threads the forked
# reading helper would inherit. A value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _keep_freed_memory() -> None:
    """glibc gives the memory of a freed large block back to the kernel, and the next block of
    that size costs a page fault per 4 KiB again: the bulk engine frees and makes ~50 such
    numpy temporaries per 16 MiB block, which was half the run's page faults (27,000 of
    54,000 on the benchmark capture, ~6 % of its time). Blocks up to 32 MiB come from the
    heap, and the heap keeps what is freed: peak memory is the same, it is only reused."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError, TypeError):  # not glibc: nothing to tune
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
    mallopt(-2, 16 << 20)  # M_TOP_PAD


_keep_freed_memory()
