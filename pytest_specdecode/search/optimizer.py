"""The search over a finite grid of configs: Optuna's TPE sampler, ask/tell.

Each grid point is a mapping of the keys the space varies to their values.
An ordered key (numbers only) becomes an integer parameter over the index of
its value (so 2, 4, 6, 8, 12, 16 are neighbours in that order, whatever the
gaps); any other key is categorical. The sampler proposes a point; a point
already visited, pending, or outside the grid is told as failed and replaced
by the nearest unvisited grid point, enqueued so that the trial Optuna records
is the point that actually runs: a grid point is never started twice.

Infeasible configs (a failed gate) are told with a violated constraint, so
TPE ranks them below every feasible one (Optuna's ``constraints_func``).

Stopping: the budget of restarts is spent, the grid is exhausted, or no
unvisited point can plausibly beat the best: every unvisited point's
optimistic bound (:meth:`GridSearch.optimistic`) lies below the best's lower
95% bound. With a budget of seconds instead (``budget_seconds``), each visit
is charged what it took (its restart plus its measurement, told with it): the
search stops when the next config, expected to cost as much as the costliest
one so far, would overrun what is left once the pending ones are charged the
same.

Multi-fidelity: a pending point reports its objective after each round of
measurement (:meth:`GridSearch.report`) and Optuna's successive-halving
pruner says whether it is clearly worse than the points measured that far
(not in the better half of them): it stops there, told as pruned, its cost
only the rounds it ran; it never counts as the best.

Warm state: points that share one (``groups``: the same weights, differing
only in runtime parameters) start one after another where the search has the
choice (the initial design, a batch, the nearest free point to a proposal).
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

CONSTRAINT = "constraint"


@dataclass(frozen=True)
class Measured:
    """What one visited config scored: the objective (higher is better) and its interval."""

    objective: float | None
    low: float | None = None
    high: float | None = None
    feasible: bool = True
    reasons: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return self.feasible and self.objective is not None


@dataclass
class Visit:
    index: int
    measured: Measured
    carried: bool = False  # from a resumed report: not started by this run
    seconds: float | None = None  # what it took: restart plus measurement (None: unknown)
    pruned: bool = False  # stopped after a round: clearly worse (successive halving)


@dataclass
class GridSearch:
    """Ask/tell over ``points`` with at most ``restarts`` visits (carried ones count) and,
    given ``budget_seconds``, at most that many seconds of them (carried ones count)."""

    points: Sequence[Mapping[str, Hashable]]
    restarts: int
    seed: int | None = None
    startup: int | None = None
    visits: list[Visit] = field(default_factory=list)
    budget_seconds: float | None = None
    groups: Sequence[Hashable] | None = None  # each point's warm state (None: all apart)

    def __post_init__(self) -> None:
        keys = list(dict.fromkeys(k for p in self.points for k in p))
        self.keys = keys
        self.levels: dict[str, list[Hashable]] = {}
        self.ordered: dict[str, bool] = {}
        for key in keys:
            values = list(dict.fromkeys(p.get(key) for p in self.points))
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            self.ordered[key] = numeric and len(values) > 1
            self.levels[key] = sorted(values, key=_sort_key) if numeric else values
        self.coords = [self._coords(p) for p in self.points]
        self._by_coords = {c: i for i, c in reversed(list(enumerate(self.coords)))}
        self.distributions: dict[str, BaseDistribution] = {
            key: IntDistribution(0, len(self.levels[key]) - 1)
            if self.ordered[key]
            else CategoricalDistribution(list(range(len(self.levels[key]))))
            for key in keys
        }
        self.pending: dict[int, optuna.trial.Trial] = {}
        startup = self.startup if self.startup is not None else default_startup(self.restarts)
        self.startup_trials = startup
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # Optuna 5 reads the constraint a trial was given (Trial.set_constraint) and
        # deprecates constraints_func; older releases need the function.
        legacy = not hasattr(optuna.trial.Trial, "set_constraint")
        with warnings.catch_warnings():
            # multivariate TPE is marked experimental in Optuna 3-5.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                seed=self.seed,
                n_startup_trials=startup,
                multivariate=True,
                constraints_func=_constraints if legacy else None,
            )
        # Rung r is reached after 1 * 2**r rounds; a point outside the better half of the
        # points that reached its rung stops there.
        pruner = optuna.pruners.SuccessiveHalvingPruner(
            min_resource=1, reduction_factor=2, min_early_stopping_rate=0
        )
        self.study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
        self._last_group: Hashable | None = None
        for coords in self._warm_order(self.initial_design(startup)):
            self._enqueue(coords)

    def initial_design(self, count: int) -> list[tuple[int, ...]]:
        """The first ``count`` points, spread over the grid before TPE models anything: the
        centre of every ordered key, then a seeded Latin hypercube (each ordered key's values
        split into ``count`` strata, one point in each); categorical keys drawn at random.
        Enqueued into the study, so Optuna records them as its first trials."""
        if count < 1:
            return []  # no start-up trials: TPE from the first
        rng = random.Random(self.seed)
        columns: list[list[int]] = []
        for key in self.keys:
            n = len(self.levels[key])
            if self.ordered[key]:
                strata = [min(n - 1, int((s + rng.random()) * n / count)) for s in range(count)]
                rng.shuffle(strata)
                strata[0] = (n - 1) // 2 if n % 2 else n // 2
            else:
                strata = [rng.randrange(n) for _ in range(count)]
            columns.append(strata)
        design: list[tuple[int, ...]] = []
        for row in zip(*columns, strict=True) if columns else [() for _ in range(count)]:
            point = tuple(row)
            if point not in self._by_coords or point in design:
                continue  # not a grid point, or drawn twice: TPE's first proposal instead
            design.append(point)
        return design

    # --- warm state ---------------------------------------------------------

    def group(self, index: int) -> Hashable:
        return self.groups[index] if self.groups is not None else index

    def _warm_order(self, design: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """``design`` with the points of one warm state next to each other (stable: each
        state where its first point was)."""
        if self.groups is None:
            return design
        states = list(dict.fromkeys(self.group(self._by_coords[c]) for c in design))
        return sorted(design, key=lambda c: states.index(self.group(self._by_coords[c])))

    # --- grid geometry ------------------------------------------------------

    def _coords(self, point: Mapping[str, Hashable]) -> tuple[int, ...]:
        return tuple(self.levels[k].index(point.get(k)) for k in self.keys)

    def _distance(self, a: tuple[int, ...], b: tuple[int, ...]) -> float:
        return math.hypot(
            *(
                (x - y) / max(1, len(self.levels[key]) - 1) if self.ordered[key] else x != y
                for key, x, y in zip(self.keys, a, b, strict=True)
            )
        )

    def neighbours(self, index: int) -> list[int]:
        """Grid points one step away: the next value of one ordered key, or another value
        of one categorical key."""
        here = self.coords[index]
        found = []
        for other, there in enumerate(self.coords):
            diffs = [
                (k, abs(x - y)) for k, x, y in zip(self.keys, here, there, strict=True) if x != y
            ]
            if len(diffs) == 1 and (not self.ordered[diffs[0][0]] or diffs[0][1] == 1):
                found.append(other)
        return found

    # --- state --------------------------------------------------------------

    @property
    def visited(self) -> set[int]:
        return {v.index for v in self.visits}

    def unvisited(self) -> list[int]:
        taken = self.visited | set(self.pending)
        return [i for i in range(len(self.points)) if i not in taken]

    def best(self) -> Visit | None:
        usable = [v for v in self.visits if v.measured.usable and not v.pruned]
        return max(usable, key=lambda v: v.measured.objective or 0.0) if usable else None

    @property
    def started(self) -> int:
        return len(self.visits) + len(self.pending)

    @property
    def spent(self) -> float:
        """Seconds the visits took (restart plus measurement; unknown ones count 0)."""
        return sum(v.seconds or 0.0 for v in self.visits)

    # --- ask / tell ---------------------------------------------------------

    def ask(self, n: int = 1, *, after: Hashable | None = None) -> list[int]:
        """Up to ``n`` grid points to start next (none once :meth:`stop_reason` says so);
        ``after``: the warm state of what ran last where they will start (one host of
        several), else the state of the point asked last."""
        if after is not None:
            self._last_group = after
        chosen: list[int] = []
        while len(chosen) < n and self.stop_reason() is None:
            trial = self.study.ask(self.distributions)
            wanted = tuple(int(trial.params[k]) for k in self.keys)
            index = self._by_coords.get(wanted)
            free = self.unvisited()
            if index is None or index not in free:
                # Not a free grid point: discard the proposal, run the nearest free one,
                # one of the warm state started last among the nearest.
                self.study.tell(trial, state=TrialState.FAIL)
                index = min(free, key=lambda i: self._nearest(i, wanted))
                trial = self._ask_for(index)
            self.pending[index] = trial
            chosen.append(index)
            self._last_group = self.group(index)
        # A batch starts one warm state after another (stable within each).
        states = list(dict.fromkeys(self.group(i) for i in chosen))
        return sorted(chosen, key=lambda i: states.index(self.group(i)))

    def _enqueue(self, coords: tuple[int, ...]) -> None:
        self.study.enqueue_trial(dict(zip(self.keys, coords, strict=True)), skip_if_exists=False)

    def _ask_for(self, index: int) -> optuna.trial.Trial:
        """A trial of grid point ``index`` (enqueued, then asked: Optuna records that point)."""
        self._enqueue(self.coords[index])
        return self.study.ask(self.distributions)

    def _nearest(self, index: int, wanted: tuple[int, ...]) -> tuple[float, bool, int]:
        distance = round(self._distance(self.coords[index], wanted), 9)
        return (distance, self.group(index) != self._last_group, index)

    def report(self, index: int, rounds: int, objective: float) -> bool:
        """The objective of pending ``index`` after ``rounds`` rounds of measurement; True
        when it is clearly worse than the points measured that far (Optuna's successive
        halving): stop measuring it and :meth:`tell` it with ``pruned=True``."""
        trial = self.pending.get(index)
        if trial is None:
            return False
        trial.report(objective, rounds)
        return bool(trial.should_prune())

    def give_back(self, index: int) -> None:
        """A pending point that could not be measured here (its host was lost): ask it
        again first."""
        trial = self.pending.pop(index, None)
        if trial is not None:
            self.study.tell(trial, state=TrialState.FAIL)
            self._enqueue(self.coords[index])

    def tell(
        self,
        index: int,
        measured: Measured,
        *,
        carried: bool = False,
        seconds: float | None = None,
        pruned: bool = False,
    ) -> None:
        """The result of ``index``: pending from :meth:`ask`, or carried from a resumed run;
        ``seconds``: what it took (restart plus measurement), charged to ``budget_seconds``;
        ``pruned``: stopped early after :meth:`report` said so."""
        trial = self.pending.pop(index, None) or self._ask_for(index)
        violated = 0.0 if measured.usable else 1.0
        trial.set_user_attr(CONSTRAINT, violated)
        if hasattr(trial, "set_constraint"):
            trial.set_constraint(CONSTRAINT, violated)
        if pruned:
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, measured.objective if measured.objective is not None else 0.0)
        self.visits.append(Visit(index, measured, carried, seconds, pruned))

    # --- stopping -----------------------------------------------------------

    def steepest(self) -> float:
        """The largest relative change of the objective between visited neighbours
        (0.25 until two neighbours have been measured)."""
        usable = {
            v.index: v.measured.objective
            for v in self.visits
            if v.measured.objective is not None and v.measured.usable
        }
        steps = [
            abs(x - y) / min(x, y)
            for a, x in usable.items()
            for b in self.neighbours(a)
            if b > a and (y := usable.get(b)) is not None and min(x, y) > 0
        ]
        return max(steps) if steps else 0.25

    def optimistic(self, index: int) -> float | None:
        """The most an unvisited point can plausibly score: the highest upper bound of its
        measured neighbours, raised by the steepest step seen between neighbours; None
        (anything is plausible) when no neighbour has been measured."""
        near = set(self.neighbours(index))
        highs = [
            m.high if m.high is not None else m.objective
            for visit in self.visits
            if visit.index in near and (m := visit.measured).usable
        ]
        if not highs:
            return None
        return max(h for h in highs if h is not None) * (1.0 + self.steepest())

    def stop_reason(self) -> str | None:
        """Why no further point is asked, or None while the search goes on."""
        if self.budget_seconds is None and self.started >= self.restarts:
            return f"restart budget spent ({self.restarts} configs started)"
        free = self.unvisited()
        if not free:
            return "every config of the space visited"
        if (over := self._over_budget()) is not None:
            return over
        best = self.best()
        if best is None or best.measured.low is None:
            return None
        bounds = [self.optimistic(i) for i in free]
        if all(b is not None and b < best.measured.low for b in bounds):
            return (
                f"no unvisited config can plausibly beat the best: every optimistic bound "
                f"< {best.measured.low:.4g} (the best's lower 95% bound)"
            )
        return None

    def _over_budget(self) -> str | None:
        # The next config is expected to take what the costliest visit took (a config
        # slow to start counts fully).
        known = [v.seconds for v in self.visits if v.seconds is not None]
        if self.budget_seconds is None or not known:
            return None
        expected = max(known)
        committed = self.spent + expected * len(self.pending)
        if committed + expected <= self.budget_seconds:
            return None
        return (
            f"time budget spent ({committed:.0f} s of {self.budget_seconds:.0f} s taken or "
            f"committed; the next config is expected to take {expected:.0f} s)"
        )


def default_restarts(space: int) -> int:
    """A third of the space, at least 3 (and never more than the space)."""
    return min(space, max(3, math.ceil(space / 3)))


def default_startup(restarts: int) -> int:
    """Random start-up trials before TPE models the results: a third of the budget, 2-5."""
    return max(2, min(5, restarts // 3))


def _constraints(trial: optuna.trial.FrozenTrial) -> Sequence[float]:
    return (float(trial.user_attrs.get(CONSTRAINT, 0.0)),)


def _sort_key(value: Any) -> tuple[int, float]:
    return (0, float(value)) if isinstance(value, (int, float)) else (1, 0.0)
