"""`python -m streamdissect ...` is the `streamdissect` command."""

import sys

from .cli import main

sys.exit(main())
