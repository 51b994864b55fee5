"""A config naming a calibration the store does not hold fails with one line that says how
to create it (real embedded SurrealDB, a real LangChain vector store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run
from handoff_helpers import faq_store
from langchain_core.runnables import RunnableLambda
from test_handoff_cli import write_examples

from trustroute.integrations.langchain.handoff import HandoffRunnable
from trustroute.profiles.store import Store
from trustroute.profiles.store.handoffs import HandoffRepository
from trustroute.router.config import load_config
from trustroute.router.handoff.confidence import CalibrationNotFound, RetrievalConfidence


def test_a_missing_calibration_is_one_line_saying_how_to_create_it(
    tmp_path: Path, kv_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "router.yaml"
    config.write_text(f"store: {kv_url}\nagents: [a]\nhandoff: {{calibration: kb}}\n",
                      encoding="utf-8")
    with (
        load_config(config).build_router() as router,
        pytest.raises(CalibrationNotFound) as info,  # what an app's worker start does
    ):
        HandoffRunnable(faq_store(), RunnableLambda(lambda x: "answer"), router=router)
    text = str(info.value)
    assert "\n" not in text and isinstance(info.value, KeyError)
    assert text.startswith("handoff.calibration: no saved hand-off calibration named 'kb'")
    assert "trustroute calibrate-handoff --name kb" in text
    with Store(kv_url) as store:  # nothing was stored on the way
        assert store.repository(HandoffRepository).load_calibration("kb") is None
        with pytest.raises(KeyError, match=r"named 'kb'.*calibrate-handoff --name kb"):
            RetrievalConfidence.load(store, "kb")
    # following the advice (the config already names kb) makes the app start
    examples = write_examples(tmp_path / "labelled.jsonl")
    done = run(capsys, "calibrate-handoff", "--name", "kb", str(examples), "-c", str(config))
    assert done.code == 0, done.err
    with load_config(config).build_router() as router:
        rag = HandoffRunnable(faq_store(), RunnableLambda(lambda x: "answer"), router=router)
    assert rag.confidence.calibration is not None
