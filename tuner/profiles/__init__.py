"""Profiles of an engine's steps: torch-profiler traces read into kernel families (issue 29).

``families`` names the part of a step an op or kernel belongs to, per platform;
``trace`` sums one worker's trace into those families per output token and per
step; ``explain`` sets two arms side by side and says how much of their
measured per-token difference the families account for.
"""
