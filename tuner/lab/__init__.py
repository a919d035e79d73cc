"""The application layer: every decision the faces (CLI and TUI) show, made once.

The CLI (``tuner.cli``) and the TUI (``tui``) call these functions and render
what they return; neither holds tuning logic of its own. Each module owns one
kind of decision:

- :mod:`tuner.lab.values`: how typed text becomes a value (booleans, rates, knob values);
- :mod:`tuner.lab.workload`: the workload options, declared once (CLI flags and TUI fields
  are both derived from :data:`tuner.lab.workload.FIELDS`);
- :mod:`tuner.lab.config`: an engine config from a preset, a model and ``KEY=VALUE`` items;
- :mod:`tuner.lab.target`: the rules' target once introspection and telemetry answered;
- :mod:`tuner.lab.study`: study queries: its trials, the baseline (kept in the store),
  the A/B verdict (:func:`tuner.studies.ab.build_report`, nothing else), the pick to
  compare, the winner to export;
- :mod:`tuner.lab.fit`: the fit summary the Model panel shows (the memory rule's estimate).
"""
