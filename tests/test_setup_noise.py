"""Set-up noise: the one SurrealDB SDK deprecation warning the test run hides is exactly
the one pyproject.toml names, and nothing else of the store warns."""

from __future__ import annotations

import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from surreal_fixtures import Target, serve

from trustroute import AgentRouter

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(name="surreal")
def surreal_fixture() -> Iterator[Target]:
    yield from serve()


def configured_filters() -> list[str]:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    return list(options["ini_options"]["filterwarnings"])


def apply(spec: str) -> None:
    """One ``action:message:category:module`` filter, as pytest reads it."""
    action, message, category, module = spec.split(":")
    assert category == "DeprecationWarning"
    warnings.filterwarnings(action, message=message, category=DeprecationWarning,  # type: ignore[arg-type]
                            module=module)


def server_warnings(surreal: Target, filters: list[str]) -> list[warnings.WarningMessage]:
    """Every warning of opening a router on the server, writing, reading and closing."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for spec in filters:
            apply(spec)
        with AgentRouter(["a", "b"], store=surreal.url, seed=0,
                         store_options=surreal.options()) as router:
            decision = router.select("code")
            router.record(decision, success=True, quality=0.8)
            assert router.profile(decision.agent_id, "code").executions_total >= 1
    return seen


def test_the_sdk_warns_only_what_the_filter_names(surreal: Target) -> None:
    raw = [w for w in server_warnings(surreal, []) if issubclass(w.category, DeprecationWarning)]
    # without the filter the SDK's deprecation shows (so the filter is not dead) ...
    assert raw, "the SDK no longer warns: drop the filter from pyproject.toml"
    assert all("surrealdb" in w.filename for w in raw), [str(w.message) for w in raw]
    # ... and with exactly the configured filters nothing at all is left
    left = server_warnings(surreal, configured_filters())
    assert not [w for w in left if issubclass(w.category, DeprecationWarning)], \
        [f"{w.filename}: {w.message}" for w in left]


def test_the_filter_hides_nothing_else() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for spec in configured_filters():
            apply(spec)
        warnings.warn("connect() must be used as a context manager", DeprecationWarning,
                      stacklevel=1)  # the same words from another module still show
        warnings.warn("something else", DeprecationWarning, stacklevel=1)
    assert len(seen) == 2
