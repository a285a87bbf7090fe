#!/usr/bin/env bash
# The main job: benchmark one model, record it in the embedded SQLite store, check it
# against the model's baseline and write the Markdown report. Exit code as perfgate check:
# 0 no regression, 1 regression or budget broken, 2 could not decide.
set -euo pipefail
model="${MODEL:-dqn}"
processes="${PROCESSES:-4}"
results=benchmark_results
store="sqlite:///.perfgate/perfgate.db"
mkdir -p "$results" .perfgate

baseline="$results/${model}_baseline.json"
here=$(python -c "from perfgate.bench.machine import collect_machine; print(collect_machine()['fingerprint'])")
theirs=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['machine'].get('fingerprint',''))" \
  "$baseline" 2>/dev/null || true)
if [ "$here" != "$theirs" ]; then
  # the committed baseline was measured on another kind of machine: timings do not carry over
  baseline=".perfgate/${model}_baseline.json"
  if [ ! -f "$baseline" ] || [ "$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['machine']['fingerprint'])" "$baseline")" != "$here" ]; then
    echo "== the committed baseline is from machine ${theirs:-unknown}, this is $here: measuring a local baseline"
    perfgate bench --model "$model" --processes "$processes" --output "$baseline" --store "$store"
  fi
fi

echo "== benchmarking $model in $processes worker processes"
perfgate bench --model "$model" --processes "$processes" --output "$results/${model}_current.json" --store "$store"

echo "== checking against $baseline"
status=0
perfgate check --baseline "$baseline" --current "$results/${model}_current.json" \
  --output regression_report.md --json "$results/${model}_check.json" || status=$?
cat regression_report.md
echo "== run: $results/${model}_current.json"
echo "== report: $(pwd)/regression_report.md (exit code $status)"
exit "$status"
