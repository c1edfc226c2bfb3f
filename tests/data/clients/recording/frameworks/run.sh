#!/usr/bin/env bash
# run.sh SCENARIO PORT VENV DRIVER [REPLIES.json]
# Starts recorder.py on 127.0.0.1:PORT saving to $R/raw/SCENARIO (wiped first), runs
# $R/venvs/VENV/bin/python sessions/DRIVER.py http://127.0.0.1:PORT SCENARIO with a scratch HOME
# ($R/home/SCENARIO) and working directory ($R/work/SCENARIO), then stops that recorder (by its pid).
# R is $REC_ROOT/frameworks (REC_ROOT defaults to $TMPDIR/route-rec); REPLIES names a file in scripts/.
# PYTHON (default python3) runs the recorder.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
R=${REC_ROOT:-${TMPDIR:-/tmp}/route-rec}/frameworks
PYTHON=${PYTHON:-python3}
SC=$1; PORT=$2; VENV=$3; DRIVER=$4; SCRIPT=${5:-}
rm -rf "$R/raw/$SC" "$R/home/$SC" "$R/work/$SC"
mkdir -p "$R/raw/$SC" "$R/home/$SC" "$R/work/$SC" "$R/logs"
ARGS=(serve --port "$PORT" --out "$R/raw/$SC")
if [ -n "$SCRIPT" ]; then ARGS+=(--replies "$HERE/scripts/$SCRIPT"); fi
"$PYTHON" "$HERE/recorder.py" "${ARGS[@]}" > "$R/logs/rec-$SC.log" 2>&1 &
RPID=$!
for _ in $(seq 50); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
cd "$R/work/$SC"
RC=0
env HOME="$R/home/$SC" OPENAI_API_KEY=sk-corpus-dummy-key-0000000000 \
  LITELLM_LOCAL_MODEL_COST_MAP=True CREWAI_TELEMETRY_OPT_OUT=true OTEL_SDK_DISABLED=true \
  HAYSTACK_TELEMETRY_ENABLED=False ANONYMIZED_TELEMETRY=False DO_NOT_TRACK=1 \
  timeout 300 "$R/venvs/$VENV/bin/python" "$HERE/sessions/$DRIVER.py" "http://127.0.0.1:$PORT" "$SC" \
  > "$R/logs/run-$SC.log" 2>&1 || RC=$?
kill "$RPID"; wait "$RPID" 2>/dev/null || true
echo "rc=$RC"; tail -n 15 "$R/logs/run-$SC.log"; echo "-- recorder:"; cat "$R/logs/rec-$SC.log"
