"""Process settings of the command line, made before anything imports numpy."""

import os

# The command line never multiplies matrices. Without this, importing numpy starts an
# OpenBLAS thread per CPU: start-up time on a many-core machine, and threads the forked
# reading helper would inherit. A value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
