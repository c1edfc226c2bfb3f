#!/usr/bin/env bash
# usage: keep.sh NAME RAWFILE FIXTURE "CLIENT VERSION" "NOTE"
# scratch paths of session NAME replaced: work -> /home/user/project, home -> /home/user,
# npm prefix -> /usr/lib/node_modules, venv / pyenv prefix -> /usr/local
# R is $REC_ROOT/cli (REC_ROOT defaults to $TMPDIR/route-rec); the fixture goes to tests/data/clients,
# or $REC_FIXTURES where set; PYTHON (default python3) runs rec.py.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R=${REC_ROOT:-${TMPDIR:-/tmp}/route-rec}/cli
FIXTURES=${REC_FIXTURES:-$(cd "$HERE/../.." && pwd)}
PYTHON=${PYTHON:-python3}
N=$1
# EXTRA_REPLACE="OLD=NEW" adds one more replacement
EXTRA=(); if [ -n "${EXTRA_REPLACE:-}" ]; then EXTRA=(--replace "$EXTRA_REPLACE"); fi
mkdir -p "$FIXTURES"
"$PYTHON" "$HERE/rec.py" keep "$R/raw/$N/$2" --client "$4" --name "$3" \
  --replace "$R/work/$N=/home/user/project" --replace "$R/home/$N=/home/user" \
  --replace "$R/npm/${NPM:-$N}/node_modules=/usr/lib/node_modules" --replace "$R/venv/${VENV:-$N}=/usr/local" \
  --replace /root/.pyenv/versions/3.11.7=/usr/local --replace /root/.pyenv/versions/3.12.1=/usr/local \
  --replace /root/.pyenv/versions/3.13.0=/usr/local ${EXTRA[@]+"${EXTRA[@]}"} --note "$5" --dir "$FIXTURES"
f=$FIXTURES/$3.json
{ grep -o "$R[^\" ]*\|/root[^\" ]*\|sk-[A-Za-z0-9_-]*" "$f" || true; } | sort | uniq -c | head || true
