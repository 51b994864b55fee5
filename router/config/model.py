"""The router config schema: every key a config file may hold, and nothing else.

Unknown keys are rejected (``extra="forbid"``) so a typo is an error, not a silently
ignored setting. Sections added by later features live in their own modules and are
attached to ``RouterConfig`` here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from trustroute.profiles.profile import ProfileSettings
from trustroute.profiles.store.errors import InvalidStoreURL
from trustroute.profiles.store.location import parse_store_url
from trustroute.profiles.store.settings import StoreSettings
from trustroute.profiles.validation import NumbersNotBools, describe_validation_error
from trustroute.router.agents import AgentSpec
from trustroute.router.config.loader import ConfigError, read_mapping
from trustroute.router.config.secrets import mask_credentials, secret_values
from trustroute.router.errors import RouterError
from trustroute.router.feedback.policy import FeedbackPolicy
from trustroute.router.handoff.settings import HandoffSection
from trustroute.router.handoff.transfer.config import HookSpec, build_dispatcher
from trustroute.router.limits import LimitSettings
from trustroute.router.router import AgentRouter, UnknownAgents
from trustroute.router.strategies import DEFAULT_STRATEGY, available_strategies, make_strategy
from trustroute.router.trust.abstention import AbstentionPolicy
from trustroute.router.trust.options import TrustOptions


class Section(NumbersNotBools):
    """Base of every config section: strict about unknown keys."""

    model_config = ConfigDict(extra="forbid")


class StrategySection(Section):
    """Which strategy ranks candidates, and its parameters."""

    name: str = DEFAULT_STRATEGY
    params: dict[str, Any] = Field(default_factory=dict)
    exploit_only: bool = False

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        known = available_strategies()
        if value not in known:
            raise ValueError(f"unknown strategy {value!r}; available: {', '.join(known)}")
        return value


class RouterConfig(Section):
    """A whole router config file."""

    store: StoreSettings = Field(default_factory=StoreSettings)
    agents: list[AgentSpec] = Field(default_factory=list)
    strategy: StrategySection = Field(default_factory=StrategySection)
    profiles: ProfileSettings = Field(default_factory=ProfileSettings)
    seed: int | None = Field(default=None, ge=0)
    #: record() of an agent not listed under ``agents``: warn, error or allow.
    unknown_agents: UnknownAgents = "warn"
    handoff: HandoffSection = Field(default_factory=HandoffSection)
    hooks: list[HookSpec] = Field(default_factory=list)
    trust: TrustOptions = Field(default_factory=TrustOptions)
    abstention: AbstentionPolicy = Field(default_factory=AbstentionPolicy)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    #: How late verdicts become quality: wait_s, default, keys (docs/feedback.md).
    feedback: FeedbackPolicy = Field(default_factory=FeedbackPolicy)

    # The file this config was read from (None when built in code); names it in errors.
    _source: Path | None = PrivateAttr(default=None)
    # Credentials the file holds (see ``secrets``), masked in every message.
    _secrets: frozenset[str] = PrivateAttr(default=frozenset())

    @property
    def source(self) -> Path | None:
        """The config file this was loaded from, if any."""
        return self._source

    @property
    def secrets(self) -> frozenset[str]:
        """The credentials the file holds: values of secret keys (``store.password``) and
        ``${VAR}`` values substituted into a URL's user:password. Error messages mask
        them (``router.config.secrets.mask_credentials``)."""
        return self._secrets | secret_values(self.store.model_dump())

    @field_validator("store", "strategy", mode="before")
    @classmethod
    def _shorthand(cls, value: Any, info: ValidationInfo) -> Any:
        """``store: URL`` and ``strategy: NAME`` (an agent may be a bare id too: AgentSpec)."""
        key = "url" if info.field_name == "store" else "name"
        return {key: value} if isinstance(value, str) else value

    @field_validator("agents")
    @classmethod
    def _unique_agents(cls, value: list[AgentSpec]) -> list[AgentSpec]:
        twice = [agent for agent, n in Counter(spec.id for spec in value).items() if n > 1]
        if twice:
            raise ValueError(f"agent {twice[0]!r} is listed twice")
        return value

    def without_handoffs(self) -> RouterConfig:
        """This config for decisions that reach nobody (a preview, a simulation): an
        abstention routes anyway, its decision still saying it abstained, and no hook is
        built, so no hand-off is stored or delivered to a person."""
        return self.model_copy(update={
            "hooks": [],
            "abstention": self.abstention.model_copy(update={"on_abstain": "route_anyway"})})

    def build_router(self, **overrides: Any) -> AgentRouter:
        """An AgentRouter configured by this file (keyword overrides win)."""
        kwargs: dict[str, Any] = {
            "agents": self.agents,
            "store": self.store.url,
            "strategy": self.strategy.name,
            "strategy_params": self.strategy.params,
            "exploit_only": self.strategy.exploit_only,
            "seed": self.seed,
            "unknown_agents": self.unknown_agents,
            "settings": self.profiles,
            "store_options": self.store.model_dump(exclude={"url"}),
            "trust": self.trust,
            "abstention": self.abstention,
            "limits": self.limits,
            "feedback": self.feedback,
        }
        if "transfer" not in overrides:  # hand-off hooks; pending requests go to the store
            kwargs["transfer"] = build_dispatcher(self.hooks, self.handoff, source=self._source)
        if "strategy" not in overrides and "strategy_params" not in overrides:
            try:  # build the file's strategy once, so bad params are blamed on the file's key
                make_strategy(self.strategy.name, **self.strategy.params)
            except (RouterError, ValueError, TypeError) as exc:
                # the name was checked on load, so the file's strategy.params are at fault
                where = f"{self._source}: " if self._source else ""
                raise ConfigError(mask_credentials(f"{where}strategy.params: {exc}",
                                                   self.secrets)) from None
        kwargs.update(overrides)
        return AgentRouter(**kwargs)


def load_config(path: str | Path) -> RouterConfig:
    """Read and validate a config file; ConfigError names file, key path and problem.

    Relative embedded store paths (``surrealkv://data/db``) are resolved against the
    config file's directory, not the working directory, so a config means the same
    store wherever the command is run from.
    """
    secrets: set[str] = set()
    data = read_mapping(path, secrets)
    secrets |= secret_values(data)
    try:
        config = RouterConfig.model_validate(data)
    except ValidationError as exc:
        message = f"{path}: {describe_validation_error(exc, RouterConfig)}"
        raise ConfigError(mask_credentials(message, secrets)) from None
    try:
        location = parse_store_url(config.store.url, base_dir=Path(path).resolve().parent)
    except InvalidStoreURL as exc:
        raise ConfigError(mask_credentials(f"{path}: store.url: {exc}", secrets)) from None
    if location.is_on_disk:
        config.store = config.store.model_copy(update={"url": location.url})
    config._source = Path(path)
    config._secrets = frozenset(secrets)
    return config
