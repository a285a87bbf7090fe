#!/usr/bin/env bash
# The main job, and the gate deciding. Three benchmarks of one model on this machine, each in
# worker processes and recorded in the embedded SQLite store:
#   1. the baseline;
#   2. the same code again, checked against it: unchanged, exit 0 (regression_report.md);
#   3. the same pipeline with feature extraction doing 30 % more work (a stages module,
#      scripts/demo_slower_features.py), checked against it: named, exit 1
#      (regression_report_slower.md).
# Exit code: the check of the unchanged code (0 no regression, 1 regression or budget broken,
# 2 could not decide); 3 when that one passed but the 30 % slowdown was not caught.
set -euo pipefail
model="${MODEL:-dqn}"
processes="${PROCESSES:-4}"
results=benchmark_results
store="sqlite:///.perfgate/perfgate.db"
mkdir -p "$results" .perfgate
baseline=".perfgate/${model}_baseline.json"
current="$results/${model}_current.json"
slower=".perfgate/${model}_slower.json"

echo "== 1/3 the baseline: $model measured on this machine in $processes worker processes"
perfgate bench --model "$model" --processes "$processes" --output "$baseline" --store "$store"

echo "== 2/3 the same code again, checked against the baseline"
perfgate bench --model "$model" --processes "$processes" --output "$current" --store "$store"
status=0
perfgate check --baseline "$baseline" --current "$current" \
  --output regression_report.md --json "$results/${model}_check.json" || status=$?
cat regression_report.md

echo "== 3/3 feature extraction doing 30 % more work (scripts/demo_slower_features.py), checked against the baseline"
PYTHONPATH="scripts${PYTHONPATH:+:$PYTHONPATH}" perfgate bench --model "$model" --processes "$processes" \
  --stages-module demo_slower_features --output "$slower"
slowed=0
perfgate check --baseline "$baseline" --current "$slower" --output regression_report_slower.md --quiet || slowed=$?
sed -n '/^## /,/^### Details/p' regression_report_slower.md | sed '$d'

echo "== unchanged code: exit $status (report: $(pwd)/regression_report.md)"
echo "== feature extraction +30 %: exit $slowed (report: $(pwd)/regression_report_slower.md)"
if [ "$status" -ne 0 ]; then
  exit "$status"
fi
if [ "$slowed" -ne 1 ]; then
  echo "== the 30 % slowdown was not caught (exit $slowed)" >&2
  exit 3
fi
exit 0
