#!/usr/bin/env bash
# The one test command: installs what the tests need (Debian packages, the project with its
# test extras), starts both real brokers on 127.0.0.1, then runs the whole test suite.
# Extra arguments go to pytest. Brokers stay up afterwards (stop: scripts/brokers.sh stop).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
# Debian's Chromium: tests/test_report_browser.py opens the HTML report in it, headless
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
fi
# .pyc files as a wheel install has them (an editable install under
# PYTHONDONTWRITEBYTECODE=1 would compile every module again in every CLI test's process)
python3 -m compileall -q streamdissect
bash scripts/brokers.sh start
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$(command -v python3)"
python3 -m pytest -q "$@"
