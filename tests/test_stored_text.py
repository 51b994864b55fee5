"""Text the store could keep but never send back (a NUL, a lone surrogate) is refused
where people give it, naming the field, and by the store on every query; what must be
kept whatever it holds (a hand-off) is kept with U+FFFD in its place. Either way the
store opens again with everything it held."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustroute import AgentRouter
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.profiles.store.params import UnstorableText
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"surrealkv://{tmp_path / 'db'}"
    with AgentRouter(["a"], store=url) as router:
        router.record(router.select("t"), success=True, quality=0.8, record_id="r1")
        router.feedback("r1", approved=True, comment="fine")
    return url


def reopened_intact(url: str) -> None:
    with AgentRouter(["a"], store=url) as router:
        profile = router.profile("a", "t")
        assert (profile.executions_total, profile.avg_quality) == (1, 1.0)
        assert router.trust("a", "t").human > 0.5


@pytest.mark.parametrize(("call", "said"), [
    (lambda r: r.feedback("r1", approved=True, comment="ok\x00bad"),
     "comment must not contain a NUL character"),
    (lambda r: r.feedback("r1", score=0.5, comment="ok\ud800"),
     "comment holds a lone surrogate"),
    (lambda r: r.review("a", "t", True, comment="ok\x00bad"),
     "comment must not contain a NUL character"),
    (lambda r: r.review("a", "t", True, comment=5), "comment must be a string, got int"),
    (lambda r: r.review("a", "t", "false"), "approved must be True or False, got str"),
    (lambda r: r.record(agent_id="a\ud800", task_type="t", success=True),
     "agent_id must not contain a lone surrogate"),
    (lambda r: r.record(agent_id="a", task_type=" ", success=True),
     "task_type must not be empty (it is only white space)"),
    (lambda r: r.select("\u3000"), "task_type must not be empty"),
])
def test_text_people_give_is_refused_naming_the_field(url: str, call, said: str) -> None:
    with AgentRouter(["a"], store=url) as router, pytest.raises((ValueError, TypeError)) as bad:
        call(router)
    assert said in str(bad.value) and "\n" not in str(bad.value)
    reopened_intact(url)


def test_the_store_refuses_such_text_on_any_query(url: str) -> None:
    with Store(url) as store:
        with pytest.raises(UnstorableText, match=r"row\.note must not contain a NUL"):
            store.run("CREATE note CONTENT $row;", {"row": {"note": "a\x00b"}})
        with pytest.raises(UnstorableText, match=r"names\[1\] holds '\\ud800'"):
            store.run("CREATE note CONTENT { names: $names };", {"names": ["a", "\ud800"]})
        assert store.run("SELECT * FROM note;") == [[]]
    reopened_intact(url)


def test_a_hand_off_holding_such_text_is_kept_with_replacement_characters(url: str) -> None:
    with AgentRouter(["a"], store=url) as router:
        outcome = TransferDispatcher(store=router.store).dispatch(
            TransferRequest(reason="why\x00not", input="query\ud800", task_type="t"))
        assert outcome.stored and outcome.pending
    with Store(url) as store:
        (row,) = store.repository(HandoffRepository).pending()
        assert row["reason"] == "why\ufffdnot"
        assert row["request"]["input"] == "query\ufffd"
        assert row["request"]["request_id"] == outcome.request.request_id
    reopened_intact(url)
