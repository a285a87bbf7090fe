#!/usr/bin/env bash
# perfgate's GitHub Action, step 3: gate a pull request, or record the default branch.
#
#   MODE=pr      for every model, `perfgate ab` measures HEAD against the merge base of
#                BASE_SHA and HEAD, both in this job; the full reports are joined into the job
#                summary, their compact forms into one comment body ($REPORTS/comment.md)
#   MODE=record  for every model, `perfgate bench`, `perfgate record` into PERFGATE_STORE,
#                `perfgate check` against the store (informational, with notifications); then
#                `perfgate baseline update` and the HTML report of the history
#
# Never fails on a regression itself: it writes status=<worst exit code> to $GITHUB_OUTPUT and
# the last step of the action decides (after the reports are published). Exits non-zero only when
# it cannot run at all. Inputs arrive as environment variables: MODE, SUITE, MODELS,
# STAGES_MODULES, TIME_BUDGET ("80", or "80 mamba2=240 tft=240": seconds per model), THRESHOLD, FAIL_ON_INCONCLUSIVE,
# BENCH_ARGS, MEASURE (times or counts, for bench), PR_MEASURE (times or counts, for ab), BASE_SHA, REPORTS, PERFGATE_VENV, MARKER, RUN_URL, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY.
set -euo pipefail

if [ -n "${PERFGATE_VENV:-}" ]; then
  PATH="$PERFGATE_VENV/bin:$PATH"
fi
reports=${REPORTS:-perfgate-reports}
marker=${MARKER:-<!-- perfgate-report -->}
summary_file=${GITHUB_STEP_SUMMARY:-/dev/null}
mkdir -p "$reports" "$reports/compact"
read -ra models <<<"${MODELS:-}"

suite_args=(--suite "${SUITE:?SUITE is not set}")
read -ra modules <<<"${STAGES_MODULES:-}"
for module in "${modules[@]}"; do
  suite_args+=(--stages-module "$module")
done
decision_args=()
if [ -n "${THRESHOLD:-}" ]; then
  decision_args+=(--threshold "$THRESHOLD")
fi
if [ "${FAIL_ON_INCONCLUSIVE:-false}" = "true" ]; then
  decision_args+=(--fail-on-inconclusive)
fi

# seconds for one model: a plain number is the default, NAME=SECONDS overrides it for NAME
budget_for() {
  local default=80 named="" word
  for word in ${TIME_BUDGET:-80}; do
    case "$word" in
      "$1"=*) named=${word#*=} ;;
      *=*) ;;
      *) default=$word ;;
    esac
  done
  echo "${named:-$default}"
}

# a report for a model perfgate could not decide, with the end of its log
undecided() {
  local model=$1 rc=$2 log=$3
  {
    echo "## ⚠️ perfgate could not decide (exit code $rc)"
    echo
    echo '```text'
    tail -n 20 "$log"
    echo '```'
  } >"$reports/${model}.md"
  cp "$reports/${model}.md" "$reports/compact/${model}.md"
}

status=0
worst() {
  if [ "$1" -gt "$status" ]; then status=$1; fi
}

gate_pull_request() {
  local base model rc budget html_args measure_args
  if ! base=$(git merge-base "${BASE_SHA:?BASE_SHA is not set}" HEAD); then
    echo "::error title=perfgate::no merge base of the base branch ($BASE_SHA) and HEAD; check out with fetch-depth: 0"
    echo "status=2" >>"$GITHUB_OUTPUT"
    exit 0
  fi
  echo "perfgate: baseline is the merge base $base"
  html_args=()
  for model in "${models[@]}"; do
    budget=$(budget_for "$model")
    html_args=()
    if perfgate ab --help | grep -e '--html' >/dev/null; then
      html_args=(--html "$reports/${model}.html")
    fi
    rc=0
    measure_args=(--time-budget "$budget")
    if [ "${PR_MEASURE:-times}" = counts ]; then
      measure_args=(--measure counts) # counts do not wobble: two pairs decide, whatever the time
    fi
    perfgate ab --baseline-ref "$base" --current-ref HEAD --model "$model" "${measure_args[@]}" \
      "${suite_args[@]}" "${decision_args[@]}" --output "$reports/${model}.md" --json "$reports/${model}.json" \
      --comment "$reports/compact/${model}.md" "${html_args[@]}" 2>"$reports/${model}.log" || rc=$?
    cat "$reports/${model}.log" >&2
    # inconclusive metrics are warnings in the pull request's checks, not only rows in the report
    python3 "$(dirname "$0")/annotate.py" "$model" "$reports/${model}.json" || true
    if [ "$rc" -ge 2 ] || [ ! -s "$reports/${model}.md" ]; then
      undecided "$model" "$rc" "$reports/${model}.log"
      rc=$((rc > 2 ? rc : 2))
    fi
    worst "$rc"
  done
  local details=()
  if [ -n "${RUN_URL:-}" ]; then
    details=(--details-url "$RUN_URL")
  fi
  # the job summary has room for the full reports; the comment gets their compact forms
  perfgate summary "$reports"/*.md --append "$summary_file" --marker "$marker" "${details[@]}"
  perfgate summary "$reports"/compact/*.md --output "$reports/comment.md" --marker "$marker" "${details[@]}"
  echo "comment=$reports/comment.md" >>"$GITHUB_OUTPUT"
}

record_default_branch() {
  local model rc run
  export PERFGATE_STORE=${PERFGATE_STORE:-sqlite:///.perfgate/perfgate.db}
  local branch=${REF_NAME:-${GITHUB_REF_NAME:-main}}
  read -ra extra <<<"${BENCH_ARGS:-}"
  extra+=(--measure "${MEASURE:-times}")
  for model in "${models[@]}"; do
    run="$reports/${model}_run.json"
    rc=0
    perfgate bench "${suite_args[@]}" --model "$model" --branch "$branch" --output "$run" "${extra[@]}" 2>"$reports/${model}.log" || rc=$?
    cat "$reports/${model}.log" >&2
    if [ "$rc" -ne 0 ]; then
      undecided "$model" "$rc" "$reports/${model}.log"
      worst 2
      continue
    fi
    # the machine's run-to-run noise, learned from the history recorded so far (within the
    # segments between its change points); the check below reads it from .perfgate/noise.json
    if perfgate calibrate --model "$model" --store "$PERFGATE_STORE" --baseline-branch "$branch" \
      2>"$reports/${model}.calibrate.log"; then
      echo "perfgate calibrate ${model}: $(tail -n 1 "$reports/${model}.calibrate.log")"
    else
      echo "perfgate calibrate ${model}: noise not learned yet: $(tail -n 1 "$reports/${model}.calibrate.log")"
    fi
    rc=0
    perfgate record "$run" || rc=$?
    if [ "$rc" -ne 0 ]; then
      worst 2
      continue
    fi
    # informational: the change is in; a flagged run stays out of the baselines until
    # `perfgate baseline accept RUN_ID`; the first run has nothing to compare with (exit 2)
    rc=0
    perfgate check --store "$PERFGATE_STORE" --baseline-branch "$branch" --current "$run" "${decision_args[@]}" \
      --output "$reports/${model}.md" --json "$reports/${model}.json" --notify 2>"$reports/${model}.check.log" || rc=$?
    cat "$reports/${model}.check.log" >&2
    if [ "$rc" -ge 2 ] || [ ! -s "$reports/${model}.md" ]; then
      undecided "$model" "$rc" "$reports/${model}.check.log"
    fi
    echo "perfgate check ${model}: exit code ${rc}"
  done
  if compgen -G "$reports/*.md" >/dev/null; then
    perfgate summary "$reports"/*.md --append "$summary_file" --title "Performance of $branch" \
      --marker "$marker"
  fi
  perfgate baseline update --store "$PERFGATE_STORE" --baseline-branch "$branch" || worst 2
  perfgate report --html "$reports/report.html" --store "$PERFGATE_STORE" --baseline-branch "$branch" || worst 2
}

case "${MODE:-}" in
  pr) gate_pull_request ;;
  record) record_default_branch ;;
  none)
    echo "perfgate: nothing to do for this event (pull requests are gated; pushes to the record branch are recorded)"
    ;;
  *)
    echo "::error title=perfgate::MODE must be pr, record or none, got '${MODE:-}'"
    exit 2
    ;;
esac
echo "status=$status" >>"$GITHUB_OUTPUT"
echo "perfgate: worst exit code $status"
