"""Honest answers at the router's edges: bad input refused with an error naming it,
duplicates and unknown agents reported, stores that vanish or are opened twice."""

from __future__ import annotations

import inspect
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest

from trustroute import AgentRouter, ExecutionRecord, InvalidRecord, NoAgentAvailable, UnknownAgent
from trustroute.profiles.book import ProfileBook
from trustroute.profiles.store import DuplicateRecord, Store, StoreGone, StoreLockedError
from trustroute.router.learner import Committed, Learner


@pytest.fixture
def router() -> AgentRouter:
    with AgentRouter(["a", "b"], store="mem://", seed=0) as r:
        yield r


def nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(("fields", "names"), [
    ({"success": "yes"}, "success"),
    ({"success": True, "timestamp": "0001-01-01T00:00:00+14:00"}, "out of range"),
    ({"success": True, "latency_ms": 1.7e308}, "latency_ms must be <="),
    ({"success": True, "latency_ms": 10**400}, "latency_ms must be a finite number"),
    ({"success": True, "cost": 1e300}, "cost must be <="),
    ({"success": True, "metadata": nested(1000)}, "nested deeper than 32"),
    ({"success": True, "metadata": {"n": 2**70}}, "does not fit in 64 bits"),
    ({"success": True, "metadata": {"s": "a\x00b"}}, "NUL"),
    ({"success": True, "record_id": "a\x00b"}, "NUL"),
    ({"success": True, "timestamp": "2999-01-01T00:00:00Z"}, "ahead of now"),
    ({"success": True, "metadata": {"s": "x" * 70_000}}, "profiles.max_metadata_bytes"),
])
def test_bad_outcomes_are_refused_naming_what_is_wrong(
        router: AgentRouter, fields: dict[str, object], names: str) -> None:
    with pytest.raises(InvalidRecord, match=names) as bad:  # one line naming the field
        router.record(agent_id="a", task_type="code", **fields)  # type: ignore[arg-type]
    assert "\n" not in str(bad.value)
    assert router.store.executions.count() == 0


def test_exclude_must_be_a_list_not_a_string(router: AgentRouter) -> None:
    with pytest.raises(TypeError, match="not the string 'ab'"):
        router.select("code", exclude="ab")
    with pytest.raises(TypeError, match="exclude must be a list of agent ids, not None"):
        router.select("code", exclude=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="now must be a timezone-aware datetime or None"):
        router.profile("a", "code", now="2025-01-01")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="now must be a timezone-aware datetime, got '20"):
        router.decay(now="2025-01-01")  # type: ignore[arg-type]


def test_no_agent_available_says_the_caller_excluded_them(router: AgentRouter) -> None:
    with pytest.raises(NoAgentAvailable, match=r"2 eligible agent\(s\) excluded by the caller"):
        router.select("code", exclude=["a", "b"])


def test_a_duplicate_record_id_is_reported_and_counts_once(router: AgentRouter) -> None:
    router.record(agent_id="a", task_type="code", success=True, record_id="r-1")
    with pytest.raises(DuplicateRecord, match="'r-1' is already stored"):
        router.record(agent_id="a", task_type="code", success=False, record_id="r-1")
    assert router.profile("a", "code").executions_total == 1
    assert router.profile("a", "code").executions_successful == 1
    assert router.store.executions.count() == 1


def test_an_unlisted_agent_warns_or_is_refused() -> None:
    with AgentRouter(["coder"], store="mem://") as r:
        with pytest.warns(UserWarning, match="'codr', which this router does not list"):
            r.record(agent_id="codr", task_type="code", success=True)
        r.unknown_agents = "error"
        with pytest.raises(UnknownAgent):
            r.record(agent_id="writer", task_type="code", success=True)
        assert r.store.executions.count() == 1
        r.unknown_agents = "allow"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r.record(agent_id="writer", task_type="code", success=True)
    with pytest.raises(ValueError, match="unknown_agents must be"):
        AgentRouter(["a"], store="mem://", unknown_agents="sometimes")  # type: ignore[arg-type]


def test_options_may_be_mappings_and_bad_ones_say_which_key(tmp_path: Path) -> None:
    """trust=, abstention=, limits= and settings= take their config section as a dict."""
    with AgentRouter(["a", "b"], store="mem://",
                     trust={"policy": {"new_profile_observations": 5}},
                     abstention={"on_abstain": "raise"}, limits={"lease_ttl_s": 5},
                     settings={"recency": {"window_size": 10}}) as r:
        assert r.trust_layer.options.policy.new_profile_observations == 5
        assert r.trust_layer.gate.abstention.on_abstain == "raise"
        assert r.limits.lease_ttl_s == 5 and r.settings.recency.window_size == 10
    url = f"surrealkv://{tmp_path / 'db'}"
    with pytest.raises(ValueError) as bad:
        AgentRouter(["a"], store=url, trust={"policy": {"new_profile_observation": 5}})
    message = str(bad.value)
    assert "\n" not in message and "trust.policy.new_profile_observation" in message
    with pytest.raises(ValueError, match=r"limits\.lease_ttl_s: .*greater than 0"):
        AgentRouter(["a"], store=url, limits={"lease_ttl_s": -1})
    with pytest.raises(TypeError, match="trust must be a TrustOptions or a mapping"):
        AgentRouter(["a"], store=url, trust=5)  # type: ignore[arg-type]
    with AgentRouter(["a"], store=url) as r:  # nothing was left open or locked
        assert r.store.executions.count() == 0


@pytest.mark.parametrize(("agents", "said"), [
    ([{"id": "a", "max_concurent": 4}],
     "agents.0.max_concurent: unknown key 'max_concurent' (did you mean 'max_concurrent'?)"),
    (["a", "b\x1b"], "agents.1.id: agent id must not contain control characters"),
    ([{"id": "a", "task_types": []}], "agents.0.task_types: task_types must name at least"),
    ([{"max_concurrent": 3}], "agents.0.id: required key is missing"),
    ([{"id": "a", "cost_per_call": float("inf")}], "agents.0.cost_per_call: expected a finite"),
])
def test_a_bad_agent_spec_is_one_line_naming_its_key(agents: list[object], said: str) -> None:
    with pytest.raises(ValueError) as bad:
        AgentRouter(agents, store="mem://")  # type: ignore[arg-type]
    assert "\n" not in str(bad.value) and said in str(bad.value)


@pytest.mark.parametrize(("options", "said"), [
    ({"strategy": None}, "strategy must be a name or a Strategy, got None"),
    ({"strategy_params": [1]}, "strategy_params must be a mapping, got [1]"),
    ({"seed": "x"}, "seed must be a whole number >= 0 or None, got 'x'"),
    ({"seed": -1}, "seed must be a whole number >= 0 or None, got -1"),
    ({"store": 5}, "store must be a URL (mem://, surrealkv://PATH, ws://HOST:PORT) or a Store"),
])
def test_a_wrong_argument_is_named(options: dict[str, object], said: str) -> None:
    with pytest.raises((TypeError, ValueError)) as bad:
        AgentRouter(["a"], **{"store": "mem://", **options})  # type: ignore[arg-type]
    assert said in str(bad.value) and "\n" not in str(bad.value)


def test_one_agent_is_not_a_list_of_agents_nor_a_batch_size_of_zero() -> None:
    with pytest.raises(TypeError, match=r"agents must be a list of ids or specs, not the "
                                        r"str 'coder'; e.g. agents=\['coder'\]"):
        AgentRouter("coder", store="mem://")  # type: ignore[arg-type]
    with AgentRouter(["a"], store="mem://") as router:
        rows = [ExecutionRecord(agent_id="a", task_type="t", success=True)]
        for size in (0, -1, 2.5):
            with pytest.raises(ValueError, match="batch_size must be a whole number >= 1"):
                router.record_many(rows, batch_size=size)  # type: ignore[arg-type]
        assert router.store.executions.count() == 0
        assert router.record_many(rows, batch_size=1) == 1


def test_a_store_opened_twice_in_one_process_says_so(tmp_path: Path) -> None:
    url = f"surrealkv://{tmp_path / 'db'}"
    with Store(url), pytest.raises(StoreLockedError, match="already open in this process"):
        Store(url)


def test_a_deleted_store_fails_loudly_instead_of_losing_writes(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    r = AgentRouter(["a"], store=f"surrealkv://{folder / 'db'}")
    r.record(agent_id="a", task_type="code", success=True)
    shutil.rmtree(folder)
    with pytest.raises(StoreGone, match="deleted or replaced"):
        r.record(agent_id="a", task_type="code", success=True)
    with pytest.raises(StoreGone):  # buffered trust updates cannot be written either
        r.close()


def test_refresh_racing_record_neither_duplicates_nor_loses_evidence(kv_url: str) -> None:
    """A reload that reads the store after a record's commit but before its fold must not
    fold it twice (the reload already has it): every seq once, counts exact. A learner
    whose rebuild is slow (a documented extension point) widens that window."""
    import threading
    import time

    class SlowRebuild:
        def __init__(self) -> None:
            self.rebuilds = 0

        def fold(self, batch: Sequence[Committed]) -> None:
            pass

        def rebuild(self, book: ProfileBook, placed: Sequence[Committed],
                    store: Store) -> None:
            self.rebuilds += 1
            time.sleep(0.02)

    with AgentRouter(["a", "b"], store=kv_url, seed=0) as r:
        slow = SlowRebuild()
        assert isinstance(slow, Learner)
        r.learners.insert(0, slow)
        done = threading.Event()
        crashed: list[BaseException] = []

        def reload_in_a_loop() -> None:
            try:
                while not done.is_set():
                    r.refresh()
                    time.sleep(0.001)
            except BaseException as exc:  # reported below: a crash fails the test
                crashed.append(exc)

        reloader = threading.Thread(target=reload_in_a_loop)
        reloader.start()
        try:
            for i in range(60):
                r.record(agent_id="ab"[i % 2], task_type="code", success=i % 3 > 0)
            r.record_many([ExecutionRecord(agent_id="a", task_type="code", success=True)
                           for _ in range(20)], batch_size=3)
        finally:
            done.set()
            reloader.join()
        assert crashed == []
        assert slow.rebuilds > 0  # the reloads ran while records were written
        expected = {"a": [*range(1, 60, 2), *range(61, 81)], "b": list(range(2, 61, 2))}
        for agent, seqs in expected.items():
            state = r.book.get(agent, "code")
            assert state is not None and [e.seq for e in state.window] == seqs
        assert r.book.clock("code") == 80


def test_record_of_something_else_than_a_decision_says_so(router: AgentRouter) -> None:
    with pytest.raises(TypeError, match=r"RoutingDecision from select\(\) or an "
                                        r"ExecutionRecord, got str"):
        router.record("a-decision-id", success=True)  # type: ignore[arg-type]
    assert router.store.executions.count() == 0


def test_a_ready_record_with_other_fields_is_refused_not_half_used(router: AgentRouter) -> None:
    rec = ExecutionRecord(agent_id="a", task_type="code", success=True, quality=0.9)
    with pytest.raises(TypeError, match=r"as it is: give success, quality when building"):
        router.record(rec, success=False, quality=0.1)
    assert router.store.executions.count() == 0
    assert router.record(rec).quality == 0.9
    assert router.store.executions.count() == 1


def test_async_twins_show_the_signature_of_what_they_run() -> None:
    for twin in (AgentRouter.arecord, AgentRouter.afeedback, AgentRouter.arecord_many):
        assert "self" in inspect.signature(twin).parameters  # not (*args, **kwargs)
    assert "success" in inspect.signature(AgentRouter.arecord).parameters


def test_metadata_nests_32_levels_as_a_config_file_does(router: AgentRouter) -> None:
    # nested(31) is metadata (level 1) holding 31 more mappings: 32 levels in all
    router.record(agent_id="a", task_type="code", success=True, metadata=nested(31))
    with pytest.raises(InvalidRecord, match=r"^metadata: nested deeper than 32 levels$"):
        router.record(agent_id="a", task_type="code", success=True, metadata=nested(32))


def test_cost_per_call_fills_a_missing_cost_on_every_way_in() -> None:
    agents = [{"id": "coder", "cost_per_call": 0.012}, "free"]
    with AgentRouter(agents, store="mem://") as r:
        plain = r.record(agent_id="coder", task_type="a", success=True)
        ready = r.record(ExecutionRecord(agent_id="coder", task_type="b", success=True))
        assert (plain.cost, ready.cost) == (0.012, 0.012)
        assert r.record_many([ExecutionRecord(agent_id="coder", task_type="c", success=True),
                              ExecutionRecord(agent_id="coder", task_type="c", success=True,
                                              cost=0.5),
                              ExecutionRecord(agent_id="free", task_type="c",
                                              success=True)]) == 3
        assert r.record_many(ExecutionRecord(agent_id="coder", task_type="d", success=True)
                             for _ in range(2)) == 2  # an iterator, batch by batch
        assert [r.profile("coder", t).avg_cost for t in "abcd"] == \
            [0.012, 0.012, pytest.approx((0.012 + 0.5) / 2), 0.012]
        assert r.profile("free", "c").avg_cost is None  # no cost_per_call: none recorded
