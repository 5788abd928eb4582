"""`python -m streamdissect.cli ...` is the `streamdissect` command."""

from streamdissect.cli import command

command()
