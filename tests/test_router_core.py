"""Router core: the reference ranking, load balancing, leases, ties, decision ids, the
profiles a decision carries, and no-agent errors."""

from __future__ import annotations

import asyncio
import math
import os
import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from trustroute.profiles import RecencySettings, weighted_expertise
from trustroute.router import AgentAtCapacity, AgentRouter, AgentSpec, NoAgentAvailable, decision
from trustroute.router.agents import AgentLike
from trustroute.router.decision import new_decision_id
from trustroute.router.learner import ProfileSnapshots
from trustroute.router.router import best_first


@pytest.fixture
def router() -> Iterator[AgentRouter]:
    """Two agents ranked by the reference strategy, on an in-memory store."""
    with routed(["a", "b"]) as r:
        yield r


def routed(agents: list[AgentLike], seed: int = 0) -> AgentRouter:
    return AgentRouter(agents=agents, store="mem://", seed=seed,
                       strategy="confidence_weighted")


def teach(router: AgentRouter, agent: str, task: str, qualities: list[float]) -> None:
    for q in qualities:
        router.record(agent_id=agent, task_type=task, success=q >= 0.5, quality=q)


def test_lucky_newcomer_ranks_below_established_agent() -> None:
    with routed(["newcomer", "veteran"]) as r:
        teach(r, "newcomer", "code", [0.95])
        teach(r, "veteran", "code", [0.80] * 10)
        d = r.select("code")
        assert d.agent_id == "veteran"
        assert d.ranking == ["veteran", "newcomer"]
        scores = {c.agent_id: c for c in d.candidates}
        assert scores["newcomer"].adjusted_score == pytest.approx(0.0475)
        assert scores["veteran"].adjusted_score == pytest.approx(0.40)
        assert scores["veteran"].confidence == pytest.approx(0.5)
        assert scores["newcomer"].executions == 1
        assert "x confidence 0.50" in scores["veteran"].reason
        assert d.strategy == "confidence_weighted"


def test_profile_of_an_unknown_pair_is_empty(router: AgentRouter) -> None:
    p = router.profile("a", "never-seen")
    assert p.executions_total == 0 and p.executions_successful == 0
    assert p.expertise == 0.0 and p.confidence == 0.0 and p.adjusted_score == 0.0
    assert router.profile("not-even-registered", "x").executions_total == 0


def test_select_sees_each_new_record(router: AgentRouter) -> None:
    teach(router, "a", "code", [0.9] * 4)
    assert router.select("code").agent_id == "a"
    teach(router, "b", "code", [1.0] * 8)
    d = router.select("code")
    assert d.agent_id == "b"
    assert {c.agent_id: c.executions for c in d.candidates} == {"a": 4, "b": 8}


def test_registry_changes_are_seen_by_select(router: AgentRouter) -> None:
    teach(router, "a", "code", [0.9] * 4)
    router.select("code")
    router.register(AgentSpec(id="a", enabled=False))
    assert router.select("code").ranking == ["b"]
    router.register(AgentSpec(id="c", task_types=("code",)))
    assert set(router.select("code").ranking) == {"b", "c"}
    assert router.select("math").ranking == ["b"]


def test_no_agent_available_names_the_task_type() -> None:
    agents = [AgentSpec(id="coder", task_types=("code",)),
              AgentSpec(id="off", enabled=False)]
    with routed(agents) as r:
        with pytest.raises(NoAgentAvailable, match="'poetry'") as info:
            r.select("poetry")
        assert info.value.task_type == "poetry"
        with pytest.raises(NoAgentAvailable, match="'code'"):
            r.select("code", exclude=["coder"])


def test_load_balancing_divides_by_one_plus_load() -> None:
    agents = [AgentSpec(id="a", max_concurrent=4), AgentSpec(id="b", max_concurrent=4)]
    with routed(agents) as r:
        teach(r, "a", "code", [0.8] * 20)
        teach(r, "b", "code", [0.7] * 20)
        assert r.select("code").agent_id == "a"
        leases = [r.acquire("a"), r.acquire("a")]  # load 0.5: 0.8 / 1.5 < 0.7
        d = r.select("code")
        a = next(c for c in d.candidates if c.agent_id == "a")
        assert a.load == pytest.approx(0.5)
        assert a.final_score == pytest.approx(0.8 / 1.5)
        assert "load 0.50" in a.reason
        assert d.agent_id == "b"
        for lease in leases:
            lease.release()
        assert r.select("code").agent_id == "a"


def test_agents_at_capacity_are_skipped() -> None:
    agents = [AgentSpec(id="a", max_concurrent=1), AgentSpec(id="b", max_concurrent=1)]
    with routed(agents) as r:
        teach(r, "a", "code", [1.0] * 20)
        first = r.select("code", acquire=True)
        assert first.agent_id == "a" and r.in_flight("a") == 1
        second = r.select("code", acquire=True)
        assert second.agent_id == "b" and second.ranking == ["b"]
        with pytest.raises(NoAgentAvailable, match="2 eligible agent\\(s\\) at capacity"):
            r.select("code")
        with pytest.raises(AgentAtCapacity, match="'a'"):
            r.acquire("a")
        r.record(first, success=True)  # recording releases the slot
        assert r.in_flight("a") == 0
        assert r.select("code").agent_id == "a"
        second.release()
        second.release()
        assert r.in_flight("b") == 0


def test_leases_never_leak() -> None:
    with routed([AgentSpec(id="a", max_concurrent=2)]) as r:
        with pytest.raises(RuntimeError), r.acquire("a"):
            assert r.in_flight("a") == 1
            raise RuntimeError("agent crashed")
        assert r.in_flight("a") == 0
        lease = r.acquire("a")
        lease.release()
        lease.release()  # a second release is a no-op, not a second decrement
        other = r.acquire("a")
        assert r.in_flight("a") == 1 and lease.released and not other.released
        other.release()
        d = r.select("x", acquire=True)
        with pytest.raises(ValueError, match="success"):
            r.record(d)  # a call that records nothing keeps the task in flight ...
        assert r.in_flight("a") == 1
        r.record(d, success=True)  # ... until it is recorded
        assert r.in_flight("a") == 0
        d = r.select("x", acquire=True)

        def broken(record: object) -> None:
            raise ConnectionError("database went away")

        r.store.executions.record = broken  # type: ignore[assignment,method-assign]
        with pytest.raises(ConnectionError):
            r.record(d, success=True)  # a failed write still gives the slot back
        assert r.in_flight("a") == 0


def test_ties_are_random_but_reproducible_under_a_seed() -> None:
    def choices(seed: int) -> list[str]:
        with routed(["a", "b", "c"], seed=seed) as r:
            return [r.select("code").agent_id for _ in range(30)]

    assert choices(7) == choices(7)
    assert choices(7) != choices(8)
    assert set(choices(7)) == {"a", "b", "c"}  # untrained agents tie: all get picked


def test_best_first_orders_as_numpy_sorts_scores_and_ties() -> None:
    """Highest score first, equal scores by their random tie draw, NaN last: the order
    ``numpy.lexsort`` gives, through infinities and signed zeros."""
    rng = np.random.default_rng(4)
    pool = [0.0, -0.0, 0.5, math.inf, -math.inf, math.nan]
    for _ in range(2000):
        n = int(rng.integers(1, 12))
        scores = [float(rng.choice(pool)) if rng.random() < 0.6 else float(rng.random())
                  for _ in range(n)]
        ties = rng.random(n)
        expected = np.lexsort((ties, -np.array(scores))).tolist()
        assert best_first(scores, ties.tolist()) == expected, scores


def test_select_reads_memory_only(router: AgentRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    teach(router, "a", "code", [0.9] * 3)

    def no_database(*args: object) -> None:
        raise AssertionError("select() touched the database")

    monkeypatch.setattr(router.store.conn, "run", no_database)
    d = router.select("code")
    assert d.agent_id == "a"
    assert asyncio.run(router.aselect("code")).agent_id == "a"


def test_decision_ids_are_unique_and_recorded(router: AgentRouter) -> None:
    decisions = [router.select("code") for _ in range(20)]
    assert len({d.decision_id for d in decisions}) == 20
    rec = router.record(decisions[0], success=True, quality=0.6)
    assert rec.decision_id == decisions[0].decision_id
    assert rec.agent_id == decisions[0].agent_id
    with pytest.raises(ValueError, match="contradicts"):
        router.record(decisions[1], agent_id="zzz", success=True)


def test_profiles_drawn_when_a_record_is_folded_equal_ones_drawn_afresh() -> None:
    """The router draws the profile of each pair a record changed as it folds the record
    (``ProfileSnapshots``, one of ``router.learners``); without it ``select()`` draws
    them. In a select -> record loop both decide alike, and every candidate's profile is
    the recency-weighted mean of its recorded qualities at the moment of the decision."""
    agents = ["a", "b", "c", "d"]
    runs: list[list[tuple[str, list[tuple[str, float, int]]]]] = []
    for drawn_at_fold in (True, False):
        rng = np.random.default_rng(9)
        seen = []
        outcomes: dict[str, list[tuple[float, float]]] = {a: [] for a in agents}
        with routed(agents, seed=2) as r:
            if not drawn_at_fold:
                r.learners[:] = [x for x in r.learners if not isinstance(x, ProfileSnapshots)]
            assert any(isinstance(x, ProfileSnapshots) for x in r.learners) == drawn_at_fold
            for _ in range(150):
                d = r.select("code")
                seen.append((d.agent_id, [(c.agent_id, c.expertise, c.executions)
                                          for c in d.candidates]))
                for c in d.candidates:
                    assert c.executions == len(outcomes[c.agent_id])
                    window = outcomes[c.agent_id][-RecencySettings().window_size:]
                    assert c.expertise == pytest.approx(weighted_expertise(
                        [q for _, q in window], [t for t, _ in window],
                        d.created_at.timestamp(), RecencySettings()), rel=1e-12, abs=1e-15)
                good = "abcd".index(d.agent_id) / 4
                rec = r.record(d, success=True, quality=float(rng.uniform()) * good)
                outcomes[rec.agent_id].append((rec.timestamp.timestamp(), rec.quality or 0.0))
        runs.append(seen)
    # the same decisions (the two runs' clocks differ by milliseconds: so do expertises)
    for (agent, first), (other, second) in zip(*runs, strict=True):
        assert agent == other
        assert [(a, n) for a, _, n in first] == [(a, n) for a, _, n in second]
        assert [e for _, e, _ in first] == pytest.approx([e for _, e, _ in second], rel=1e-6)


def test_a_decision_id_is_what_uuid4_makes_of_the_same_random_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    draws = [bytes(16), bytes([255] * 16), *(os.urandom(16) for _ in range(300))]
    taken = iter(draws)
    monkeypatch.setattr(decision, "urandom", lambda n: next(taken))
    made = [new_decision_id() for _ in draws]
    assert made == [str(uuid.UUID(bytes=raw, version=4)) for raw in draws]


def test_decision_ids_are_version_4_uuids_and_a_forked_process_draws_its_own() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next three ids, then out at once
        try:
            os.write(write, " ".join(new_decision_id() for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    mine = [new_decision_id() for _ in range(3)]
    assert len(child) == 3 and not set(child) & set(mine)
    for decision_id in child + mine:
        parsed = uuid.UUID(decision_id)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == decision_id


def test_a_waiter_wakes_when_a_slot_is_released() -> None:
    import threading
    import time

    with routed([{"id": "solo", "max_concurrent": 1}]) as r:
        held = r.select("code", acquire=True)
        seen = r.slots.releases
        with pytest.raises(NoAgentAvailable, match="at capacity"):
            r.select("code", acquire=True)
        assert r.slots.wait_for_release(seen, timeout=0.05) is False  # nothing released yet
        timer = threading.Timer(0.05, held.release)
        timer.start()
        start = time.monotonic()
        assert r.slots.wait_for_release(seen, timeout=5.0) is True
        assert time.monotonic() - start < 2.0
        assert r.select("code", acquire=True).agent_id == "solo"
        # a release between reading ``releases`` and waiting is never missed
        assert r.slots.wait_for_release(seen, timeout=0.0) is True


def test_async_waiters_hold_no_thread_and_wake_on_release() -> None:
    async def scenario() -> list[bool]:
        with routed([{"id": "solo", "max_concurrent": 1}]) as r:
            held = r.select("code", acquire=True)
            seen = r.slots.releases
            waiters = [asyncio.create_task(r.slots.await_for_release(seen, 5.0)) for _ in range(50)]
            timeout = await r.slots.await_for_release(seen, 0.01)
            held.release()
            return [timeout, *await asyncio.gather(*waiters)]

    results = asyncio.run(scenario())
    assert results[0] is False and all(results[1:])


def test_every_store_method_has_an_async_twin(router: AgentRouter) -> None:
    async def scenario() -> None:
        decision = await router.aselect("code")
        rec = await router.arecord(decision, success=True, quality=0.9)
        assert rec.agent_id == decision.agent_id
        assert await router.arecord_many([]) == 0
        scores = await router.afeedback(decision.decision_id, approved=True)
        assert scores.human > 0.5
        await router.areview(decision.agent_id, "code", True)
        await router.asignal(decision.agent_id, "code", "user_accepted")
        assert (await router.atrust(decision.agent_id, "code")).tier
        await router.aflush()
        await router.arefresh()
        assert router.profile(decision.agent_id, "code").executions_total == 1
        assert (await router.adecay()).week

    asyncio.run(scenario())
    assert router.arecord.__doc__ == ("Async ``record`` (runs in a worker thread; carried out "
                                      "even if the caller is cancelled).")
