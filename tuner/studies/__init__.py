"""Studies: many trials that answer one question — A/B, sweep, search — and the winner.

``stats`` compares arms with their noise, ``ab`` runs an interleaved A/B,
``sweep`` varies one knob (or descends over several), ``search`` drives
Optuna over a declared ``space`` with SLO constraints, ``winner`` names the
best point with its margin. Submodules are imported on use, so importing this
package costs nothing (Optuna is loaded only by ``search``).
"""
