"""What the requests list opens with: the latest requests from the request log.

The view records requests one by one only while a page is open (live.py), so a page opened
after traffic would show none of it. The request log holds it all -- every process's, and in a
fleet every replica's when the log is PostgreSQL -- so the page's first poll (and one after a
reset) also gets the latest logged requests from before this process began recording for it,
as rows of the same shape as live ones; live requests follow from there. Reading the log costs
one query per page opened, never anything per request.

A logged row has no number in this process's memory (`seq` 0); its `log_id` names it, and the
detail finds it in the log by its start, duration and backend like any request another process
answered. Blocking (it reads the log): run it off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.ports import RouterService

__all__ = ["logged_rows"]

_FLUSH_S = 2.0
_SCAN = 1000  # log rows read at most to find a non-admin key's own


def logged_rows(router: RouterService, before_ts: float | None, limit: int,
                sees: Callable[[str | None], bool]) -> list[dict[str, Any]]:
    """Up to `limit` of the newest logged requests that began before `before_ts` (None: any)
    and whose key `sees` sees, newest first, as the requests list's rows; [] without a log."""
    log = router.view.request_log
    if log is None or limit <= 0:
        return []
    from router.store import StoreError
    from router.store.choice import open_log

    log.flush(_FLUSH_S)  # this process's latest are written within the flush interval
    try:
        reader = open_log(router.view.loaded, check=False)
    except StoreError:
        return []
    try:
        rows = reader.recent(_SCAN)
    except StoreError:
        return []
    finally:
        reader.close()
    out = []
    for row in rows:
        if (before_ts is None or row["ts"] < before_ts) and sees(row.get("key_name")):
            out.append(_row(router, row))
            if len(out) >= limit:
                break
    return out


def _rounded(value: Any) -> float | None:
    return None if value is None else round(float(value), 4)


def _error(row: dict[str, Any], text: Callable[[str], str]) -> str | None:
    """The logged failure as `Type: message`, passed through the redactor."""
    return text(f"{row.get('error_type') or 'error'}: {row.get('error')}") if row.get("error") else None


def _row(router: RouterService, row: dict[str, Any]) -> dict[str, Any]:
    """A logged request as render.request_row shapes a live one (what the log keeps of it)."""
    text = router.view.redactor.text
    reason = (row.get("decision") or {}).get("reason")
    requested = row.get("requested") or "auto"
    return {
        "seq": 0, "log_id": row.get("id"), "ts": row["ts"], "protocol": row.get("source") or "-",
        "key": row.get("key_name"), "requested": requested, "backend": row.get("backend"), "model": row.get("model"),
        "tier": row.get("tier"), "forced": requested != "auto", "status": row["status"],
        "score": _rounded(row.get("score")), "ttft_s": _rounded(row.get("ttft_s")),
        "elapsed_s": row.get("total_s"), "total_s": row.get("total_s"),
        "tokens": {"input": row.get("input_tokens") or 0, "output": row.get("output_tokens") or 0},
        "cost_usd": row.get("cost_usd") or 0.0, "hosted_cost_usd": None,
        "reasons": [text(str(reason))] if reason else [], "error": _error(row, text),
        "degraded": [], "consortium": False, "trace_id": row.get("trace_id"), "simulated": bool(row.get("simulated")),
        "logged": True,
    }  # fmt: skip
