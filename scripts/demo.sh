#!/usr/bin/env bash
# The main job: benchmark one model, record it in the embedded SQLite store, check it
# against the model's baseline and write the Markdown report. Exit code as perfgate check:
# 0 no regression, 1 regression or budget broken, 2 could not decide.
set -euo pipefail
model="${MODEL:-dqn}"
results=benchmark_results
store="sqlite:///.perfgate/perfgate.db"
mkdir -p "$results"

if [ ! -f "$results/${model}_baseline.json" ]; then
  echo "== no baseline for $model yet: measuring one"
  perfgate bench --model "$model" --output "$results/${model}_first.json" --store "$store"
  perfgate baseline save "$results/${model}_first.json"
fi

echo "== benchmarking $model"
perfgate bench --model "$model" --output "$results/${model}_current.json" --store "$store"

echo "== checking against $results/${model}_baseline.json"
status=0
perfgate check --baseline "$results/${model}_baseline.json" --current "$results/${model}_current.json" \
  --output regression_report.md --json "$results/${model}_check.json" || status=$?
echo "== report: regression_report.md (exit code $status)"
cat regression_report.md
exit "$status"
