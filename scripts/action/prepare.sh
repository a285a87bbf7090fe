#!/usr/bin/env bash
# perfgate's GitHub Action, step 1: check the inputs, decide what this run does, name the virtualenv.
#
# Writes to $GITHUB_OUTPUT:
#   mode      pr (gate a pull request with perfgate ab), record (benchmark the default branch into
#             the store and update the baselines) or none (any other event: nothing to do)
#   venv      where perfgate's virtualenv lives ($RUNNER_TEMP/perfgate-venv)
#   venv-key  its cache key: everything that decides what is installed in it, so two jobs that
#             install different things never share an entry
#   extras    perfgate's extras to install: export and profile, and pipeline for the built-in suite
#
# Inputs arrive as environment variables (never interpolated into the script): SUITE, MODELS,
# STAGES_MODULES, MODE, EVENT_NAME, REF, DEFAULT_BRANCH, RECORD_BRANCH, PERFGATE_SPEC, INSTALL,
# DEPENDENCY_FILES, TORCH_INDEX_URL, PYTHON_VERSION, FAIL_ON_ERROR, MEASURE, PR_MEASURE, GITHUB_ACTION_PATH,
# RUNNER_*.
# A bad input exits 2 with one ::error line naming it.
set -euo pipefail

fail() {
  echo "::error title=perfgate::$1"
  exit 2
}

suite=${SUITE:-}
[ -n "$suite" ] || fail "the input 'suite' is empty: give the name your @stage(..., suite=NAME) uses, or 'pipeline' for perfgate's built-in suite"
[ -n "${MODELS//[[:space:]]/}" ] || fail "the input 'model' is empty: give one or more model names, separated by spaces"
if [ "$suite" != pipeline ] && [ -z "${STAGES_MODULES//[[:space:]]/}" ]; then
  fail "suite '$suite' needs the input 'stages-module': the module(s) that register its stages, importable from the repository root (e.g. mystages or bench.stages)"
fi
for input in "measure:${MEASURE:-times}" "pr-measure:${PR_MEASURE:-times}"; do
  case "${input#*:}" in
    times | counts) ;;
    *) fail "the input '${input%%:*}' must be times or counts, got '${input#*:}'" ;;
  esac
done
case "${FAIL_ON_ERROR:-true}" in
  true | false) ;;
  *) fail "the input 'fail-on-error' must be true or false, got '${FAIL_ON_ERROR}'" ;;
esac

record_branch=${RECORD_BRANCH:-${DEFAULT_BRANCH:-main}}
mode=${MODE:-auto}
case "$mode" in
  auto)
    case "${EVENT_NAME:-}" in
      pull_request) mode="pr" ;;
      push | workflow_dispatch | schedule)
        if [ "${REF:-}" = "refs/heads/$record_branch" ]; then mode=record; else mode=none; fi
        ;;
      *) mode=none ;;
    esac
    ;;
  pr | record) ;;
  *) fail "the input 'mode' must be auto, pr or record, got '$mode'" ;;
esac

# export: the HTML report; profile: where a regressed stage's time went (pyinstrument)
extras="export,profile"
if [ "$suite" = pipeline ]; then
  extras=pipeline,export,profile
fi

# what decides the virtualenv's content: perfgate's own source (or the requirement given for it),
# the extras, the suite's own dependencies and the files they come from
spec=${PERFGATE_SPEC:-}
{
  echo "extras=$extras"
  echo "install=${INSTALL:-}"
  echo "torch=${TORCH_INDEX_URL:-}"
  if [ -n "$spec" ]; then
    echo "spec=$spec"
  else
    source_dir=${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set}
    (cd "$source_dir" && find pyproject.toml perfgate -type f \( -name '*.py' -o -name '*.toml' -o -name '*.json' \) \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  fi
  if [ -n "${DEPENDENCY_FILES:-}" ]; then
    read -ra patterns <<<"$DEPENDENCY_FILES"
    for pattern in "${patterns[@]}"; do
      for file in $pattern; do  # a glob, expanded here on purpose
        if [ -f "$file" ]; then sha256sum "$file"; fi
      done
    done
  fi
} >"${RUNNER_TEMP:-/tmp}/perfgate-venv-inputs.txt"
digest=$(sha256sum "${RUNNER_TEMP:-/tmp}/perfgate-venv-inputs.txt" | cut -c1-20)

{
  echo "mode=$mode"
  echo "venv=${RUNNER_TEMP:-/tmp}/perfgate-venv"
  echo "venv-key=perfgate-venv-${RUNNER_OS:-Linux}-${RUNNER_ARCH:-X64}-py${PYTHON_VERSION:-3}-${extras//,/-}-${digest}"
  echo "extras=$extras"
} >>"$GITHUB_OUTPUT"
echo "perfgate: mode $mode (event ${EVENT_NAME:-none}, ref ${REF:-none}, record branch $record_branch)"
