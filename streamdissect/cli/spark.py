"""`streamdissect spark INPUT... --out DIR`: the analysis tables of a capture archive with
Spark (local[*], or a cluster's --master), one Parquet dataset a table (spark/command.py)."""

from __future__ import annotations

import argparse


def register(subparsers) -> argparse.ArgumentParser:
    from streamdissect.spark.command import DESCRIPTION, add_arguments, run

    p = subparsers.add_parser(
        "spark",
        help="analyse a capture archive with Spark: one Parquet dataset per table",
        description=DESCRIPTION,
    )
    add_arguments(p)
    p.set_defaults(handler=run)
    return p
