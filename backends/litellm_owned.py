"""The request-body fields a LiteLLM proxy keeps from its clients, as of litellm 1.110
(`litellm/proxy/auth/auth_utils.py`: `_BANNED_REQUEST_BODY_PARAMS`, checked at the root, in
`metadata`/`litellm_metadata` and in `extra_body`; `litellm_pre_call_utils.py`: the control
fields it strips from a client's body; `route_llm_request.py`: the mock-testing parameters).

A route backend of kind `openai` pointed at a LiteLLM proxy forwards a client's unknown fields,
so each of these would reach a proxy that reads it: an endpoint to send the provider key to, a
credential to sign with, a logging host to copy the conversation to, a price to bill by, a
fault to fake. They are the operator's, refused by name (backends/client_fields.py), in snake
case; families too long to list (every `*_cost_per_*` price, every logging integration's
settings) are `LITELLM_OWNED_PATTERN`.
"""

from __future__ import annotations

import re

__all__ = ["LITELLM_OWNED", "LITELLM_OWNED_PATTERN"]

LITELLM_OWNED = frozenset({
    # endpoints and transport
    "api_base", "base_url", "deployment_url", "sagemaker_base_url", "s3_endpoint_url", "aws_sts_endpoint",
    "aws_bedrock_runtime_endpoint", "aws_bedrock_control_plane_endpoint", "provider_specific_header", "ssl_verify",
    "use_ssl", "nvcf_function_id", "riva_offline", "rust", "proxy_server_request",
    # identities, workspaces and credentials
    "user_config", "user_provider_credentials", "vertex_credentials", "vertex_ai_credentials", "vertex_project",
    "vertex_location", "azure_ad_token", "azure_username", "azure_password", "azure_scope", "tenant_id",
    "client_id", "client_secret", "workspace_id", "anthropic_workspace_id", "bedrock_tags",
    "agentcore_runtime_session_id", "fireworks_forward_user_id", "allow_legacy_cloud_file_ids",
    "github_copilot_auth_type", "github_copilot_host", "github_copilot_user_session", "chatgpt_auth_file",
    "secret_fields", "litellm_credential_name", "bucket_name",
    # routing and control state the proxy keeps for itself
    "model_list", "litellm_params", "default_litellm_params", "router_settings_override", "fallbacks",
    "content_policy_fallbacks", "context_window_fallbacks", "weights", "fallback_depth", "attempted_targets",
    "routing_decision", "standard_logging_object", "user_api_key_auth_metadata", "callbacks", "service_callback",
    "logger_fn", "litellm_disabled_callbacks", "disable_global_guardrails", "disable_global_guardrail",
    "opted_out_global_guardrails", "applied_guardrails", "applied_policies", "client_side_timeout",
    "turn_off_message_logging", "tiered_pricing", "output_vector_size",
    # faults and delays a client could order instead of a call
    "mock_response", "mock_tool_calls", "mock_timeout", "mock_delay", "mock_testing_fallbacks",
    "mock_testing_context_fallbacks", "mock_testing_content_policy_fallbacks", "mock_testing_rate_limit_error",
    # logging integrations: where a conversation is copied, and with whose key
    "slack_webhook_url", "posthog_api_url", "wandb_api_key", "weave_project_id", "gcs_path_service_account",
})
# Whole families: prices (`input_cost_per_token`, `cache_read_input_token_cost_priority`, ...),
# cloud and storage settings, workload-identity settings, and every logging integration's.
LITELLM_OWNED_PATTERN = re.compile(
    r"(?:^|_)cost_per_|_token_cost(?:_|$)|_uplift_multiplier"
    r"|^(?:s3|gcs|oci|aws|token_exchange|openai_identity|openai_service_account)_"
    r"|^anthropic_(?:identity|issuer|keycloak|federation|organization|service_account|disable_workload)"
    r"|^(?:langfuse|langsmith|arize|braintrust|dd|datadog|posthog|newrelic|signoz|humanloop|lunary|lago|opik"
    r"|helicone|greenscale|logfire|galileo|openmeter|literalai|athina|phoenix|mlflow|generic_api)_")
