"""`route models`, `route doctor` and `route sim`: what is configured, is it reachable, a simulator."""

from __future__ import annotations

from typing import Annotated

import typer

from router.cli.output import Output

__all__ = ["register"]


def _backend_rows(loaded):
    import os

    for name, spec in loaded.config.backends.items():
        key = spec.api_key_env
        key_state = "-" if not key else ("set" if os.environ.get(key) else f"missing ${key}")
        yield {
            "name": name,
            "kind": spec.kind,
            "model": spec.model,
            "decoding": spec.decoding,
            "base_url": spec.base_url,
            "key": key_state,
            "price_in": spec.price.input,
            "price_out": spec.price.output,
        }


def _sim_profiles(path: str | None):
    """The simulator's profiles, each also able to judge as a consortium arbiter, so a consortium
    pointed at `route sim` gets well-formed (simulated) verdicts instead of parse fallbacks."""
    from dataclasses import replace

    from backends.simulator import DEFAULT_PROFILES, load_profiles
    from router.consortium.simulated import judge_when_asked

    respond = judge_when_asked()
    profiles = load_profiles(path) if path else dict(DEFAULT_PROFILES)
    return {name: replace(p, responder=p.responder or respond) for name, p in profiles.items()}


def register(app: typer.Typer) -> None:
    from router.cli.app import handle_errors

    @app.command("models", help="List configured backends and consortia, with key status (never the key).")
    @handle_errors
    def models(
        json_output: Annotated[bool, typer.Option("--json")] = False,
        config: Annotated[str | None, typer.Option("-c", "--config")] = None,
    ) -> None:
        from router.config_loader import load_config
        from router.core import Router

        out = Output(json_mode=json_output)
        loaded = load_config(config)
        rows = list(_backend_rows(loaded))
        consortia = sorted(loaded.config.consortia)
        router = Router(loaded, log=False)
        router.persist(warn=False)  # what earlier runs learned, from the local store
        state = router.state()
        for row in rows:
            row.update(state[row["name"]])
        if json_output:
            out.data({"config": loaded.path, "backends": rows, "consortia": consortia})
            return
        from rich import box
        from rich.table import Table

        # Fits 80 columns: only the model string may wrap; missing keys are named below the table.
        table = Table(title=f"backends ({loaded.path})", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  collapse_padding=True)
        table.add_column("name", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("model", overflow="fold")
        for column in ("key", "$/Mtok", "n", "ttft s", "breaker"):
            table.add_column(column, justify="left" if column in ("key", "breaker") else "right", no_wrap=True)
        for r in rows:
            lat = r["latency"]
            key = "missing" if r["key"].startswith("missing") else r["key"]
            table.add_row(r["name"], r["kind"], r["model"], key, f"{r['price_in']:g}/{r['price_out']:g}",
                          str(lat["samples"]), f"{lat['ttft_p50_s']:.2f}/{lat['ttft_p95_s']:.2f}", r["breaker"])
        out.out.print(table)
        missing = [f"{r['name']} needs {r['key'].removeprefix('missing ')}" for r in rows if r["key"].startswith("missing")]
        for line in missing:
            out.out.print(f"missing key: {line}")
        if consortia:
            out.out.print("consortia: " + ", ".join(consortia))

    @app.command("doctor", help="Check each backend: key present, server reachable. Prints no keys.")
    @handle_errors
    def doctor(
        json_output: Annotated[bool, typer.Option("--json")] = False,
        config: Annotated[str | None, typer.Option("-c", "--config")] = None,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds per check.")] = 3.0,
    ) -> None:
        from router.config_loader import load_config
        from router.doctor import check_all
        from router.paths import user_config_file

        out = Output(json_mode=json_output)
        loaded = load_config(config)
        results = check_all(loaded.config, timeout_s=timeout)
        ok = all(r.ok for r in results)
        if json_output:
            out.data({"config": loaded.path, "user_config": str(user_config_file()),
                      "checks": [r.__dict__ for r in results], "ok": ok})
        else:
            out.info(f"config: {loaded.path}   (user config: {user_config_file()})")
            for r in results:
                mark = "[green]ok[/]  " if r.ok else "[red]FAIL[/]"
                out.err.print(f"{mark} {r.name:<18} {r.detail}")
        raise typer.Exit(0 if ok else 3)

    @app.command("sim", help="Run the SIMULATED OpenAI-compatible model server (for demos and tests).")
    @handle_errors
    def sim(
        port: Annotated[int, typer.Option("--port", help="8000 is vLLM's default, which config.yaml expects.")] = 8000,
        host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
        profiles: Annotated[str | None, typer.Option("--profiles", help="YAML file of model profiles.")] = None,
    ) -> None:
        from backends.simulator import serve

        Output().info(f"[bold yellow]SIMULATED[/] model server on http://{host}:{port}/v1 — answers are fake")
        serve(host=host, port=port, profiles=_sim_profiles(profiles))
