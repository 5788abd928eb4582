"""`python -m streamdissect ...` is the `streamdissect` command."""

from .cli import command

command()
