"""Set-up noise: using a store against a server raises no deprecation warning (the store
opens the SDK's WebSocket itself with the current websockets call, profiles/store/wire.py),
so the test run needs no filter for them."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

from surreal_fixtures import Target

from trustroute import AgentRouter

ROOT = Path(__file__).resolve().parents[1]



def test_a_server_store_warns_nothing_deprecated(surreal: Target) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with AgentRouter(["a", "b"], store=surreal.url, seed=0,
                         store_options=surreal.options()) as router:
            decision = router.select("code")
            router.record(decision, success=True, quality=0.8)
            assert router.profile(decision.agent_id, "code").executions_total == 1
    deprecated = [f"{w.filename}:{w.lineno}: {w.message}" for w in seen
                  if issubclass(w.category, DeprecationWarning | PendingDeprecationWarning)]
    assert not deprecated


def test_the_test_run_hides_no_warning() -> None:
    # nothing is filtered in the pytest config: a warning that appears is seen
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "filterwarnings" not in options["ini_options"]
