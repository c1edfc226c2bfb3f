"""One line per message of saved requests (and their tool names), to pick which to keep.

    python3 show.py FILE...
"""

import json
import sys

for f in sys.argv[1:]:
    r = json.load(open(f))
    b = r["body"] or {}
    print("==", f.split("/")[-1], r["path"], "keys:", list(b.keys())[:25])
    msgs = b.get("messages") or b.get("input") or b.get("contents") or []
    if isinstance(msgs, str):
        msgs = [{"role": "input", "content": msgs}]
    for m in msgs:
        print("   ", json.dumps(m, ensure_ascii=False)[:220])
    if "tools" in b:
        print("    tools:", [(t.get("function") or t).get("name") for t in b["tools"]][:40])
