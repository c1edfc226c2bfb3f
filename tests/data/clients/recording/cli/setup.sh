#!/usr/bin/env bash
# usage: setup.sh NAME PORT  -- fresh scratch repo $R/work/NAME + HOME $R/home/NAME, recorder on PORT
# saving to $R/raw/NAME (its pid in $R/raw/NAME.pid, its log in $R/raw/NAME.log).
# R is $REC_ROOT/cli (REC_ROOT defaults to $TMPDIR/route-rec); PYTHON (default python3) runs rec.py.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R=${REC_ROOT:-${TMPDIR:-/tmp}/route-rec}/cli
PYTHON=${PYTHON:-python3}
N=$1; PORT=$2
rm -rf "$R/work/$N" "$R/home/$N" "$R/raw/$N"; mkdir -p "$R/work/$N" "$R/home/$N" "$R/raw"
cd "$R/work/$N" && git init -q && printf 'def greet(name):\n    return "hi " + name\n' > greet.py && git add . && git -c user.email=u@example.com -c user.name=user commit -qm init
nohup env ${REC_WHOLE_TOOL_CALL:+REC_WHOLE_TOOL_CALL=1} "$PYTHON" "$HERE/rec.py" serve --port "$PORT" --out "$R/raw/$N" > "$R/raw/$N.log" 2>&1 &
echo $! > "$R/raw/$N.pid"
sleep 0.5; cat "$R/raw/$N.log"
