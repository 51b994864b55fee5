"""Shared CLI plumbing: the click group, opening a router, errors as one line."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import tempfile
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError
from rich.console import Console

from trustroute.profiles.records import iso_z
from trustroute.profiles.store import Store, StoreError, StoreLockedError, parse_store_url
from trustroute.profiles.store.snapshot import copy_latest
from trustroute.profiles.validation import describe_validation_error
from trustroute.router.cli.text import shown
from trustroute.router.config import RouterConfig, load_config
from trustroute.router.config.secrets import mask_credentials
from trustroute.router.errors import RouterError
from trustroute.router.router import AgentRouter
from trustroute.router.strategies import available_strategies

# Nothing is auto-highlighted: a line's colours are the markup it gives. No :name: becomes
# an emoji: names are user data, and an agent called :smile: is shown as written.
console = Console(highlight=False, emoji=False)
err_console = Console(stderr=True, highlight=False, emoji=False)

DEFAULT_CONFIG = Path("router.yaml")
# Credentials of the configs this command loaded: no error line shows them.
_loaded_secrets: set[str] = set()


class CliError(Exception):
    """A user-facing error raised by a command."""


# Errors a user can cause; they print as one line, exit code 2. ValueError covers
# ConfigError and pydantic's ValidationError.
EXPECTED_ERRORS = (CliError, StoreError, RouterError, ValueError, OSError)
#: ``--debug``: an error's traceback is printed after its line.
DEBUG: ContextVar[bool] = ContextVar("trustroute_cli_debug", default=False)


def _debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    DEBUG.set(value)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trustroute")
@click.option("--debug", is_flag=True, envvar="TRUSTROUTE_DEBUG", expose_value=False,
              is_eager=True, callback=_debug,
              help="On an error, print its traceback too (for a bug report).")
def cli() -> None:
    """Route each task to the agent most likely to do it well, and learn from outcomes.

    Start with `trustroute init` (writes router.yaml), then `trustroute demo`.
    """


def _masked(text: str) -> str:
    return mask_credentials(text, {*_loaded_secrets, os.environ.get("TRUSTROUTE_DB_PASS", "")})


def _one_line(label: str, message: str) -> None:
    err_console.print(f"{label} {shown(_masked(' '.join(message.split())))}", soft_wrap=True)


def show_error(message: str, exc: BaseException | None = None) -> None:
    """Print ``error: message`` on stderr as exactly one line, credentials masked; under
    ``--debug``, ``exc``'s traceback follows (masked too)."""
    _one_line("[bold red]error:[/]", clip_quoted(message))
    if exc is not None and DEBUG.get():
        err_console.print(_masked("".join(traceback.format_exception(exc))).rstrip(),
                          markup=False, soft_wrap=True)


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
    """``warnings.showwarning`` while a command runs: ``warning: message``, one line."""
    _one_line("[yellow]warning:[/]", str(message))


class WarningLines(logging.Handler):
    """trustroute's own log records while a command runs: one ``warning:`` line each."""

    def emit(self, record: logging.LogRecord) -> None:
        _one_line("[yellow]warning:[/]", record.getMessage())


# a value quoted in an error ('...'): no blank in it (prose between two apostrophes has
# some), and too long to read whole
_LONG_QUOTED = re.compile(r"'([^'\s]{201,})'")


def clip_quoted(message: str) -> str:
    """``message`` with each quoted value over 200 characters (no path is that long) cut
    to its first 40 and its length: ``--runs 999...`` of 5,000 digits, or an unknown
    agent of 5,000 characters, was echoed whole."""
    return _LONG_QUOTED.sub(
        lambda m: f"'{m.group(1)[:40]}...' ({len(m.group(1)):,} characters)", message)


def no_folder(folder: Path) -> str:
    """Why nothing can be written in ``folder``: a file is in the way, or it is missing."""
    if folder.exists() and not folder.is_dir():
        return f"{folder} is a file, not a folder"
    return f"the folder {folder} does not exist"


def exclusive(**given: bool) -> str | None:
    """The option given among mutually exclusive ones (``--name``), None when none is;
    two or more are a usage error (exit 2) raised before anything is done."""
    names = [f"--{name.replace('_', '-')}" for name, on in given.items() if on]
    if len(names) > 1:
        raise click.UsageError(f"{', '.join(names[:-1])} and {names[-1]} contradict each "
                               "other; give one", ctx=click.get_current_context(silent=True))
    return names[0] if names else None


def run_cli(argv: list[str]) -> int:
    """Run the group; expected errors become one line on stderr, never a traceback.

    Exit codes: 0 success, 1 aborted, 2 bad input (usage, config, data, store),
    130 interrupted. Warnings, and trustroute's log records of level WARNING and above,
    are printed as one ``warning:`` line each.
    """
    logs = logging.getLogger("trustroute")
    lines = WarningLines(logging.WARNING)
    DEBUG.set(False)  # until --debug says otherwise
    with warnings.catch_warnings():
        warnings.showwarning = show_warning
        logs.addHandler(lines)
        try:
            cli.main(args=argv, prog_name="trustroute", standalone_mode=False)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `trustroute`: just help
            click.echo(exc.ctx.get_help() if exc.ctx else "")
            return 0
        except click.exceptions.Exit as exc:
            return int(exc.exit_code or 0)
        except click.ClickException as exc:
            ctx = exc.ctx if isinstance(exc, click.UsageError) else None
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            show_error(f"{exc.format_message()}{hint}")
            return exc.exit_code
        except click.exceptions.Abort as exc:  # click's form of Ctrl-C, or a declined prompt
            interrupted = isinstance(exc.__cause__, KeyboardInterrupt)
            err_console.print("interrupted" if interrupted else "aborted")
            return 130 if interrupted else 1
        except ValidationError as exc:  # e.g. a record field out of range
            show_error(describe_validation_error(exc), exc)
            return 2
        except EXPECTED_ERRORS as exc:
            show_error(str(exc).strip() or type(exc).__name__, exc)
            return 2
        except RecursionError as exc:  # input nested past every parser's limit
            show_error("input nested too deeply to process", exc)
            return 2
        except KeyboardInterrupt:
            err_console.print("interrupted")
            return 130
        finally:
            logs.removeHandler(lines)
        return 0


def load_router_config(config: Path | None, store: str | None) -> RouterConfig:
    """The config named by --config, ./router.yaml when present, else defaults (with a
    warning when a folder above has a router.yaml: a command run from a project's
    subfolder would otherwise make a second store there without a word)."""
    if config is None and DEFAULT_CONFIG.exists():
        config = DEFAULT_CONFIG
    elif config is None and (above := config_above()) is not None:
        where = "" if store else ", a store in ./.trustroute"
        warnings.warn(f"no {DEFAULT_CONFIG} here, so the defaults are used (no agents"
                      f"{where}), though {above} exists: run from its folder or pass -c "
                      f"{above}", stacklevel=2)
    cfg = RouterConfig() if config is None else load_config(config)
    if store is not None:
        cfg.store = cfg.store.model_copy(update={"url": store})
        here = parse_store_url(store)  # a path on the command line: the shell's, cwd
        if config is not None and here.path is not None and here.path != parse_store_url(
                store, base_dir=config.resolve().parent).path:
            warnings.warn(f"--store {store} is relative to the working directory "
                          f"({here.path}), not to the folder of {config} as a store in "
                          "it would be", stacklevel=2)
    # a command is not the app: it leaves sweeping pending hand-offs to the app (or to
    # `handoffs --retry`), so a read does not deliver, nor wait for a receiver at exit
    cfg.handoff = cfg.handoff.model_copy(update={"dispatch_retry_interval_s": 0})
    _loaded_secrets.update(cfg.secrets)
    return cfg


def config_above() -> Path | None:
    """The nearest ``router.yaml`` in a folder above the working one (relative to it),
    or None."""
    here = Path.cwd()
    found = next((folder / DEFAULT_CONFIG for folder in here.parents
                  if (folder / DEFAULT_CONFIG).is_file()), None)
    return None if found is None else Path(os.path.relpath(found, here))


#: the commands that show a running app's snapshot when it holds the embedded store
READ_COMMANDS = "profiles, trust, report, handoffs, calibration, route"


def not_waiting(settings: RouterConfig) -> RouterConfig:
    """``settings`` whose store does not wait for another process's lock."""
    return settings.model_copy(update={"store": settings.store.model_copy(
        update={"lock_wait_s": 0.0})})


def open_router(config: Path | None, store: str | None, settings: RouterConfig | None = None,
                *, throwaway: bool = False, **overrides: Any) -> AgentRouter:
    """Build the router the user's options describe (``settings``, when already loaded),
    for a command that writes: an embedded store held by another process is an error
    saying that writes need it. On ``mem://`` what it writes is gone when the command
    ends, which a warning says (unless the command is a ``throwaway`` run: the demo)."""
    settings = settings or load_router_config(config, store)
    if not throwaway and parse_store_url(settings.store.url).scheme == "mem":
        warnings.warn("the store is mem:// (in memory): what this command writes is gone "
                      "when it ends; give a surrealkv:// or ws:// store to keep it",
                      stacklevel=2)
    if "lock_wait_s" not in settings.store.model_fields_set:  # a held store: say so now
        settings = not_waiting(settings)
    try:
        return settings.build_router(**overrides)
    except StoreLockedError as exc:
        ctx = click.get_current_context(silent=True)
        command = ctx.command_path if ctx is not None else "this command"
        raise CliError(f"{exc}. `{command}` writes to the store, which needs the store's "
                       "lock: run it when that process has stopped, or through it; the read "
                       f"commands ({READ_COMMANDS}) show that process's latest snapshot") \
            from None


#: stores opened on a snapshot copy -> how commands name them (the app's store, as of)
_SNAPSHOT_LABELS: weakref.WeakKeyDictionary[Store, str] = weakref.WeakKeyDictionary()


def store_label(router: AgentRouter) -> str:
    """How a command names the store it read: its URL, or for a snapshot the app's
    store URL and the moment the snapshot holds it as of."""
    return _SNAPSHOT_LABELS.get(router.store, router.store.url)


@contextmanager
def open_reader(config: Path | None, store: str | None, settings: RouterConfig | None = None,
                *, must_exist: bool = False, **overrides: Any) -> Iterator[AgentRouter]:
    """The router of a command that only reads. When another process (a running app)
    holds the embedded store, a private copy of the snapshot it writes beside the store
    (``store.snapshot_interval_s``) is opened instead, and stderr says as of when. An
    embedded path that holds no store reads as an empty store, stderr says so, and
    nothing is created there (a mistyped --store must not leave a store, or files in a
    folder, behind); ``must_exist``: it is an error instead."""
    settings = settings or load_router_config(config, store)
    settings = not_waiting(settings)  # held: read the holder's snapshot at once
    location = parse_store_url(settings.store.url)
    if location.path is not None and not location.path.exists():
        if must_exist:
            raise CliError(f"there is no store at {location.redacted()} (nothing was ever "
                           "recorded there: check --store or the config's store)")
        err_console.print(f"note: there is no store at {shown(location.redacted())} yet: "
                          "read as empty, nothing is created there", soft_wrap=True)
        empty = settings.model_copy(update={"store": settings.store.model_copy(
            update={"url": "mem://"})})
        with empty.build_router(**overrides) as router:
            _SNAPSHOT_LABELS[router.store] = location.redacted()
            yield router
        return
    try:
        router = settings.build_router(**overrides)
    except StoreLockedError as exc:
        with tempfile.TemporaryDirectory(prefix="trustroute-snapshot-") as tmp:
            copy = Path(tmp, "db")
            found = copy_latest(location.path, copy) if location.path else None
            if found is None:
                raise CliError(
                    f"{exc}; it has written no snapshot yet to read instead (the first "
                    f"comes store.snapshot_interval_s = "
                    f"{settings.store.snapshot_interval_s:g} s after it opened the store; "
                    "0 turns them off)") from None
            err_console.print(f"note: {shown(location.redacted())} is open in process "
                              f"{found.pid}: showing its snapshot as of {found.as_of_text} "
                              "(read-only)", soft_wrap=True)
            snapshot = settings.model_copy(update={"store": settings.store.model_copy(
                update={"url": f"surrealkv://{copy}", "snapshot_interval_s": 0})})
            with snapshot.build_router(**overrides) as router:
                _SNAPSHOT_LABELS[router.store] = (f"{location.redacted()} (snapshot as of "
                                                  f"{found.as_of_text})")
                yield router
        return
    with router:
        yield router


def utc_time(ctx: click.Context, param: click.Parameter, text: str | None) -> datetime | None:
    """Option callback: ISO date/time text as an aware UTC datetime (UTC unless it names a
    zone; a date means its midnight); errors name the option."""
    if text is None:
        return None
    option = param.opts[0]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"{option}: {text!r} is not an ISO date/time (e.g. 2025-03-01 or "
                       "2025-03-01T12:00:00+00:00)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise CliError(f"{option}: {text!r} is out of range in UTC") from None


def finite(data: Any) -> Any:
    """``data`` with NaN and infinities as None: JSON has no such numbers, and null says
    "no value" (a mean over nothing, a percentage of zero); times as ISO 8601 UTC ``Z``."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, datetime):  # one format everywhere: ISO 8601, UTC, Z
        return iso_z(data) if data.tzinfo is not None else data.isoformat()
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [finite(value) for value in data]
    return data


def print_json(data: Any) -> None:
    """Machine-readable output on stdout: strict JSON (non-finite numbers are null)."""
    sys.stdout.write(json.dumps(finite(data), indent=2, default=str, allow_nan=False) + "\n")


F = TypeVar("F", bound=Callable[..., Any])


def router_options(func: F) -> F:
    """Add --config and --store to a command."""
    func = click.option("--store", "-s", default=None, metavar="URL",
                        help="Store URL, overriding the config (surrealkv://PATH, mem://, "
                             "ws://HOST:PORT).")(func)
    return click.option("--config", "-c", "config", default=None,
                        type=click.Path(path_type=Path, dir_okay=False),
                        help="Router config (YAML/TOML/JSON); default ./router.yaml if "
                             "present.")(func)


# --strategy NAME (see ``strategy_overrides``)
strategy_option = click.option(
    "--strategy", default=None, metavar="NAME",
    help=f"Route with this strategy instead of the config's "
         f"({', '.join(available_strategies())}).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def strategy_overrides(strategy: str | None) -> dict[str, Any]:
    """Router overrides for --strategy: the config's strategy_params belong to the
    config's strategy, so another strategy starts from its own defaults."""
    return {} if strategy is None else {"strategy": strategy, "strategy_params": {}}
