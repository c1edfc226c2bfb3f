#!/bin/sh
# Claude Code on `route serve`: every request it makes goes through the router's Anthropic
# Messages endpoint (/v1/messages), routed by prompt like any other (`claude-*` -> auto ships in
# config.yaml's `aliases:`; map a name to a backend or consortium to pin it).
#
#   route serve                      # in another terminal (`route sim` for a simulated backend)
#   sh examples/claude_code.sh -p "Explain what this repository does"
#
# ANTHROPIC_AUTH_TOKEN is sent as `Authorization: Bearer`; with `route serve --api-key-env NAME`
# set it to that token. Without one, loopback needs none, but Claude Code wants a value.
export ANTHROPIC_BASE_URL="${ROUTE_URL:-http://127.0.0.1:4000}"
export ANTHROPIC_AUTH_TOKEN="${ROUTE_API_KEY:-not-needed-on-loopback}"
# No telemetry, error reports or update checks: they would leave this machine.
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
exec npx -y @anthropic-ai/claude-code "$@"
