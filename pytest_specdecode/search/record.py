"""The report's ``search`` section and the skip reason of the configs never visited."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_specdecode.search.optimizer import GridSearch, Visit

SAMPLER = "optuna TPESampler (multivariate; infeasible configs as violated constraints)"


def _visit_json(visit: Visit, labels: Sequence[str], restart: int) -> dict[str, Any]:
    m = visit.measured
    return {
        "restart": restart,
        "label": labels[visit.index],
        "objective": m.objective,
        "interval": {"low": m.low, "high": m.high},
        "feasible": m.usable,
        "reasons": list(m.reasons),
        "seconds": None if visit.seconds is None else round(visit.seconds, 3),
        **({"carried": True} if visit.carried else {}),
        **({"pruned": True} if visit.pruned else {}),
    }


def section(
    search: GridSearch, labels: Sequence[str], metric: str, stopped: str | None, seed: int | None
) -> dict[str, Any]:
    """The JSON ``search`` section: space size, visits in order, best, why it stopped."""
    visited = [_visit_json(v, labels, n) for n, v in enumerate(search.visits, 1)]
    best = search.best()
    started = sum(not v.carried for v in search.visits)
    return {
        "space_size": len(labels),
        "restarts": search.restarts,
        "budget_seconds": search.budget_seconds,
        "spent_seconds": round(search.spent, 3),
        "metric": metric,
        "seed": seed,
        "sampler": SAMPLER,
        "visited": visited,
        "best": _visit_json(best, labels, search.visits.index(best) + 1) if best else None,
        "stopped": stopped,
        "started": started,
        "restarts_saved": len(labels) - len(search.visits),
        "pending": [labels[i] for i in search.pending],
    }


def skip_reason(search: GridSearch, labels: Sequence[str]) -> Callable[[int], str]:
    """``index -> reason`` for the tests of an unvisited config."""
    best = search.best()
    shown = f"{labels[best.index]} {best.measured.objective:.4g}" if best else "none feasible"

    def reason(index: int) -> str:
        bound = search.optimistic(index)
        predicted = "unknown (no measured neighbour)" if bound is None else f"<= {bound:.4g}"
        return f"not visited by the search (best so far: {shown}, predicted {predicted})"

    return reason
