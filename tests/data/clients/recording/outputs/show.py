"""Print the tool results a fixture carries, as the client sent them.

    python3 show.py FILE...

Also flags any scratch path left unscrubbed (the $REC_ROOT folder, scenario names).
"""

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(os.environ.get("REC_ROOT") or Path(tempfile.gettempdir()) / "route-rec")

for f in sys.argv[1:]:
    d = json.load(open(f))
    b = d["body"]
    d.setdefault("client", "raw")
    print("==", f, d["client"], d["path"])
    if "messages" in b and d["path"].endswith("/messages"):
        for m in b["messages"]:
            if isinstance(m.get("content"), list):
                for blk in m["content"]:
                    if blk.get("type") == "tool_result":
                        print("  RESULT", json.dumps({k: v for k, v in blk.items() if k not in ("tool_use_id",)})[:700])
    elif "messages" in b:
        for m in b["messages"]:
            if m.get("role") in ("tool", "function"):
                print("  RESULT", json.dumps({k: v for k, v in m.items() if k != "tool_call_id"})[:700])
    elif "input" in b:
        for i in b["input"]:
            if str(i.get("type", "")).endswith("_output"):
                print("  RESULT", json.dumps(i)[:700])
    elif "contents" in b:
        for c in b["contents"]:
            for p in c.get("parts") or ():
                if "functionResponse" in p:
                    print("  RESULT", json.dumps(p)[:900])
    # any leftover scratch path?
    t = json.dumps(d)
    for bad in (str(ROOT), str(ROOT).replace("/", "-"), "rec-outputs", "rec/outputs", "-success", "-fail", "-benign",
                "-poll", "-missing"):
        if bad in t:
            print("  LEFTOVER scratch path:", bad, t.count(bad))
