#!/usr/bin/env bash
# The one test command: installs what the tests need (Debian packages, the project with its
# test extras), starts both real brokers on 127.0.0.1, then runs the whole test suite.
# Extra arguments go to pytest (a part: -m "not spark", tests/test_probe.py, -k ...); having
# installed everything, a test whose resource is still missing fails (--require-resources).
# Exit code: pytest's, but a selection that matches no test is said and exits 0, while the
# whole suite collecting nothing is a failure. Brokers stay up (stop: scripts/brokers.sh stop).
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
# the compiled loops (setup.py's optional extension) must have been built: the tests run both
# them and the Python code, and without this a failed build would leave only the latter
export STREAMDISSECT_NATIVE=1
bash scripts/brokers.sh start
export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$(command -v python3)"
status=0
# two workers (pytest-xdist), the tests that share the brokers or the Spark session each kept
# on one worker (tests/conftest.py: xdist_group); -n 0 after it runs in one process
python3 -m pytest -q --require-resources -n 2 --dist loadgroup "$@" || status=$?
if [ "$status" -eq 5 ]; then  # (pytest: no test collected)
  if [ $# -gt 0 ]; then
    echo "test.sh: no test matches: $*" >&2
    status=0
  else
    echo "test.sh: the suite collected no test" >&2
    status=1
  fi
fi
exit "$status"
