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
- :mod:`tuner.lab.fit`: the fit summary the Model panel shows (the memory rule's estimate);
- :mod:`tuner.lab.plans`: every study as a typed, checked plan (A/B, sweep, search,
  capacity, ablation, verify), built by either face; :mod:`tuner.lab.plan_input` reads
  the text the faces type for one (knobs to sweep, SLO bounds, a search space);
- :mod:`tuner.lab.execute`: the one way any face runs a plan, and where its design is
  stored beside the study's trials (``tunelab results --study`` shows it);
- :mod:`tuner.lab.node`: the node's telemetry and GPU list, for every face's runner;
- :mod:`tuner.lab.checks`: the rules' findings on a config, for the TUI and ``check``;
- :mod:`tuner.lab.bench`: ``tunelab bench``'s measurement of a running server;
- :mod:`tuner.lab.reports`: the report types the lab returns, as the faces read them.

The faces import no study runner, trial runner, slot scheduler or rule directly: an
import-linter contract in pyproject.toml holds them to this package.
"""
