"""`route learn status | history | adopt | rollback | resume`: what routing learned from its own traffic.

Data goes to stdout (a table, or one JSON document with `--json`), messages to stderr. The
figures come from router/learning/status.py, which reads the store the config points at.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Json
from router.cli.output import Output

__all__ = ["adopt", "app", "history", "resume", "rollback", "status"]

app = command_app("learn", help="What routing learned from its own traffic: status, history, rollback.",
                  no_args_is_help=True)


def _config(path: str | None) -> Any:
    from router.config_loader import load_config

    return load_config(path).config


def _figure(found: dict[str, float] | None) -> str:
    return "-" if not found else f"{found['value']:.3f} ± {found['se']:.3f}"


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _show_status(out: Output, found: dict[str, Any]) -> None:
    spend = found["spend"]
    state = "off (no routing.learn in the config)" if not found["enabled"] else (
        f"shadow rate {found['shadow_rate']:g}, judge {found['judge'] or '-'}, auto {'on' if found['auto'] else 'off'}")
    out.out.print(f"learning: {state}")
    pinned = " (pinned by a rollback: `route learn resume` lets refits adopt again)" if found["pinned"] else ""
    configured = " (the configured weights)" if not found["version"] else ""
    out.out.print(f"version in use: {found['version']}{configured}{pinned}")
    by_source = ", ".join(f"{s} {n}" for s, n in found["labels"]["by_source"].items())
    out.out.print(f"labels a refit reads: {found['labels']['total']} ({by_source}; {found['labels']['stored']} stored)")
    for b in found["boundaries"]:
        adopted = b["adopted_with"]
        at = "" if not adopted else (f"; adopted at {_figure(adopted['apgr_before'])} -> "
                                     f"{_figure(adopted['apgr_after'])} (cross-validated)")
        out.out.print(f"  {b['boundary']}: version {b['version']}, {sum(b['labels'].values())} labels; estimated "
                      f"APGR {_figure(b['apgr'])} on the {b['judged_on']} labels it was not fitted on{at}")
        _show_refit(out, b["last_refit"])
    out.out.print(f"shadow spend {spend['day']} (UTC): ${spend['today_usd']:.4f} of ${spend['budget_usd_per_day']:g} "
                  f"({spend['today_calls']} calls); all days ${spend['total_usd']:.4f} ({spend['total_calls']} calls)")


def _refit_outcome(refit: dict[str, Any]) -> str:
    outcome = refit["outcome"] + (f" as version {refit['version']}" if refit.get("version") else "")
    if refit["outcome"] == "waiting":
        outcome += " (`route learn adopt` adopts it)"
    return outcome


def _show_moved(out: Output, moved: dict[str, Any]) -> None:
    """The example prompts of each move, then the moves per client key."""
    for move, prompts in (moved.get("examples") or {}).items():
        out.out.print(f"        {move}: " + " | ".join(prompts))
    if moved.get("keys"):
        out.out.print("      moved, by client key: " + ", ".join(f"{k} {n}" for k, n in moved["keys"].items()))


def _show_refit(out: Output, refit: dict[str, Any] | None) -> None:
    if refit is None:
        out.out.print("    last refit: none yet")
        return
    out.out.print(f"    last refit {_when(refit['ts'])}: {_refit_outcome(refit)}, on {refit.get('labels_used') or 0} "
                  f"usable labels; order gain {_figure(refit.get('gain'))}, placement gain "
                  f"{_figure(refit.get('placement'))}")
    out.out.print(f"      why: {refit.get('reason') or '-'}")
    out.out.print(f"      traffic moved: {refit['moves']}")
    _show_moved(out, refit.get("moved") or {})


def _show_history(out: Output, found: dict[str, Any]) -> None:
    if not found["versions"]:
        out.out.print("no learned version yet: routing uses the configured weights (version 0)")
        return
    for v in found["versions"]:
        mark = " *" if v["version"] == found["version"] else ""
        out.out.print(f"v{v['version']}{mark}  {_when(v['ts'])}  boundary {v['boundary']}  {v.get('labels', '-')} labels  "
                      f"APGR {_figure(v.get('apgr_before'))} -> {_figure(v.get('apgr_after'))}  "
                      f"gain {_figure(v.get('gain'))}")
    out.out.print(f"* in use{' (pinned by a rollback)' if found['pinned'] else ''}; version 0 is the configured weights")


@app.command("status", help="Labels by source, the version in use with its estimated APGR, the spend.")
@handle_errors
def status(json_output: Json = False, config: Config = None) -> None:
    from router.learning import learn_status

    found = learn_status(_config(config))
    out = Output(json_mode=json_output)
    out.data(found) if json_output else _show_status(out, found)


@app.command("history", help="Every adopted version, with the figures it was adopted on.")
@handle_errors
def history(json_output: Json = False, config: Config = None) -> None:
    from router.learning.status import history as read

    found = read(_config(config))
    out = Output(json_mode=json_output)
    out.data(found) if json_output else _show_history(out, found)


@app.command("rollback", help="Go back to VERSION (default: the one before; 0: the configured weights) "
               "and pin it until `route learn resume`.")
@handle_errors
def rollback(
    version: Annotated[int | None, typer.Argument(help="a version `route learn history` lists")] = None,
    quarantine: Annotated[list[str] | None, typer.Option(
        "--quarantine", metavar="KEY", help="a client key (its name in server.keys) whose labels no refit reads "
        "again, those stored and those to come; repeat for several")] = None,
    json_output: Json = False,
    config: Config = None,
) -> None:
    from router.learning.status import rollback as go_back

    found = go_back(_config(config), version, quarantine=quarantine or ())
    out = Output(json_mode=json_output)
    if json_output:
        out.data(found)
        return
    out.info(f"now using version {found['version']} (was {found['previous']}); pinned: refits adopt "
             "nothing until `route learn resume`. Running routers of this machine use it from their next request "
             "(a Redis fleet's within routing.learn.refresh_ms).")
    if found["quarantined"]:
        out.info(f"quarantined: {', '.join(found['quarantined'])}; their labels are never read again "
                 "(`route learn resume` does not relearn them)")


@app.command("adopt", help="Adopt the version a refit left waiting: one that would move more traffic than "
             "routing.learn.max_moved, fitted on labels beyond the operator's own verdicts.")
@handle_errors
def adopt(
    boundary: Annotated[int | None, typer.Option("--boundary", help="the boundary (0: between the first two tiers); "
                                                 "needed only when several wait")] = None,
    json_output: Json = False,
    config: Config = None,
) -> None:
    from router.learning.moves import describe
    from router.learning.status import adopt as take

    found = take(_config(config), boundary)
    out = Output(json_mode=json_output)
    if json_output:
        out.data(found)
        return
    out.info(f"now using version {found['version']} (was {found['previous']}) for boundary {found['boundary']}: "
             f"{describe(found['moved'])}. Running routers use it from their next request.")


@app.command("resume", help="Let refits adopt new versions again after a rollback.")
@handle_errors
def resume(json_output: Json = False, config: Config = None) -> None:
    from router.learning.status import resume as go_on

    found = go_on(_config(config))
    out = Output(json_mode=json_output)
    out.data(found) if json_output else out.info(f"version {found['version']} in use; refits may adopt again")
