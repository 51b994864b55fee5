"""Your own strategy: an object behind the ``Strategy`` interface, or a factory
registered by name (docs/learning.md, "Your own strategy")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import WindowEntry
from trustroute.profiles.records import ExecutionRecord
from trustroute.router import AgentRouter
from trustroute.router.strategies import (
    AmendingStrategy,
    Arm,
    ArmScore,
    InvalidStrategyParams,
    PreparingStrategy,
    Strategy,
    StrategyContext,
    available_strategies,
    make_strategy,
    register_strategy,
)


class MostWins:
    """Picks the agent with the most successes on the task type; counts them itself."""

    name = "most_wins"

    def __init__(self, bonus: str = "") -> None:
        self.bonus = bonus  # an agent that starts one win ahead
        self.wins: Counter[tuple[str, str]] = Counter()
        self.resets = 0

    def score(self, arms: Sequence[Arm], ctx: StrategyContext) -> list[ArmScore]:
        return [ArmScore(score=self.wins[a.agent_id, ctx.task_type] + (a.agent_id == self.bonus),
                         reason="wins so far") for a in arms]

    def observe(self, record: ExecutionRecord, seq: int, book: ProfileBook) -> None:
        self.wins[record.agent_id, record.task_type] += record.success

    def reset(self, book: ProfileBook) -> None:
        self.resets += 1
        self.wins.clear()


class MostWinsAmending(MostWins):
    """The same, taking a changed verdict in place."""

    def __init__(self) -> None:
        super().__init__()
        self.amended: list[tuple[float | None, float | None]] = []

    def amend(self, agent_id: str, task_type: str, old: WindowEntry | None,
              new: WindowEntry | None, book: ProfileBook) -> None:
        self.amended.append((old and old.quality, new and new.quality))


def test_a_strategy_object_decides_and_learns_from_each_committed_record() -> None:
    strategy = MostWins()
    assert isinstance(strategy, Strategy) and not isinstance(strategy, AmendingStrategy)
    with AgentRouter(["a", "b"], store="mem://", strategy=strategy, seed=0) as router:
        for _ in range(3):
            router.record(agent_id="b", task_type="t", success=True)
        router.record(agent_id="a", task_type="t", success=False)
        decision = router.select("t")
        assert decision.agent_id == "b" and decision.strategy == "most_wins"
        assert strategy.wins == Counter({("b", "t"): 3})


def test_a_changed_verdict_is_amended_in_place_or_the_strategy_is_reset() -> None:
    plain, amending = MostWins(), MostWinsAmending()
    assert isinstance(amending, AmendingStrategy)
    assert not isinstance(amending, PreparingStrategy)
    for strategy in (plain, amending):
        with AgentRouter(["a"], store="mem://", strategy=strategy) as router:
            rec = router.record(agent_id="a", task_type="t", success=True, quality=0.9)
            resets = strategy.resets
            router.feedback(rec.record_id, approved=False)
            assert strategy.resets == resets + (strategy is plain)
    assert amending.amended and amending.amended[0][0] == pytest.approx(0.9)


def test_a_registered_factory_is_a_name_in_the_api_and_in_config_files(
        tmp_path: Path) -> None:
    register_strategy("most_wins", MostWins)
    assert "most_wins" in available_strategies()
    with AgentRouter(["a", "b"], store="mem://", strategy="most_wins",
                     strategy_params={"bonus": "a"}) as router:
        assert router.select("t").agent_id == "a"
    path = tmp_path / "router.yaml"
    path.write_text("agents: [a, b]\nstore: mem://\n"
                    "strategy: {name: most_wins, params: {bonus: b}}\n")
    with AgentRouter.from_config(path) as router:
        assert router.select("t").agent_id == "b"


def test_bad_parameters_are_named_and_a_factorys_own_type_error_is_not_blamed_on_them(
        ) -> None:
    register_strategy("most_wins", MostWins)
    with pytest.raises(InvalidStrategyParams, match=r"bad parameters for strategy 'most_wins'.*"
                                                      r"bonsu"):
        make_strategy("most_wins", bonsu="a")

    def broken(**params: object) -> MostWins:
        return MostWins(**params) + 1  # type: ignore[operator,arg-type]

    register_strategy("broken", broken)
    with pytest.raises(TypeError, match="unsupported operand") as caught:
        make_strategy("broken", bonus="a")
    assert type(caught.value) is TypeError
