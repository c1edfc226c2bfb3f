#!/bin/sh
# Serve DiffusionGemma with vLLM, the way the shipped `diffusiongemma` backend expects it
# (port 8000, model id exactly `google/diffusiongemma-26B-A4B-it`; vLLM answers any other name 404).
#
#   sh examples/vllm_diffusiongemma.sh                      # from the hub
#   sh examples/vllm_diffusiongemma.sh /models/diffusiongemma   # a downloaded directory
#
# The flags are vLLM's recipe for this model:
#   --max-num-seqs 4               diffusion state buffers are seqs x canvas length x the 262k
#                                  vocabulary; more sequences run out of memory
#   --generation-config vllm       the checkpoint's generation_config.json sets max_tokens: 256,
#                                  which otherwise overrides every request's own limit
#   --gpu-memory-utilization 0.8   room for those buffers outside vLLM's KV-cache pool
# Then check it with `route doctor`.
set -eu
MODEL="${1:-google/diffusiongemma-26B-A4B-it}"
exec vllm serve "$MODEL" --served-model-name google/diffusiongemma-26B-A4B-it \
    --max-num-seqs 4 --generation-config vllm --gpu-memory-utilization 0.8 --port 8000
