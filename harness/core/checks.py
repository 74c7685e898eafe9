"""The checkers a stored run needs, composed into one verdict (simulator and real runs alike)."""

from __future__ import annotations

from typing import Any

from checkers.verdict import compose


def check_run(
    history: Any,
    events: list[dict[str, Any]],
    logs: dict[str, list[dict[str, Any]]],
    invariants: dict[str, Any] | None,
    model: str,
    time_limit: float,
    partition_logs: dict[str, dict[str, list[dict[str, Any]]]] | None = None,
    allow: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Every checker a run needs, composed (false beats unknown beats true).

    `model` "queue" checks the Kafka queue anomalies (and partition logs across replicas),
    "txn-queue" the transactional ones (Jepsen's, with G0/G1c cycles) under the same name "queue";
    any other model is a linearizability model.
    """
    from checkers.epochs import check_events, check_partition_logs
    from checkers.stats import stats

    parts: dict[str, dict[str, Any]] = {}
    if model == "queue":
        from checkers.queue import check_queue

        parts["queue"] = check_queue(history, allow=allow)
    elif model == "txn-queue":  # the queue workload's --txn
        from checkers.txn_queue import check_txn_queue

        # offsets always give ww edges here (Jepsen's --ww-deps), so G1c is allowed as Jepsen allows it then,
        # except a G1c-class cycle that needs no ww edge (wr-only, e.g. an early read): that stays bad
        parts["queue"] = check_txn_queue(history, allow=allow, ww_deps=True)
    else:
        from checkers.linearizable import check

        parts["linearizable"] = check(history, model, time_limit=time_limit)
    parts["epochs"] = check_events(events, logs) if events else {"valid": "unknown", "error": "no events"}
    if partition_logs:
        parts["partition-logs"] = check_partition_logs(partition_logs)
    if invariants is not None:
        parts["invariants"] = invariants
    result = compose(parts)
    result["stats"] = stats(history)
    return result
