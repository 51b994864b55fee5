"""Where a store lives: parse and normalise store URLs.

- ``surrealkv://PATH``: embedded, on disk (the default, ``.trustroute/db`` in the working
  directory). Relative paths are resolved to absolute ones so a lock file names one place;
  a leading ``~`` is the home folder (a shell leaves ``surrealkv://~/db`` as it is).
- ``mem://``: embedded, in memory (tests, replays).
- ``ws://``, ``wss://``, ``http://``, ``https://``: a SurrealDB server, shared by
  processes and machines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from trustroute.profiles.store.errors import InvalidStoreURL

DEFAULT_STORE_URL = "surrealkv://.trustroute/db"
REMOTE_SCHEMES = ("ws", "wss", "http", "https")
# ``scheme:`` (any number of slashes, so a mistyped ``ws:/`` too), then the user:password
# part up to the last ``@`` before a slash, a blank or a quote.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*:/*)[^\s/'\"]*@")


def redact_credentials(text: str) -> str:
    """``text`` with the user:password part of every URL in it replaced by ``***``.

    Also for URLs that do not parse (``ws:/root:pw@host``), since those are the ones
    quoted in error messages.
    """
    return _USERINFO.sub(r"\1***@", text)


def _quoted(url: object) -> str:
    """A bad URL for its error message: everything from the scheme to its last ``@`` is
    hidden, whatever it holds (a password may contain ``/`` or blanks)."""
    if not isinstance(url, str) or "@" not in url:
        return repr(url)
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/*", url)
    return repr(f"{scheme.group(0) if scheme else ''}***@{url.rsplit('@', 1)[1]}")


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A parsed store URL: ``url`` is what the SDK is given."""

    scheme: str
    url: str
    path: Path | None = None

    @property
    def is_remote(self) -> bool:
        """True for a SurrealDB server (needs retries and credentials)."""
        return self.scheme in REMOTE_SCHEMES

    @property
    def is_on_disk(self) -> bool:
        """True for an embedded store with files (needs the process lock)."""
        return self.path is not None

    def __repr__(self) -> str:
        return (f"StoreLocation(scheme={self.scheme!r}, url={self.redacted()!r}, "
                f"path={self.path!r})")

    def redacted(self) -> str:
        """The URL without any user:password part, safe for messages and logs."""
        return redact_credentials(self.url)


def parse_store_url(url: str | None, *, base_dir: Path | None = None) -> StoreLocation:
    """Validate ``url`` and return its location; None means the default store."""
    url = DEFAULT_STORE_URL if url is None else url
    if not isinstance(url, str) or "://" not in url:
        raise InvalidStoreURL(
            f"store URL {_quoted(url)} must look like surrealkv://PATH, mem:// or ws://HOST:PORT"
        )
    if "\x00" in url:  # no path or host can hold one
        raise InvalidStoreURL(f"store URL {_quoted(url)} holds a NUL character")
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("mem", "memory"):
        return StoreLocation("mem", "mem://")
    if scheme in REMOTE_SCHEMES:
        host = rest.split("/", 1)[0].rpartition("@")[2]  # after any user:password@
        if not host:
            raise InvalidStoreURL(f"store URL {_quoted(url)} names no server host")
        try:  # a port past 65535, or not a number; a '[' that no ']' closes
            _ = urlsplit(f"{scheme}://{host}").port  # reading the property checks it
        except ValueError as exc:
            problem = str(exc)
            raise InvalidStoreURL(f"store URL {_quoted(url)}: "
                                  f"{problem[:1].lower()}{problem[1:]}") from None
        # the SDK appends /rpc to the URL as given: ws://host:8000/ would ask for //rpc
        return StoreLocation(scheme, url.rstrip("/"))
    if scheme in ("surrealkv", "file"):  # file:// is the same engine; this SDK has no other
        if not rest:
            raise InvalidStoreURL(f"store URL {_quoted(url)} names no path")
        try:
            path = Path(rest).expanduser()
        except RuntimeError:  # ~name of no user here
            raise InvalidStoreURL(f"store URL {_quoted(url)}: no home folder for "
                                  f"{rest.split('/', 1)[0]}") from None
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        path = path.resolve()
        return StoreLocation(scheme, f"{scheme}://{path}", path)
    raise InvalidStoreURL(
        f"store URL scheme {scheme!r} is not supported; use surrealkv://, mem://, ws://, "
        "wss://, http:// or https://")
