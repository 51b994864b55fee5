"""A projection cache that cannot lie: an unreadable cache (bad JSON, a missing chunk,
a head of the wrong shape) is ignored with a warning, a cache whose content disagrees
with the log (an edited chunk claiming 9,999 executions) is never used; either way the
router shows what the log says and the next open works. A failed open releases the
embedded store's lock."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from test_projection_cache import AGENTS, fill, view

from trustroute import AgentRouter, ExecutionRecord
from trustroute.profiles.store import Store
from trustroute.profiles.store.projections import ProjectionRepository, digest
from trustroute.router.strategies import make_strategy

UNREADABLE = "the cached projection is unreadable"
MISMATCH = "does not match the log"


def chunks(store: Store) -> list[dict[str, Any]]:
    """The current generation's chunk rows (id, n, data), in order."""
    head = store.run("SELECT * FROM ONLY projection:head;")[0]
    return list(store.run("SELECT id, n, data FROM projection_chunk WHERE generation = $g "
                          "ORDER BY n;", {"g": head["generation"]})[0])


def rewrite(store: Store, n: int, data: str, *, sign: bool) -> None:
    """Replace chunk ``n``'s text; ``sign``: write the head's digest to match (a cache
    consistent in itself whose content is wrong)."""
    rows = chunks(store)
    store.run("UPDATE $id SET data = $d;", {"id": rows[n]["id"], "d": data})
    if sign:
        head = store.run("SELECT * FROM ONLY projection:head;")[0]
        texts = [data if r["n"] == n else r["data"] for r in rows]
        store.run("UPDATE projection:head SET digest = $d;",
                  {"d": digest(head["meta"], texts)})


def bad_json(store: Store) -> None:
    rewrite(store, 0, '{"states": [[', sign=True)


def missing_chunk(store: Store) -> None:
    store.run("DELETE $id;", {"id": chunks(store)[0]["id"]})


def head_of_another_shape(store: Store) -> None:
    head = store.run("SELECT * FROM ONLY projection:head;")[0]
    meta = json.dumps({"window_size": 100, "clocks": []})  # valid JSON, wrong shape
    store.run("UPDATE projection:head SET meta = $m, digest = $d;",
              {"m": meta, "d": digest(meta, [r["data"] for r in chunks(store)])})
    assert head["meta"] != meta


def torn_text(store: Store) -> None:
    rewrite(store, 0, chunks(store)[0]["data"][:-40], sign=False)


@pytest.mark.parametrize("damage", [bad_json, missing_chunk, head_of_another_shape,
                                    torn_text], ids=lambda f: f.__name__)
def test_an_unreadable_cache_is_ignored_with_a_warning(
        kv_url: str, caplog: pytest.LogCaptureFixture, damage: Callable[[Store], None]
        ) -> None:
    learned = fill(kv_url)
    with Store(kv_url) as store:
        assert store.repository(ProjectionRepository).read() is not None
        damage(store)
    with caplog.at_level(logging.WARNING), AgentRouter(agents=AGENTS, store=kv_url) as r:
        assert view(r) == learned  # what the log says
        assert [rec.levelname for rec in caplog.records if UNREADABLE in rec.message] == \
            ["WARNING"]
    caplog.clear()
    with caplog.at_level(logging.INFO), AgentRouter(agents=AGENTS, store=kv_url) as r:
        assert view(r) == learned  # the next open works, from the cache written at close
        assert UNREADABLE not in caplog.text and "reading the whole log" not in caplog.text


@pytest.mark.parametrize("signed", [True, False], ids=["digest-rewritten", "digest-kept"])
def test_an_edited_cache_is_never_used(kv_url: str, caplog: pytest.LogCaptureFixture,
                                       signed: bool) -> None:
    """A chunk edited to claim 9,999 executions of a pair (valid JSON; with its digest
    rewritten to match, or not): the router shows the log's count."""
    learned = fill(kv_url)
    with Store(kv_url) as store:
        first = chunks(store)[0]
        part = json.loads(first["data"])
        row = next(s for s in part["states"] if s[:2] == ["a", "t0"])
        logged = row[2]
        row[2] = 9_999  # executions_total
        rewrite(store, 0, json.dumps(part), sign=signed)
    with caplog.at_level(logging.WARNING), AgentRouter(agents=AGENTS, store=kv_url) as r:
        assert r.profile("a", "t0").executions_total == logged != 9_999
        assert view(r) == learned
        assert (MISMATCH if signed else UNREADABLE) in caplog.text
    with AgentRouter(agents=AGENTS, store=kv_url) as r:
        assert view(r) == learned


def test_a_failed_open_releases_the_store(kv_url: str) -> None:
    """An open that raises after the store opened (here a strategy that fails while the
    log is folded) closes it: the same process opens the store again at once."""
    fill(kv_url, n=12)
    base = make_strategy("confidence_weighted")

    class Failing(type(base)):  # type: ignore[misc]
        def reset(self, book: Any) -> None:
            raise RuntimeError("this strategy cannot learn")

    with pytest.raises(RuntimeError, match="cannot learn"):
        AgentRouter(agents=AGENTS, store=kv_url, strategy=Failing())
    with AgentRouter(agents=AGENTS, store=kv_url) as router:
        assert router.store.executions.count() == 13


class Interrupted:
    """The default strategy, interrupted (Ctrl-C) while it learns from its 5th record,
    as a SIGINT to `trustroute import` may land between the strategy and the trust layer."""

    name = "interrupted"

    def __init__(self) -> None:
        self.inner = make_strategy("knowledge_gradient")
        self.seen = 0

    def score(self, arms: Any, ctx: Any) -> Any:
        return self.inner.score(arms, ctx)

    def observe(self, record: Any, seq: int, book: Any) -> None:
        self.seen += 1
        if self.seen == 5:
            raise KeyboardInterrupt
        self.inner.observe(record, seq, book)

    def reset(self, book: Any) -> None:
        self.inner.reset(book)


def test_a_fold_interrupted_part_way_is_never_saved_as_the_cache(kv_url: str) -> None:
    with AgentRouter(["a"], store=kv_url, strategy=Interrupted()) as r:
        for _ in range(4):
            r.record(agent_id="a", task_type="t", success=True)
        with pytest.raises(KeyboardInterrupt):  # stored, in the book; trust not folded
            r.record_many([ExecutionRecord(agent_id="a", task_type="t", success=True)
                           for _ in range(3)])
    with AgentRouter(["a"], store=kv_url) as again:  # the log, not a half-folded cache
        assert again.profile("a", "t").executions_total == 7
        assert again.trust_layer.book.counts("a", "t").observations == 7
