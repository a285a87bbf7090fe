#!/usr/bin/env bash
# perfgate's GitHub Action, when an input measures counts: valgrind on the runner.
#
# Counts run every measured process under valgrind's callgrind. A runner without it gets the
# distribution's package (GitHub's Ubuntu runners: passwordless sudo); one where that cannot be
# done fails here with one line saying what to install, before anything is measured.
set -euo pipefail

if command -v valgrind >/dev/null; then
  valgrind --version
  exit 0
fi
if command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then
  sudo -n apt-get update -q >/dev/null
  sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -yq valgrind >/dev/null
  valgrind --version
  exit 0
fi
echo "::error title=perfgate::measuring counts needs valgrind on the runner, and it could not be installed here: install the package 'valgrind' in an earlier step"
exit 2
