#!/usr/bin/env bash
# perfgate's GitHub Action, step 2 (when the virtualenv is not in the cache): install perfgate.
#
# Environment: PERFGATE_VENV (where), EXTRAS (export,profile, or pipeline,export,profile), PERFGATE_SPEC (a pip
# requirement for perfgate; empty: the action's own copy in GITHUB_ACTION_PATH), INSTALL (pip
# arguments for the suite's own dependencies, e.g. "-r requirements.txt"), TORCH_INDEX_URL (where
# torch comes from for the built-in pipeline; the CPU-only wheels by default).
set -euo pipefail

venv=${PERFGATE_VENV:?PERFGATE_VENV is not set}
python=${PYTHON:-python}
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip

extras=${EXTRAS:-export,profile}
if [[ ",$extras," == *,pipeline,* ]]; then
  # the models' torch, exactly this pin; from the CPU index a runner gets the small CPU build
  # instead of the multi-GB CUDA one
  "${pip[@]}" install --quiet torch==2.13.0 --index-url "${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
fi

if [ -n "${PERFGATE_SPEC:-}" ]; then
  requirement=$PERFGATE_SPEC
else
  requirement="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set}[$extras]"
fi
"${pip[@]}" install --quiet "$requirement"

if [ -n "${INSTALL:-}" ]; then
  read -ra words <<<"$INSTALL"
  "${pip[@]}" install --quiet "${words[@]}"
fi
"$venv/bin/perfgate" --version
