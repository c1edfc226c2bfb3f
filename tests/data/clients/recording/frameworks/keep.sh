#!/usr/bin/env bash
# keep.sh SCENARIO NNNN FIXTURE-NAME "CLIENT VERSION" "NOTE"
# record.py keep (through recorder.py) of $R/raw/SCENARIO/NNNN-*.json, with the scratch HOME and
# working directory replaced; then checks the fixture. R is $REC_ROOT/frameworks (REC_ROOT defaults
# to $TMPDIR/route-rec). The fixture goes to tests/data/clients, or $REC_FIXTURES where set.
# PYTHON (default python3) runs the recorder and the check.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R=${REC_ROOT:-${TMPDIR:-/tmp}/route-rec}/frameworks
FIXTURES=${REC_FIXTURES:-$(cd "$HERE/../.." && pwd)}
PYTHON=${PYTHON:-python3}
SC=$1; N=$2; NAME=$3; CLIENT=$4; NOTE=$5
F=$(ls "$R/raw/$SC/$N"-*.json)
"$PYTHON" "$HERE/recorder.py" keep "$F" --client "$CLIENT" --name "$NAME" --note "$NOTE" \
  --replace "$R/work/$SC=/home/user/project" --replace "$R/home/$SC=/home/user" \
  --replace "$R/venvs/=/home/user/.venvs/" --replace "$R=/home/user" --dir "$FIXTURES"
"$PYTHON" - "$FIXTURES/$NAME.json" "$R" <<'PY'
import json, sys
p, root = sys.argv[1], sys.argv[2]; t = open(p).read(); j = json.loads(t)
print(p, len(t), "bytes", j["path"], "task:", "What is the weather in Paris right now?" in t,
      "second:", "Now explain what the echo builtin does with the -n flag." in t)
for bad in (root, "/root", "/tmp/", "sk-corpus", "pyenv", "site-packages"):
    if bad in t: print("  !! found", bad)
PY
