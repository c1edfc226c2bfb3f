"""What a backend can do, declared once per kind and read by the router (no kind checks elsewhere)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """`tools`: OpenAI tool calls; `seed`: honours a sampling seed (N samples of one model differ);
    `vision`: image content parts; `drafts`: streams intermediate diffusion drafts;
    `composite`: calls other backends itself through the router's call path (a consortium), so the
    call path neither retries it nor charges budgets or concurrency for it; `structured_output`:
    an answer follows the request's `response_format` (a synthesizing consortium's cannot)."""

    tools: bool = False
    seed: bool = False
    vision: bool = False
    drafts: bool = False
    composite: bool = False
    structured_output: bool = True

    def as_dict(self) -> dict[str, bool]:
        return {"tools": self.tools, "seed": self.seed, "vision": self.vision, "drafts": self.drafts}
