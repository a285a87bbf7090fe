#!/usr/bin/env bash
# perfgate's GitHub Action, last step: fail the job from the worst exit code, after everything
# was published. STATUS: 0 pass, 1 regression or broken budget (always fails), 2 or more perfgate
# could not decide (fails unless FAIL_ON_ERROR=false; then a warning). An empty STATUS means the
# gate step never finished, which is a failure too.
set -euo pipefail

status=${STATUS:-}
if [ -z "$status" ]; then
  echo "::error title=perfgate::the gate step did not finish; see its log"
  exit 2
fi
case "$status" in
  0)
    echo "perfgate: no regression"
    ;;
  1)
    echo "::error title=perfgate::regression or broken budget (exit code 1); the report is in the job summary"
    exit 1
    ;;
  *)
    if [ "${FAIL_ON_ERROR:-true}" = false ]; then
      echo "::warning title=perfgate::perfgate could not decide (exit code $status); not failing: fail-on-error is false"
    else
      echo "::error title=perfgate::perfgate could not decide (exit code $status); the report is in the job summary"
      exit 2
    fi
    ;;
esac
