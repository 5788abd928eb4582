"""`python -m streamdissect ...` is the `streamdissect` command."""

from streamdissect.cli import command

command()
