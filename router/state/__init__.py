"""State the router learns and shares between processes and replicas: learned latency, breaker
verdicts and rate-limit buckets. `state: backend: local` keeps it in the SQLite store of this
machine; `backend: redis` shares it through Redis, and falls back to local state while Redis is
unreachable (redis_link.py)."""
