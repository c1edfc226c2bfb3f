"""`route engine serve` and `route engine info`: the in-process DiffusionGemma engine on its own.

    route engine serve --model /models/diffusiongemma-26B-A4B-it [--host 127.0.0.1 --port 8000]
    route engine info /models/diffusiongemma-26B-A4B-it [--json]
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from router.cli.commands import command_app
from router.cli.errors import handle_errors
from router.cli.options import Json
from router.cli.output import Output

__all__ = ["app", "info", "serve"]

app = command_app("engine", help="The local DiffusionGemma engine: serve it (needs the `local` extra), inspect a "
                                 "checkpoint (needs nothing).", no_args_is_help=True)

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return str(size)  # unreachable


def _show_info(out: Output, info: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"DiffusionGemma checkpoint: {info['model']}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    params = info["parameters"]
    table.add_row("parameters", "- (no complete *.safetensors weights here)" if params is None
                  else f"{params / 1e9:.2f} B" if params >= 1e8 else f"{params:,}")
    for key in ("canvas_length", "vocab_size", "hidden_size", "layers", "attention_heads", "experts",
                "experts_per_token", "sliding_window", "max_position_embeddings"):
        table.add_row(key.replace("_", " "), str(info[key]))
    for dtype, n in info["weights_bytes"].items():
        table.add_row(f"weights in {dtype}", _size(n))
    table.add_row("weights on disk", _size(info["weights_on_disk_bytes"]))
    table.add_row("KV cache / 1k tokens", _size(info["kv_cache_bytes_per_1k_tokens"]))
    table.add_row("logits per denoising step", _size(info["canvas_logits_bytes"]))
    table.add_row("images", "yes (vision tower and image processor)" if info["images"] else "no (text only)")
    out.out.print(table)
    out.info("[dim]Need roughly weights + KV cache for the context + a few times the per-step logits. "
             "A 24 GB GPU needs a 4-bit quantization of the 26B model.[/]")
    command, *reasons = info["serve_with_vllm"]
    out.info(f"To serve it with vLLM instead: [bold]{command}[/]")
    for reason in reasons:
        out.info(f"[dim]  {reason}[/]")


@app.command("info", help="A checkpoint's config, memory estimate and vLLM serve command, from its files "
                             "alone (no weights loaded; works without torch).")
@handle_errors
def info(
    path: Annotated[str, typer.Argument(help="Checkpoint directory, or a hub id already in the local cache.")],
    json_output: Json = False,
) -> None:
    from backends.diffusion.info import describe

    out = Output(json_mode=json_output)
    facts = describe(path)
    if json_output:
        out.data(facts)
    else:
        _show_info(out, facts)


@app.command("serve", help="Serve the engine as an OpenAI-compatible HTTP server (like vLLM).")
@handle_errors
def serve(
    model: Annotated[str, typer.Option("--model", help="Checkpoint directory, or a cached hub id.")],
    host: Annotated[str, typer.Option("--host", help="Interface to listen on (no auth: keep it local).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    served_name: Annotated[str | None, typer.Option("--served-name", help="Model id in the API (default: PATH).")] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu, cuda, cuda:N or mps.")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="auto, bfloat16, float16 or float32.")] = "auto",
    timeout: Annotated[float, typer.Option("--timeout", min=0.001, help="Seconds one request may take.")] = 600.0,
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, help="Concurrent requests generated together "
                                           "(like vLLM's --max-num-seqs; its DiffusionGemma recipe uses 4).")] = 4,
) -> None:
    from backends.base import BackendSettings
    from backends.diffusion.load import read_config
    from backends.diffusion.local import DiffusionLocalBackend
    from router.engine_server import EngineServer

    out = Output()
    name = served_name or model
    # The checkpoint says how long its canvases are; there is no config here to set it in.
    canvas = read_config(model).canvas_length
    settings = BackendSettings(name=name, model=model, decoding="diffusion", timeout_s=timeout,
                               canvas_length=canvas, options={"device": device, "dtype": dtype, "max_batch": max_batch})
    backend = DiffusionLocalBackend(settings)
    out.info(f"[dim]loading {model} ...[/]")
    loaded = backend.load().loaded  # fail here, before listening, with the loader's message
    server = EngineServer(backend, host=host, port=port, served_name=name).bind()
    if host not in _LOOPBACK:
        out.info(f"[yellow]listening on {host}: this server has no authentication[/]")
    out.info(f"serving {name} ({loaded.device}, {loaded.dtype}, canvas {loaded.canvas_length}) at "
             f"{server.base_url} — point an `openai` backend's base_url there. Ctrl-C stops.")
    try:
        server.run()
    finally:
        backend.load().close()
