"""`python -m streamdissect.cli ...` is the `streamdissect` command."""

from . import command

command()
