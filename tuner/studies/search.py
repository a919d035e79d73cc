"""Search: Optuna over a declared space, with SLO constraints, resumable and shareable.

The Optuna storage is where a study lives (:mod:`tuner.studies.optuna_store`
opens it). By default it is
``sqlite:///<data_dir>/optuna.db``; any SQLAlchemy URL works, and a
``postgresql://`` URL lets several GPU nodes work on one study at once — each
``tunelab tune`` process asks the shared storage for the next point, runs
it, and tells the result back (Optuna's ask/tell; the RDB storage makes the
trial numbering atomic, so no point is handed out twice). ``load_if_exists``
makes re-running the same command resume the study.

Each Optuna trial maps to exactly one tunelab trial (user attr
``tunelab_trial_id``; the tunelab trial's tags hold the Optuna number), and
records its owner (host, pid, process start time) and a heartbeat, so that a
resumed or parallel worker can tell a point that is still being measured
from one whose worker was killed: the latter is told FAIL with
``interrupted`` set, and never counted.

Rule-invalid points are told ``PRUNED``, not ``FAIL``: Optuna's samplers
ignore failed trials entirely (TPE would keep proposing the same invalid
region), while pruned trials count as bad outcomes, steering the search away
— which is what "the rules reject this" means. No engine is started for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tuner.redact import redact_url
from tuner.studies.common import meets, value_of
from tuner.studies.optuna_labels import label_study
from tuner.studies.optuna_store import OPTUNA_DB as OPTUNA_DB  # re-exported
from tuner.studies.optuna_store import (
    SearchError,
    default_storage,
    open_storage,
)
from tuner.studies.optuna_store import sqlalchemy_url as sqlalchemy_url  # re-exported
from tuner.studies.pruning import is_pruned, make_optuna_pruner, prunable
from tuner.studies.search_points import SearchPoints, measure_one
from tuner.studies.search_points import suggest as suggest  # re-exported
from tuner.studies.search_points import tell_outcome as tell_outcome  # re-exported
from tuner.studies.search_propose import PROPOSE_TAG, proposer
from tuner.studies.search_skip import (
    SKIP_TAG,
    is_model_skip,
    skipper,
)
from tuner.studies.search_workers import owner_alive, worker_owner
from tuner.studies.space import WORKLOAD_KEYS, Constraint, Space
from tuner.studies.stats import Direction, metric_direction
from tuner.trials.model import Trial, TrialStatus

if TYPE_CHECKING:
    import optuna
    from optuna.trial import TrialState

    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.executor import TrialRunner

ObjectiveMode = Literal["throughput", "latency", "pareto"]

THROUGHPUT_METRIC = "output_throughput"
LATENCY_METRIC = "p99_e2el_ms"


def objectives_for(mode: ObjectiveMode, latency_metric: str = LATENCY_METRIC) -> list[str]:
    """The result keys a mode optimises, in Optuna's value order."""
    if mode == "throughput":
        return [THROUGHPUT_METRIC]
    if mode == "latency":
        return [latency_metric]
    if mode == "pareto":
        return [THROUGHPUT_METRIC, latency_metric]
    raise SearchError(f"objective must be throughput, latency or pareto, got {mode!r}")


def load_study(
    name: str,
    storage: str,
    objectives: list[str],
    *,
    seed: int | None = None,
    create: bool = True,
    pruner: optuna.pruners.BasePruner | None = None,
) -> optuna.Study:
    """Create or resume (``load_if_exists``) the Optuna study ``name`` in ``storage``.

    ``pruner`` judges ``Trial.should_prune`` (None: Optuna's default, never
    asked here); tunelab passes :func:`tuner.studies.pruning.make_optuna_pruner`.

    Raises:
        SearchError: The stored study optimises other objectives, or does not exist
            when ``create`` is False.
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = open_storage(storage)
    directions: list[Literal["minimize", "maximize"]] = [
        "maximize" if metric_direction(m) is Direction.HIGHER else "minimize" for m in objectives
    ]
    # Constraints reach the sampler through Trial.set_constraint (Optuna 5).
    # constant_liar: points still being measured (several GPU slots at once) count as
    # bad guesses for the next suggestion, so parallel asks do not pile onto one point
    # (Optuna's TPESampler docs, "constant_liar").
    sampler = optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=5, multivariate=True, constant_liar=True
    )
    if not create:
        try:
            return optuna.load_study(study_name=name, storage=store, sampler=sampler, pruner=pruner)
        except KeyError:
            names = [s.study_name for s in optuna.get_all_study_summaries(store)]
            raise SearchError(
                f"no study {name!r} in {redact_url(storage)}; studies there: {', '.join(names) or 'none'}"
            ) from None
    study = optuna.create_study(
        study_name=name,
        storage=store,
        directions=directions,
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    stored = study.user_attrs.get("tunelab_objectives")
    if stored is None:
        study.set_user_attr("tunelab_objectives", objectives)
    elif list(stored) != objectives:
        raise SearchError(
            f"study {name!r} optimises {', '.join(stored)}, not {', '.join(objectives)}; "
            "use the same --objective to resume it, or another --study name"
        )
    return study


def check_same_setup(
    study: optuna.Study, base: EngineConfig, workload: Workload, space: Space
) -> None:
    """Refuse to resume (or join) a study with another model, workload, space or SLO.

    Values measured under another workload are not comparable, and Optuna
    would silently rank them together; the first worker records the setup in
    the study, every later one must match it.

    Raises:
        SearchError: Naming what differs and how to proceed.
    """
    setup = {
        "model": base.model,
        "base_config": base.config_id,
        "workload": workload.to_dict(),
        "space": space.to_dict(),
    }
    stored = study.user_attrs.get("tunelab_setup")
    if stored is None:
        plain = json.loads(json.dumps(setup, default=str))
        study.set_user_attr("tunelab_setup", plain)
        label_study(study, list(study.user_attrs.get("tunelab_objectives") or []), plain)
        return
    mine = json.loads(json.dumps(setup, default=str))
    differs = [k for k in mine if stored.get(k) != mine[k]]
    if differs:
        raise SearchError(
            f"study {study.study_name!r} was started with another {', '.join(differs)}; "
            "resume it with the same options (see `tunelab results --study NAME --json`) "
            "or start a new --study"
        )


def recover_study(
    study: optuna.Study, store: Any = None, constraints: Iterable[Constraint] = ()
) -> list[int]:
    """Tell FAIL (marked ``interrupted``) for running trials whose worker is gone.

    A worker on this host is gone when its process is (pid + start time); a
    worker elsewhere when its heartbeat is older than the grace period. The
    linked tunelab trial is recovered in the tunelab store too. A trial whose
    tunelab result was committed before the kill (e.g. killed during engine
    shutdown) is told with that result instead: no measurement is dropped.

    Returns:
        The Optuna trial numbers that were marked.
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    import optuna

    # Deferred: heavy (optuna): loaded only on the path that needs it.
    from optuna.trial import TrialState

    if store is not None:
        with contextlib.suppress(Exception):
            store.recover()
    storage = study._storage
    marked: list[int] = []
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if owner_alive(frozen) is not False:
            continue
        if _tell_committed(study, frozen, store, constraints):
            continue  # measured before the kill: a result, not an interruption
        with contextlib.suppress(Exception):
            storage.set_trial_user_attr(frozen._trial_id, "interrupted", True)
            study.tell(frozen.number, state=TrialState.FAIL)
            marked.append(frozen.number)
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
    optuna.storages.fail_stale_trials(study)
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        if frozen.number not in before and frozen.number not in marked:
            with contextlib.suppress(Exception):
                storage.set_trial_user_attr(frozen._trial_id, "interrupted", True)
            marked.append(frozen.number)
    return sorted(marked)


def _tell_committed(
    study: optuna.Study, frozen: Any, store: Any, constraints: Iterable[Constraint]
) -> bool:
    """Tells the stored outcome of a dead worker's trial if its tunelab trial finished."""
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    import optuna

    trial_id = frozen.user_attrs.get("tunelab_trial_id")
    if store is None or not trial_id:
        return False
    try:
        done = store.get(trial_id)
    except Exception:
        return False
    settled = (TrialStatus.DONE, TrialStatus.FAILED, TrialStatus.SKIPPED)
    if done.status not in settled and not is_pruned(done):
        return False
    objectives = list(study.user_attrs.get("tunelab_objectives") or [done.objective])
    live = optuna.trial.Trial(study, frozen._trial_id)
    with contextlib.suppress(Exception):
        tell_outcome(study, live, done, objectives, constraints)
        return True
    return False


@dataclass
class SearchReport:
    """What this invocation of the search did, and where the study stands."""

    study: str
    storage: str
    objectives: list[str]
    constraints: list[str]
    measured: int = 0
    pruned: int = 0
    failed: int = 0
    recovered: list[int] = field(default_factory=list)
    best: list[dict[str, Any]] = field(default_factory=list)
    trials: list[str] = field(default_factory=list)
    stopped_early: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    proposed: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def best_trials(study: optuna.Study) -> list[dict[str, Any]]:
    """Best feasible trial (single objective) or the feasible Pareto front, as dicts."""
    try:
        best = study.best_trials
    except ValueError:
        return []
    out = []
    for frozen in best:
        violations = frozen.user_attrs.get("constraints") or []
        if any(v > 0 for v in violations):
            continue
        out.append(
            {
                "number": frozen.number,
                "values": list(frozen.values or []),
                "params": dict(frozen.params),
                "tunelab_trial_id": frozen.user_attrs.get("tunelab_trial_id"),
            }
        )
    return out


async def run_search(
    base: EngineConfig,
    workload: Workload,
    space: Space,
    runner: TrialRunner,
    *,
    n_trials: int,
    study: str = "tune",
    storage: str | None = None,
    mode: ObjectiveMode = "throughput",
    latency_metric: str = LATENCY_METRIC,
    seed: int | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    prune: bool = True,
    skip: bool = True,
    propose: bool | None = None,
) -> SearchReport:
    """Run ``n_trials`` measured points of the study (resuming it if it exists).

    Rule-invalid points do not count towards ``n_trials`` (they cost no
    engine start); to stop a space where nearly everything is invalid from
    looping, at most ``3 * n_trials + 10`` points are asked. With ``prune``
    (throughput mode only) each point reports its interim rate to Optuna
    (``Trial.report``) and is stopped when ``Trial.should_prune`` finds it
    clearly dominated (:mod:`tuner.studies.pruning`); such a point counts
    towards ``n_trials`` (it cost an engine start) as ``stopped_early``. With ``skip`` and
    SLO constraints, a point the study model is sure misses them is not launched
    (:mod:`tuner.studies.search_skip`): stored as skipped, told as the model's miss, not
    counted, listed in the report's ``skipped``; and the point the model predicts beats every
    measured one under the SLO is launched next (:mod:`tuner.studies.search_propose`), listed
    in ``proposed`` (``propose``: as ``skip`` unless given). ``skip=False`` is a search
    without the study model.

    Raises:
        SearchError: No parameters, n_trials < 1, or an unusable storage/study.
    """
    if not space.params:
        raise SearchError("the search space is empty; give --param KEY=V1,V2 or --space FILE")
    if n_trials < 1:
        raise SearchError(f"--trials must be >= 1, got {n_trials}")
    url = storage or default_storage()
    objectives = objectives_for(mode, latency_metric)
    pruner = None
    if prune and mode == "throughput" and prunable(objectives[0]):
        # With an SLO a running peer may still miss it: only finished, SLO-meeting peers count.
        pruner = make_optuna_pruner(peers_running=not space.constraints)
    opt = load_study(study, url, objectives, seed=seed, pruner=pruner)
    base = base.with_values({k: v for k, v in space.fixed.items() if k not in WORKLOAD_KEYS})
    check_same_setup(opt, base, workload, space)
    recovered = recover_study(opt, runner.store, space.constraints)
    owner = worker_owner()
    report = SearchReport(
        study=study,
        storage=redact_url(url),  # shown and stored: never the password
        objectives=objectives,
        constraints=[str(c) for c in space.constraints],
        recovered=recovered,
    )
    budget = _Budget(n_trials)
    progress = runner.begin(study, "tune", n_trials)
    sure_miss = skipper(runner.store, study, space.constraints, objectives) if skip else None
    point = SearchPoints(opt, base, workload, space, study, url, owner, objectives)
    if (skip if propose is None else propose) and len(objectives) == 1:
        point.propose = proposer(runner.store, study, space, point.trial_of, objectives[0])

    async def worker() -> None:
        while budget.take():
            done = await measure_one(point, runner, pruner, sure_miss)
            trial, outcome = done
            budget.finished(_count(report, trial, outcome, progress, space.constraints))
            if on_trial is not None:
                on_trial(trial)

    # As many points in flight as the GPU slots hold (one without GPUs).
    width = max(1, min(runner.slot_count(), n_trials))
    await asyncio.gather(*(worker() for _ in range(width)))
    report.best = best_trials(opt)
    return report


def _count(
    report: SearchReport, trial: Trial, outcome: TrialState, progress: Any,
    constraints: list[Constraint],
) -> bool:  # fmt: skip
    """Add a finished point to the report; True when it counts towards ``n_trials``."""
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    from optuna.trial import TrialState

    report.trials.append(trial.id)
    if isinstance(trial.tags.get(PROPOSE_TAG), dict):
        proposal = trial.tags[PROPOSE_TAG]
        measured = value_of(trial, proposal.get("objective") or report.objectives[0])
        report.proposed.append(
            {**proposal, "measured": measured, "met_slo": meets(trial, constraints)}
        )
    if is_model_skip(trial):  # sure to miss the SLO: no launch, not counted
        report.skipped.append({"values": trial.tags.get("values"), **trial.tags[SKIP_TAG]})
        progress.extend(1)
        return False
    if is_pruned(trial):  # stopped early as dominated: it cost an engine start
        report.stopped_early += 1
        return True
    if outcome is TrialState.PRUNED:
        report.pruned += 1
        progress.extend(1)  # a rule-invalid point: no launch, not counted
        return False
    if outcome is TrialState.COMPLETE:
        report.measured += 1
    else:
        report.failed += 1
    return True


@dataclass
class _Budget:
    """How many points the parallel workers may still start (shared, one event loop).

    Rule-invalid points (pruned) do not count towards ``n_trials``; at most
    ``3 * n_trials + 10`` points are asked in all.
    """

    n_trials: int
    counted: int = 0
    in_flight: int = 0
    asked: int = 0

    def take(self) -> bool:
        if self.counted + self.in_flight >= self.n_trials or self.asked >= 3 * self.n_trials + 10:
            return False
        self.asked += 1
        self.in_flight += 1
        return True

    def finished(self, counts: bool) -> None:
        self.in_flight -= 1
        self.counted += int(counts)
