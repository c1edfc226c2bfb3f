"""`route models`: the configured backends and consortia, with key status (never a key) and what
earlier runs learned of each backend's latency."""

from __future__ import annotations

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Config, Json
from router.cli.output import Output

__all__ = ["app", "models"]

app = command_app()


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


_MODEL_COLUMNS = ("name", "kind", "model", "key", "$/Mtok", "n", "ttft s", "breaker")


def _model_cells(r: dict) -> list[str]:
    lat = r["latency"]
    key = "missing" if r["key"].startswith("missing") else r["key"]
    return [r["name"], r["kind"], r["model"], key, f"{r['price_in']:g}/{r['price_out']:g}", str(lat["samples"]),
            f"{lat['ttft_p50_s']:.2f}/{lat['ttft_p95_s']:.2f}", r["breaker"]]


def _models_table(path, rows: list[dict], width: int):
    """Fits the terminal (80 columns too) without cutting a word: only the model id breaks, after a
    `/` or `-`; when it would have to, columns close up to one space to leave it more room."""
    from rich import box
    from rich.table import Table

    from router.cli.tables import break_at

    cells = [_model_cells(r) for r in rows]
    model = _MODEL_COLUMNS.index("model")
    gap, at = _model_layout(cells, model, width)
    table = Table(title=f"backends ({path})", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, collapse_padding=True, padding=(0, 1) if gap == 2 else (0, 0))
    for column in _MODEL_COLUMNS:
        table.add_column(column, justify="right" if column in ("$/Mtok", "n", "ttft s") else "left", no_wrap=True)
    for c in cells:
        table.add_row(*c[:model], break_at(c[model], at), *c[model + 1:])
    return table


def _model_layout(cells: list[list[str]], model: int, width: int) -> tuple[int, int]:
    """(spaces between columns, width to break model ids at): two spaces while the ids fit whole."""
    from router.cli.tables import fitted_width

    columns = [list(_MODEL_COLUMNS), *cells]
    others = sum(max(len(c[i]) for c in columns) for i in range(len(_MODEL_COLUMNS)) if i != model)
    gaps = len(_MODEL_COLUMNS) - 1
    ids = [c[model] for c in cells]
    gap = 2 if others + 2 * gaps + max(map(len, ids), default=0) <= width else 1
    return gap, fitted_width(ids, width - others - gap * gaps)


@app.command("models", help="List configured backends and consortia, with key status (never the key).")
@handle_errors
def models(
    json_output: Json = False,
    config: Config = None,
) -> None:
    from router.config_loader import load_config
    from router.core import Router

    out = Output(json_mode=json_output)
    loaded = load_config(config)
    rows = list(_backend_rows(loaded))
    consortia = sorted(loaded.config.consortia)
    router = Router(loaded, log=False, persist=True)  # what earlier runs learned, from the local store
    state = router.state()
    for row in rows:
        row.update(state[row["name"]])
    if json_output:
        out.data({"config": loaded.path, "backends": rows, "consortia": consortia})
        return
    out.out.print(_models_table(loaded.path, rows, out.out.size.width))
    from backends.env_names import lookalike_hint

    missing = [f"{r['name']} needs {needs}{lookalike_hint(needs.lstrip('$'))}" for r in rows
               if r["key"].startswith("missing") for needs in [r["key"].removeprefix("missing ")]]
    for line in missing:
        out.out.print(f"missing key: {line}")
    if consortia:
        out.out.print("consortia: " + ", ".join(consortia))
