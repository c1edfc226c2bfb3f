"""`route --watch "prompt"`: the answer denoising in place, then the final text.

A diffusion backend streams DraftChunks (the current canvas's draft after every denoising step)
between committed TextChunks. The view shows committed text plainly and the draft after it in
yellow, redrawn in place on stderr by rich Live; the final answer then goes to stdout like any
other answer, and the stats line (with tokens per forward pass) to stderr. Backends without
drafts simply show their text growing. With --show-thinking the model's thinking is shown dimmed
above the answer while it arrives, and printed dimmed on stderr before the final answer. Mercury's `diffusing` stream mode (every event carries
the whole draft) arrives as DraftChunks too, so it feeds the same view.
"""

from __future__ import annotations

from typing import Any

from backends.types import Chunk, Completion, DraftChunk, FinalChunk, TextChunk, ThinkingChunk

__all__ = ["CanvasView", "watch_answer"]


class CanvasView:
    """What the terminal shows at any moment: committed text, then the live draft."""

    def __init__(self, backend: str = "", max_chars: int | None = None, show_thinking: bool = False):
        self.backend = backend
        self.max_chars = max_chars  # committed text beyond this is elided, so the draft stays on screen
        self.show_thinking = show_thinking
        self.thinking = ""
        self.committed = ""
        self.draft = ""
        self.canvas = 0
        self.step = 0
        self.drafts_seen = 0
        self.completion: Completion | None = None

    def update(self, chunk: Chunk) -> None:
        if isinstance(chunk, DraftChunk):
            self.draft, self.canvas, self.step = chunk.text, chunk.canvas, chunk.step
            self.drafts_seen += 1
        elif isinstance(chunk, TextChunk):
            self.committed += chunk.text
            self.draft = ""  # a committed canvas replaces its draft
        elif isinstance(chunk, ThinkingChunk) and self.show_thinking:
            self.thinking += chunk.text
        elif isinstance(chunk, FinalChunk):
            self.completion = chunk.completion
            self.draft = ""

    def status(self) -> str:
        if self.completion is not None:
            return "done"
        if not self.drafts_seen:
            return "waiting for the first canvas" if not self.committed else "streaming"
        return f"canvas {self.canvas + 1} · denoising step {self.step}"

    def render(self):
        from rich.console import Group
        from rich.text import Text

        shown = self.committed
        if self.max_chars is not None and len(shown) > self.max_chars:
            shown = "…" + shown[-self.max_chars:]
        body = Text(shown)
        if self.draft:
            body.append(("" if not self.committed or self.committed.endswith((" ", "\n")) else " ") + self.draft,
                        style="yellow")
        header = Text(f"{self.backend} · {self.status()}", style="dim")
        if not self.thinking:
            return Group(header, body)
        thought = self.thinking
        if self.max_chars is not None and len(thought) > self.max_chars // 2:
            thought = "…" + thought[-(self.max_chars // 2):]
        return Group(header, Text(thought, style="dim"), body)


def tokens_per_forward(completion) -> float | None:
    """The engine's own figure when it reports one (real tokens, pads excluded), else whole canvases."""
    figure = completion.metadata.get("tokens_per_forward")
    if figure is None and completion.diffusion is not None:
        figure = completion.diffusion.tokens_per_forward
    return figure


def _draft_options(router: Any, name: str) -> dict[str, Any]:
    """Ask an OpenAI-compatible diffusion server for Mercury's `diffusing` stream (every event the
    whole draft), which the openai backend turns into DraftChunks; other servers ignore the field."""
    spec = router.config.backends.get(name)
    return {"diffusing": True} if spec is not None and spec.kind == "openai" and spec.decoding == "diffusion" else {}


async def watch_answer(router: Any, out: Any, messages: list[dict[str, Any]], options: dict[str, Any],
                       show_stats, label: str = "", show_thinking: bool = False) -> Any:
    """Stream through the router, drawing the canvas in place; then print the final text and stats.
    Returns the stream's RouteResult (None if it ended without one), for the caller's warnings.

    The live area is transient: it is erased when the answer is complete (or the request is
    cancelled), so nothing like "waiting for the first canvas" is left above the answer. Other
    writers to stderr (a progress bar from a library) go through rich's redirect, above the view,
    instead of cutting into it."""
    import contextlib

    from rich.live import Live

    route_stream = router.astream(messages, **options, extra=_draft_options(router, label))
    size = out.err.size
    view = CanvasView(label or options.get("model") or "", max_chars=max(200, size.width * max(2, size.height // 2)),
                      show_thinking=show_thinking)
    with Live(view.render(), console=out.err, transient=True, auto_refresh=False,
              redirect_stdout=False, redirect_stderr=True) as live:
        async with contextlib.aclosing(route_stream.__aiter__()) as chunks:
            async for chunk in chunks:
                view.update(chunk)
                live.update(view.render(), refresh=True)
    _show_result(out, view, show_stats)
    return route_stream.result


def _show_result(out: Any, view: CanvasView, show_stats) -> None:
    """The final text on stdout; on stderr the stats, tokens per forward pass, or why no drafts came."""
    if not view.drafts_seen:
        out.info("[dim]no denoising drafts came back: this backend streams plain text (for Mercury set "
                 "`params: {diffusing: true}`; an in-process `diffusion-local` backend shows canvases)[/]")
    completion = view.completion
    thought = completion.thinking if completion is not None else view.thinking
    if view.show_thinking and thought:
        out.thinking(thought + "\n")
    out.text(completion.text if completion is not None else view.committed, end="\n")
    if completion is None:
        return
    show_stats(out, completion)
    figure = tokens_per_forward(completion)
    d = completion.diffusion
    if figure is not None and d is not None:
        steps = f", {d.denoising_steps} denoising steps" if d.denoising_steps else ""
        out.info(f"[dim]{figure:.2f} tokens per forward pass ({d.canvases} canvas"
                 f"{'es' if d.canvases != 1 else ''}{steps}; {view.drafts_seen} drafts shown)[/]")
