"""Secrets out of exported environments (the policy itself is :mod:`tuner.policy.env_vars`).

Kept so the exporters import one name; the allowlist of variables a config may carry lives
with the rest of the policy, where a config becomes an engine.
"""

from __future__ import annotations

from tuner.policy.env_vars import is_secret, split_secrets

__all__ = ["is_secret", "split_secrets"]
