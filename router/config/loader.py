"""Reading config files: YAML, TOML or JSON, with ``${ENV_VAR}`` substitution.

Every error is one line that names the file, the key path and what was expected, e.g.
``router.yaml: agents.1.max_concurrent: expected a valid integer, got 'x'``, because
the person reading it has the file open and needs to know where to look, not a stack.

Substitution happens after parsing, inside string values only: ``${NAME}`` (error when
unset), ``${NAME:-default}`` (default when unset or empty, as in the shell) and
``$${NAME}`` for a literal ``${NAME}``. Values substituted into numbers or booleans are
converted by validation ("4" -> 4, "true" -> True).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

import yaml

from trustroute.profiles.store.location import redact_credentials
from trustroute.profiles.validation import is_secret_key, key_path
from trustroute.router.config.parsing import MAX_CONFIG_BYTES, ParseError, ValueProblem, parse

_ENV = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

FORMATS = {".yaml": "YAML", ".yml": "YAML", ".toml": "TOML", ".json": "JSON"}


class ConfigError(ValueError):
    """A config file that cannot be read or does not validate.

    The message never shows the user:password part of a URL (see ``secrets``).
    """

    def __init__(self, message: str) -> None:
        super().__init__(redact_credentials(message))


def substitute_env(value: Any, path: str | Path, where: tuple[Any, ...] = (),
                   secrets: set[str] | None = None) -> Any:
    """Replace ``${NAME}`` / ``${NAME:-default}`` in every string, recursively.

    ``secrets`` collects the substituted values that are credentials: those given to a
    secret key, and those placed before an ``@`` (a URL's user:password).
    """
    if isinstance(value, str):
        def repl(m: re.Match[str]) -> str:
            escaped, name, default = m.group(1), m.group(2), m.group(3)
            if escaped:
                return m.group(0)[1:]
            result = os.environ.get(name)
            if not result and default is not None:  # unset or empty, as in the shell
                result = default
            if result is None:
                raise ConfigError(f"{path}: {key_path(where)}: environment variable {name} "
                                  f"is not set (set it, or write ${{{name}:-default}})")
            if secrets is not None and (is_secret_key(where) or "@" in value[m.end():]):
                secrets.add(result)
            return result
        return _ENV.sub(repl, value)
    if isinstance(value, dict):
        return {k: substitute_env(v, path, (*where, k), secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, path, (*where, i), secrets) for i, v in enumerate(value)]
    return value


def _syntax_error(p: Path, fmt: str, exc: Exception) -> ConfigError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        detail = exc.problem or exc.context or "syntax error"
        return ConfigError(f"{p}: not valid YAML{where}: {detail}")
    if isinstance(exc, json.JSONDecodeError):
        return ConfigError(f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno}): "
                           f"{exc.msg}")
    detail = " ".join(str(exc).split())
    return ConfigError(f"{p}: not valid {fmt}: {detail}")


def _read_text(p: Path) -> str:
    """The file's text, refused unread past ``MAX_CONFIG_BYTES``."""
    try:
        with p.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found (create one with `trustroute init`)"
                          ) from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{p}: config file is larger than {MAX_CONFIG_BYTES:,} bytes; a "
                          "router config is a few kilobytes")
    try:  # a byte-order mark (Windows editors write one) is read past in every format
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte {exc.start})") from None


def read_mapping(path: str | Path, secrets: set[str] | None = None) -> dict[str, Any]:
    """Parse a config file by extension into a dict (env vars substituted).

    ``secrets`` collects substituted credentials (see ``substitute_env``).
    """
    p = Path(path)
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise ConfigError(f"{p}: unknown config format {p.suffix or '(no extension)'!r}; "
                          "use .yaml, .yml, .toml or .json")
    text = _read_text(p)
    try:  # an empty file is all defaults, in every format (JSON has no empty document)
        data = parse(text, fmt) if text.strip() else {}
    except ValueProblem as exc:  # parsed, but a value cannot be read: named at its key
        raise ConfigError(f"{p}: {exc}") from None
    except ParseError as exc:
        raise ConfigError(f"{p}: not valid {fmt}: {exc}") from None
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise _syntax_error(p, fmt, exc) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):  # (a key that is not a string is validation's to report)
        raise ConfigError(f"{p}: <root>: expected a mapping of keys, got "
                          f"{type(data).__name__}")
    return typing.cast(dict[str, Any], substitute_env(data, p, secrets=secrets))
