"""The job for `spark-submit`, on the session it makes (its --master, its resources):

    spark-submit --master spark://HOST:7077 "$(python -m streamdissect.spark.submit --path)" \
        INPUT... --out DIR [--tables ...] [--port N]... [--no-heuristic] [--partitions N]

The arguments are those of `streamdissect spark` (but --master, which spark-submit takes).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--path"]:  # (where this file is, for the spark-submit command line)
        print(__file__)
        return 0
    import argparse

    from pyspark.sql import SparkSession

    # (absolute imports: spark-submit runs this file as a script, outside its package)
    from streamdissect.spark import register, spark_environment
    from streamdissect.spark.command import DESCRIPTION, add_arguments, run

    parser = argparse.ArgumentParser(prog="streamdissect.spark.submit", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    spark_environment()
    spark = SparkSession.builder.appName("streamdissect").getOrCreate()
    register(spark)
    return run(args, spark)


if __name__ == "__main__":
    sys.exit(main())
