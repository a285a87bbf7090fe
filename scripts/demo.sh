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
# thresholds measured for the baselines' machine kind (run-to-run noise), when present
config=()
[ -f "$results/perfgate.toml" ] && config=(--config "$results/perfgate.toml")
perfgate check --baseline "$results/${model}_baseline.json" --current "$results/${model}_current.json" \
  --output regression_report.md --json "$results/${model}_check.json" "${config[@]}" || status=$?
cat regression_report.md
echo "== run: $results/${model}_current.json (trained model: $results/${model}_current.model.pt)"
echo "== report: $(pwd)/regression_report.md (exit code $status)"
exit "$status"
