#!/bin/sh
# Gemini CLI on `route serve`: every request it makes goes through the router's Gemini endpoint
# (/v1beta/models/MODEL:streamGenerateContent), routed by prompt like any other (`gemini-*` ->
# auto ships in config.yaml's `aliases:`; map a name to a backend or consortium to pin it).
#
#   route serve                      # in another terminal (`route sim` for a simulated backend)
#   sh examples/gemini_cli.sh -p "Explain what this repository does"
#
# GEMINI_API_KEY is sent as `x-goog-api-key`; with `route serve --api-key-env NAME` set it to that
# token. Without one, loopback needs none, but Gemini CLI wants a value. Name a model (`-m`):
# without one Gemini CLI first asks a small model to pick one, a request route answers too.
export GOOGLE_GEMINI_BASE_URL="${ROUTE_URL:-http://127.0.0.1:4000}"
export GEMINI_API_KEY="${ROUTE_API_KEY:-not-needed-on-loopback}"
# The key above, not a Google sign-in: settings name the auth type, so no browser opens.
mkdir -p "$HOME/.gemini"
[ -f "$HOME/.gemini/settings.json" ] || echo '{"security": {"auth": {"selectedType": "gemini-api-key"}}}' > "$HOME/.gemini/settings.json"
exec npx -y @google/gemini-cli -m "${ROUTE_MODEL:-gemini-2.5-pro}" "$@"
