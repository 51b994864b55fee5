"""Turning ``record()``'s arguments into a validated ExecutionRecord.

A caller may pass the decision from ``select`` (its agent, task type and id are used, and
must not be contradicted), or the agent and task type (and a decision id) directly; a
missing cost falls back to the agent's configured ``cost_per_call``. Validation itself (ranges, ids,
timestamps) is ExecutionRecord's job, and a failure is one ``InvalidRecord`` line naming
each field; what depends on the router's settings (how far
ahead of now a timestamp may be, how large metadata may grow) is ``ProfileSettings.admit``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from trustroute.profiles.profile import ProfileSettings
from trustroute.profiles.records import ExecutionRecord, InvalidRecord, utc_now
from trustroute.profiles.validation import validated
from trustroute.router.agents import AgentSpec
from trustroute.router.decision import RoutingDecision


def build_record(decision: RoutingDecision | ExecutionRecord | None,
                 agents: Mapping[str, AgentSpec], *,
                 agent_id: str | None = None, task_type: str | None = None,
                 success: bool | None = None, quality: float | None = None,
                 latency_ms: float = 0.0, cost: float | None = None,
                 timestamp: datetime | None = None, record_id: str | None = None,
                 decision_id: str | None = None,
                 metadata: Mapping[str, Any] | None = None,
                 run_ids: Sequence[str] = ()) -> ExecutionRecord:
    """The ExecutionRecord ``record()`` stores; ValueError names what is missing or wrong.
    A ready ExecutionRecord is stored as it is, so any other field given with it is a
    TypeError (it would be ignored)."""
    if isinstance(decision, ExecutionRecord):
        extra = [name for name, value in (
            ("agent_id", agent_id), ("task_type", task_type), ("success", success),
            ("quality", quality), ("latency_ms", latency_ms or None), ("cost", cost),
            ("timestamp", timestamp), ("record_id", record_id),
            ("decision_id", decision_id), ("metadata", metadata),
            ("run_ids", run_ids or None)) if value is not None]
        if extra:
            raise TypeError(f"record() stores an ExecutionRecord as it is: give "
                            f"{', '.join(extra)} when building the record, or pass them "
                            "without one")
        return costed(decision, agents)
    if decision is not None and not isinstance(decision, RoutingDecision):
        raise TypeError("record() takes the RoutingDecision from select() or an "
                        f"ExecutionRecord, got {type(decision).__name__}")
    if decision is not None:
        for name, given, known in (("agent_id", agent_id, decision.agent_id),
                                   ("task_type", task_type, decision.task_type)):
            if given is not None and given != known:
                raise ValueError(f"{name} {given!r} contradicts the decision's {known!r}")
        agent_id, task_type = decision.agent_id, decision.task_type
    if agent_id is None or task_type is None:
        raise ValueError("record() needs a decision, or both agent_id and task_type")
    if success is None:
        raise ValueError("record() needs success=True or success=False")
    if cost is None and agent_id in agents:
        cost = agents[agent_id].cost_per_call
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidRecord(f"metadata must be a mapping, got {type(metadata).__name__}")
    # left out when None: the record makes its own (now, a new id)
    defaulted: dict[str, Any] = {"timestamp": timestamp, "record_id": record_id}
    return validated(ExecutionRecord, {
        "agent_id": agent_id, "task_type": task_type, "success": success,
        "quality": quality, "latency_ms": latency_ms, "cost": cost,
        "decision_id": decision.decision_id if decision else decision_id,
        "metadata": dict(metadata or {}), "run_ids": run_ids,
        **{name: value for name, value in defaulted.items() if value is not None}},
        error=InvalidRecord)


def as_judged(record: ExecutionRecord, known: tuple[bool, float | None]) -> ExecutionRecord:
    """``record`` as the router holds it, given ``known``: (whether the router remembers
    the run, its quality evidence). A record given without a quality carries the one the
    feedback policy gave it: None while it awaits a verdict (``wait_s``), or the
    quality of a verdict given on its decision before it was recorded."""
    remembered, quality = known
    if record.quality_given or not remembered or quality == record.quality:
        return record
    return record.model_copy(update={"quality": quality})  # still marked as not given


def costed(record: ExecutionRecord, agents: Mapping[str, AgentSpec]) -> ExecutionRecord:
    """``record``, its missing cost filled with its agent's ``cost_per_call`` (every way
    in: ``record()``, a ready ExecutionRecord, ``record_many()``, an import)."""
    spec = agents.get(record.agent_id)
    if record.cost is not None or spec is None or spec.cost_per_call is None:
        return record
    return record.model_copy(update={"cost": spec.cost_per_call})


def admit_all(records: Sequence[ExecutionRecord], settings: ProfileSettings,
              check_agent: Callable[[str], None], agents: Mapping[str, AgentSpec]
              ) -> list[ExecutionRecord]:
    """Check every record with ``settings.admit`` (ValueError names the first bad one's
    field), then each distinct agent with ``check_agent``, before any is written; the
    records to write (a missing cost filled: ``costed``)."""
    now = utc_now()
    for i, rec in enumerate(records):
        if not isinstance(rec, ExecutionRecord):
            raise TypeError(f"record_many() takes ExecutionRecords; item {i} is a "
                            f"{type(rec).__name__}")
        try:
            settings.admit(rec, now)
        except InvalidRecord as exc:  # which of the records: the caller's list is long
            raise InvalidRecord(f"item {i} (record_id {rec.record_id!r}): {exc}") from None
    for agent_id in dict.fromkeys(rec.agent_id for rec in records):
        check_agent(agent_id)
    return [costed(rec, agents) for rec in records]
