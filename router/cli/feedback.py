"""``trustroute feedback | import-feedback``: verdicts on executions from the shell
(docs/feedback.md)."""

from __future__ import annotations

from pathlib import Path

import click

from trustroute.profiles.records import check_identifier, check_not_ahead, utc_now
from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    exclusive,
    json_option,
    open_router,
    print_json,
    router_options,
)
from trustroute.router.cli.tables import plural
from trustroute.router.cli.text import shown
from trustroute.router.errors import UnknownAgent, UnknownDecision
from trustroute.router.feedback import giving
from trustroute.router.feedback.langsmith import FeedbackRow, PairRow, read_rows
from trustroute.router.router import AgentRouter
from trustroute.router.trust.layer import pair_row
from trustroute.router.trust.scores import TrustScores


@cli.command(name="feedback")
@click.argument("ref")
@click.option("--approve", is_flag=True, help="The verdict: approved (quality 1.0).")
@click.option("--reject", is_flag=True, help="Or: rejected (quality 0.0).")
@click.option("--score", type=float, default=None, metavar="X",
              help="Or: a score on the key's scale ([0, 1] unless the config's "
                   "feedback.keys says otherwise).")
@click.option("--key", "-k", default="user", show_default=True,
              help="Who or what judged (a later verdict on the same key replaces this one).")
@click.option("--comment", "-m", default=None, help="Why (kept with the verdict).")
@click.option("--id", "feedback_id", default=None, metavar="ID",
              help="The verdict's id (default: a new one); the same id twice counts once.")
@router_options
@json_option
def feedback(ref: str, approve: bool, reject: bool, score: float | None, key: str,
             comment: str | None, feedback_id: str | None, config: Path | None,
             store: str | None, as_json: bool) -> None:
    """Give a verdict on the execution REF names: a decision id, a record id or a
    LangChain run id. It sets that execution's quality and counts in the human score."""
    given = exclusive(approve=approve, reject=reject, score=score is not None)
    if given is None:
        raise click.UsageError("say --approve, --reject or --score X",
                               ctx=click.get_current_context())
    approved = None if score is not None else approve
    with open_router(config, store) as router:
        row = FeedbackRow(0, feedback_id, ref, key, approved, score, comment, None)
        target, scores, given_id, new = _give(router, row)
    body = {"feedback_id": given_id, "stored": new, "ref": ref, "agent_id": target.agent_id,
            "task_type": target.task_type, "record_id": target.record_id, "key": key,
            "approved": approved, "score": score, **scores.as_dict()}
    if as_json:
        print_json(body)
        return
    what = "stored" if new else "already stored (same id)"
    console.print(f"verdict on {shown(target.agent_id)} / {shown(target.task_type)} "
                  f"{what}: human {scores.human:.3f} -> composite {scores.composite:.3f} "
                  f"([bold]{scores.tier}[/])")


@cli.command(name="import-feedback")
@click.argument("file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--skip-unknown", is_flag=True,
              help="Skip rows whose ref names no decision or execution here (default: "
                   "such a row stops the import before anything is written).")
@router_options
@json_option
def import_feedback(file: Path, skip_unknown: bool, config: Path | None, store: str | None,
                    as_json: bool) -> None:
    """Import verdicts from FILE: LangSmith's feedback format, JSONL or CSV.

    Columns: id (the feedback id), run_id (or decision_id or record_id), key, score (a
    number or true/false), value (used when score is empty), comment, created_at (ISO
    8601). Rows with kind review or signal (as `trustroute export --feedback` writes
    them) are reviews and signals of a pair: agent_id, task_type, approved or signal.
    The whole file is checked first (every row's verdict and ref); a bad row
    stops the import before anything is written, naming its line. Rows whose id is
    stored already, or repeated in the file, are skipped, so importing twice is safe.
    """
    rows = list(read_rows(file))
    with open_router(config, store) as router:
        todo, unknown = _check(router, file, rows, skip_unknown)
        stored = [row for row in todo if _give(router, row)[3]]
        url = router.store.url
    imported = len(stored)
    skipped = len(rows) - len(unknown) - imported
    kinds = {kind: sum(1 for row in stored if _kind(row) == kind)
             for kind in ("verdict", "review", "signal")}
    if as_json:
        print_json({"file": str(file), "store": url, "rows": len(rows), "imported": imported,
                    "verdicts": kinds["verdict"], "reviews": kinds["review"],
                    "signals": kinds["signal"], "duplicates_skipped": skipped,
                    "unknown_skipped": len(unknown)})
        return
    what = ", ".join(plural(n, kind) for kind, n in kinds.items() if n or kind == "verdict")
    console.print(f"imported {what} from {shown(str(file))} into "
                  f"{shown(url)} ({skipped} duplicate(s) skipped"
                  + (f", {len(unknown)} with an unknown ref" if unknown else "") + ")")


def _kind(row: FeedbackRow | PairRow) -> str:
    return "verdict" if isinstance(row, FeedbackRow) else row.kind


def _check(router: AgentRouter, file: Path, rows: list[FeedbackRow | PairRow],
           skip_unknown: bool
           ) -> tuple[list[FeedbackRow | PairRow], list[FeedbackRow | PairRow]]:
    """Every row checked before anything is written: (rows to give, rows skipped for an
    unknown ref). Repeated ids in the file are given once."""
    todo: list[FeedbackRow | PairRow] = []
    unknown: list[FeedbackRow | PairRow] = []
    seen: set[str | None] = set()
    for row in rows:
        try:
            if row.at is not None:  # a verdict from the future would stand for ever
                check_not_ahead(row.at, "created_at", router.settings.max_clock_skew_s)
            if isinstance(row, PairRow):
                _said(router, row)
            elif not _known(router, file, row, skip_unknown):
                unknown.append(row)
                continue
        except (ValueError, TypeError) as exc:
            raise CliError(f"{file}:{row.line}: {exc}") from None
        except UnknownAgent as exc:  # as `import` words it, at the row's line
            raise CliError(f"{file}:{row.line}: agent_id: {exc} (unknown_agents: error)"
                           ) from None
        if row.feedback_id is None or row.feedback_id not in seen:
            seen.add(row.feedback_id)
            todo.append(row)
    return todo, unknown


def _known(router: AgentRouter, file: Path, row: FeedbackRow, skip_unknown: bool) -> bool:
    """Check a verdict: False when its ref names nothing here and such rows are skipped."""
    giving.check_verdict(router.feedback_policy, row.approved, row.score, row.key,
                         row.comment, row.feedback_id)
    try:
        _target(router, row)
    except UnknownDecision:
        if not skip_unknown:
            raise CliError(f"{file}:{row.line}: unknown ref {row.ref!r} (no decision or "
                           "execution has it; --skip-unknown skips such rows)") from None
        return False
    return True


def _resolve(router: AgentRouter, ref: str) -> giving.Target:
    target = giving.resolve(ref, router.projection.feedback, router.store.executions,
                            router.trust_layer.decisions)
    router.check_agent(target.agent_id)
    return target


def _target(router: AgentRouter, row: FeedbackRow) -> giving.Target:
    """What a verdict row is about: its ref here, else (a decision this store never
    logged, exported with its pair) that pair, the verdict pending on the decision as
    ``router.feedback`` keeps one on a logged decision."""
    try:
        return _resolve(router, row.ref)
    except UnknownDecision:
        if row.pair is None:
            raise
    agent_id, task_type = (check_identifier(row.pair[0], "agent_id"),
                           check_identifier(row.pair[1], "task_type"))
    router.check_agent(agent_id)
    return giving.Target(agent_id, task_type, None, row.ref)


def _said(router: AgentRouter, row: PairRow) -> dict[str, object]:
    """The checked ``trust_feedback`` row of a review or signal read from a file."""
    router.check_agent(row.agent_id)
    if row.feedback_id is not None:
        check_identifier(row.feedback_id, "id")
    return pair_row(row.agent_id, row.task_type, row.kind, row.at or utc_now(),
                    approved=row.approved, signal=row.signal, comment=row.comment)


def _give(router: AgentRouter, row: FeedbackRow | PairRow
          ) -> tuple[giving.Target, TrustScores, str, bool]:
    """Store one verdict as ``router.feedback`` does (a review or signal as ``review``
    and ``signal`` do), at its own time; (what it was about, the pair's scores after,
    its id, whether this call stored it)."""
    if isinstance(row, PairRow):
        said_id = row.feedback_id or giving.new_feedback_id()
        scores, new = router.trust_layer.give(_said(router, row), said_id)
        return giving.Target(row.agent_id, row.task_type, None, None), scores, said_id, new
    giving.check_verdict(router.feedback_policy, row.approved, row.score, row.key,
                         row.comment, row.feedback_id)
    target = _target(router, row)
    verdict = giving.verdict_row(target, row.ref, row.approved, row.score, row.key,
                                 row.comment, row.at)
    feedback_id = row.feedback_id or giving.new_feedback_id()
    scores, new = router.trust_layer.give(verdict, feedback_id)
    return target, scores, feedback_id, new
