"""``trustroute calibrate-handoff FILE.jsonl`` and ``trustroute handoffs``.

``calibrate-handoff`` learns retrieval-confidence thresholds from labelled examples (one
JSON object per line: ``{"scores": [...], "needs_human": true}``), prints them next to
the reference defaults and, with ``--name``, saves them in the store for the config's
``handoff: {calibration: NAME}``. ``handoffs`` lists transfer requests no hook could
deliver (and can retry or resolve them); ``--stats`` shows the hand-off rate per task
type from the decision log.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.table import Table

from trustroute.profiles.records import iso_z
from trustroute.profiles.store.handoffs import PENDING_STATUSES, HandoffRepository
from trustroute.router.cli.base import (
    CliError,
    cli,
    console,
    exclusive,
    json_option,
    load_router_config,
    open_reader,
    open_router,
    print_json,
    router_options,
    store_label,
)
from trustroute.router.cli.tables import age, compact_table, fitted, num, pct, plural
from trustroute.router.cli.text import shown
from trustroute.router.errors import did_you_mean
from trustroute.router.handoff.calibration import CalibrationReport
from trustroute.router.handoff.confidence import RetrievalConfidence
from trustroute.router.handoff.inputs import parse_examples
from trustroute.router.row_files import jsonl_rows

SHORT_ID = 8


def read_examples(path: Path) -> list[dict[str, Any]]:
    """The JSONL file's examples; errors name the file and line."""
    if path.suffix.lower() in (".csv", ".tsv"):
        raise CliError(f"{path}: calibrate-handoff reads JSONL (one JSON object per line, "
                       '{"scores": [...], "needs_human": true}), not CSV')
    examples = []
    for number, row in jsonl_rows(path):
        if missing := [key for key in ("scores", "needs_human") if key not in row]:
            typo = next(((key, hint) for key in row if (hint := did_you_mean(key, missing))),
                        None)
            said = f"unknown key {typo[0]!r}{typo[1]}" if typo else \
                f"got {json.dumps(row)[:60]}"
            raise CliError(f'{path}:{number}: expected an object with "scores" and '
                           f'"needs_human"; {said}')
        try:
            parse_examples([row])  # a bad value is named at its line
        except ValueError as exc:
            raise CliError(f"{path}:{number}: {str(exc).removeprefix('example 0: ')}") from None
        examples.append(row)
    if not examples:
        raise CliError(f"{path}: no examples (one JSON object per line)")
    return examples


def share(value: float) -> str:
    """A rate to one decimal, so that 99.6% is not shown as 100% (nor 0.4% as 0%)."""
    return f"{100.0 * value:.1f}%"


def calibration_table(base: RetrievalConfidence, tuned: RetrievalConfidence,
                      report: CalibrationReport) -> Table:
    """Reference thresholds and calibrated ones side by side, with their sample figures."""
    table = Table(title="hand-off calibration (figures on the calibration sample)", box=box.SIMPLE)
    table.add_column("")
    table.add_column("reference", justify="right")
    table.add_column("calibrated", justify="right")
    for name in ("score_threshold", "confidence_low_threshold", "confidence_high_threshold"):
        table.add_row(name, num(getattr(base.config, name), 4), num(getattr(tuned.config, name), 4))
    table.add_row("recall (needs-human transferred)", share(report.reference_recall),
                  share(report.recall))
    table.add_row("false transfers (covered transferred)",
                  share(report.reference_false_transfer_rate), share(report.false_transfer_rate))
    table.add_row("AUROC of confidence", "", num(report.auroc))
    return table


def _guarantee_line(report: CalibrationReport) -> str:
    if report.guarantee_met:
        cases = "case transfers" if report.required_transfers == 1 else "cases transfer"
        return (
            f"{plural(report.needs_human, 'needs-human example')} and {report.covered} "
            f"covered; the {report.required_transfers} lowest-confidence needs-human {cases}: "
            f"expected recall on new data {report.expected_recall:.1%} (target "
            f"{report.target_recall:.0%}), at least {report.recall_lower_bound:.1%} with "
            f"probability {report.recall_confidence:.0%}."
        )
    advice = ("No sample promises 100%: the expected recall of P cases is at most "
              "P/(P+1); aim below 1." if report.target_recall >= 1.0
              else "Label more needs-human cases.")
    return (
        f"only {plural(report.needs_human, 'needs-human example')}: too few to expect "
        f"recall >= {report.target_recall:.0%} on new data; every one of them transfers "
        f"(expected recall {report.expected_recall:.1%}). {advice}"
    )


@cli.command(name="calibrate-handoff")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--target-recall",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=0.9,
    show_default=True,
    help="Share of needs-human cases to hand over on new data (aimed at, with a lower "
         "bound reported beside it).",
)
@click.option(
    "--recall-confidence",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=0.95,
    show_default=True,
    help="Confidence of the recall lower bound reported beside the expected recall.",
)
@click.option("--name", default=None, metavar="NAME", help="Save the result in the store.")
@router_options
@json_option
def calibrate_handoff(
    file: Path,
    target_recall: float,
    recall_confidence: float,
    name: str | None,
    config: Path | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Learn hand-off thresholds from labelled retrieval scores in FILE (JSONL).

    Each line: {"scores": [0.82, 0.75, ...], "needs_human": false} -- the relevance
    scores your retriever returned for one query (relevance in [0, 1]), and whether a
    person should have taken it. Thresholds are chosen so that --target-recall of new
    needs-human cases is expected to transfer while as few covered ones as possible do.
    With --name the result is saved and a router config can use it as
    `handoff: {calibration: NAME}`.
    """
    examples = read_examples(file)
    settings = load_router_config(config, store)
    base = RetrievalConfidence(**settings.handoff.overrides())
    try:
        tuned = base.calibrate(
            examples, target_recall=target_recall, recall_confidence=recall_confidence
        )
    except ValueError as exc:
        raise CliError(f"{file}: {exc}") from None
    report = tuned.calibration
    assert report is not None
    if name is not None:
        with open_router(config, store, settings) as router:
            tuned.save(router.store, name)
            where = router.store.url
    if as_json:
        print_json(
            {
                "name": name,
                "settings": tuned.config.model_dump(),
                "report": report.as_dict(),
            }
        )
        return
    console.print(fitted(calibration_table(base, tuned, report), console))
    console.print(_guarantee_line(report))
    if name is not None:
        console.print(
            f"saved as {shown(name)!r} in {shown(where)}; use it with "
            f"`handoff: {{calibration: {shown(name)}}}` in the router config",
        )


#: The columns of ``pending_table`` whose text wraps (the others are never cut), and
#: the index of its free text, which narrows first.
PENDING_TEXT = frozenset({"hook", "task type", "reason / last error"})
PENDING_REASON = 5


def pending_table(rows: list[dict[str, Any]]) -> Table:
    """Stored transfer requests, oldest first (ids shortened; --json has everything),
    drawn as every table is (``tables.compact_table``, then ``fitted``)."""
    table = compact_table(("request", "age", "hook", "task type", "tries",
                           "reason / last error"), names=PENDING_TEXT)
    table.columns[0].justify = table.columns[1].justify = "left"
    for r in rows:
        table.add_row(
            shown(r["request_id"][:SHORT_ID]),
            age(r.get("created_at")),
            shown(r["hook"]),
            shown(r.get("task_type") or "—"),
            str(r.get("attempts", 0)),
            shown(f"{_state(r)}{clipped(r.get('reason'), 100)}") + "\n"
            + shown(clipped(r.get("error"), 160)),
        )
    return table


def clipped(text: str | None, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with "…" when cut (--json has it whole)."""
    text = text or ""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _state(row: dict[str, Any]) -> str:
    """``[delivered 2026-05-01T12:00:00Z] `` for a closed row ('' for a pending one)."""
    if row["status"] == "pending":
        return ""
    moment = row.get(f"{row['status']}_at")
    when = f" {moment.strftime('%Y-%m-%dT%H:%M:%SZ')}" if isinstance(moment, datetime) else ""
    return f"[{row['status']}{when}] "


def _unconfigured_line(unknown: dict[str, int]) -> str:
    """Pending rows of hooks the config no longer has: reported, never retried."""
    hooks = ", ".join(f"{shown(name)} ({count})" for name, count in unknown.items())
    return (f"{plural(sum(unknown.values()), 'hook row')} pending for hooks not in the config, "
            f"not retried: {hooks}; add the hook back, or --resolve them")


def resolve_id(repo: HandoffRepository, given: str) -> str:
    """The full request id for ``given`` (a whole id or a unique prefix of a stored one)."""
    ids = {r["request_id"] for r in repo.pending(None, limit=100_000)}
    if given in ids:
        return given
    matches = sorted(i for i in ids if i.startswith(given))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CliError(f"no stored hand-off request {given!r}")
    raise CliError(f"{given!r} matches {len(matches)} requests; give more of the id")


def stats_table(rows: list[dict[str, Any]], title: str | None = None) -> Table:
    """Hand-off rate per task type."""
    headers = ("task type", "decisions", "handed off", "rate", "mean confidence")
    table = compact_table(headers, title=title)
    for r in rows:
        table.add_row(
            shown(r["task_type"]),
            str(r["decisions"]),
            str(r["transferred"]),
            pct(r["handoff_rate"]),
            num(r["mean_confidence"]),
        )
    return table


@cli.command(name="handoffs")
@click.option(
    "--status",
    type=click.Choice([*PENDING_STATUSES, "all"]),
    default="pending",
    show_default=True,
    help="Which stored requests to list.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),  # the engine refuses a LIMIT past 64 bits
    default=100,
    show_default=True,
    help="Most requests listed (or re-delivered with --retry).",
)
@click.option("--stats", is_flag=True, help="Hand-off rate per task type instead.")
@click.option("--retry", is_flag=True, help="Re-deliver pending requests through the hooks.")
@click.option(
    "--resolve",
    default=None,
    metavar="REQUEST_ID",
    help="Mark a request handled (its id, or a unique prefix of it).",
)
@router_options
@json_option
def handoffs(
    status: str,
    limit: int,
    stats: bool,
    retry: bool,
    resolve: str | None,
    config: Path | None,
    store: str | None,
    as_json: bool,
) -> None:
    """List hand-offs to a person that no hook could deliver (stored as pending).

    A request whose hooks all failed after their retries is never lost: it waits here
    with the last error. --retry sends pending requests again through the configured
    hook of the same name (up to --limit of them; requests of hooks no longer configured
    are reported, not retried); --resolve REQUEST_ID closes one a person has taken care of.
    """
    exclusive(stats=stats, retry=retry, resolve=resolve is not None)
    with (open_router if retry or resolve is not None else open_reader)(config, store) as router:
        repo = router.store.repository(HandoffRepository)
        url = store_label(router)
        if stats:
            rows = repo.decision_stats()
            if as_json:
                print_json(rows)
            elif rows:
                console.print(f"[i]hand-off rate by task type in {shown(url)}[/]")  # not
                console.print(fitted(stats_table(rows), console))  # cut at its width
            else:
                console.print(f"no hand-off decisions recorded in {shown(url)} yet")
            return
        if resolve is not None:
            full = resolve_id(repo, resolve)
            changed = repo.set_status(full, "resolved")
            if as_json:
                print_json({"resolved": full, "hook_rows": changed})
            elif changed:
                console.print(f"resolved {shown(full)} ({plural(changed, 'hook row')})")
            else:
                console.print(f"{shown(full)} was resolved already; nothing changed")
            return
        if retry:
            if router.transfer is None or not router.transfer.hooks:
                raise CliError("no transfer hooks are configured (hooks: in the config); "
                               "pending rows of other hooks can only be --resolve'd")
            delivered, still = router.transfer.retry_pending(limit)
            unknown = router.transfer.unconfigured_pending()
            held, until = repo.held()
            if as_json:
                print_json({"delivered": delivered, "pending": still, "unconfigured": unknown,
                            "held": held, "held_until": until and iso_z(until)})
                return
            wait = (f" ({held} held until {iso_z(until)}, as their receiver asked: "
                    "Retry-After)") if held and until else ""
            console.print(f"{delivered} delivered, {still} still pending{wait}")
            if unknown:
                console.print(_unconfigured_line(unknown))
            return
        rows = repo.pending(None if status == "all" else status, limit)
    if as_json:
        print_json(rows)
    elif rows:
        console.print(f"{status} hand-offs in {shown(url)}")  # a line: wraps, is not cut
        console.print(fitted(pending_table(rows), console, text=PENDING_REASON))
    else:
        which = "" if status == "all" else f"{status} "  # not "no all hand-offs"
        console.print(f"no {which}hand-offs in {shown(url)}")
