"""Who a connection to a SurrealDB server signs in as, and where that was given.

In this order (the first that names a user wins):

1. the store URL's ``user:password@`` part (``ws://root:secret@db:8000``,
   percent-encoded as URLs are: ``p%40ss`` is ``p@ss``); a URL with a user and no
   password (``ws://root@db:8000``) takes the password from 2 or 3;
2. ``store.username`` / ``store.password`` (the config, or ``store_options``);
3. the environment: ``TRUSTROUTE_DB_USER`` / ``TRUSTROUTE_DB_PASS``.

The URL comes first because it is the most specific: ``trustroute --store URL`` replaces
the config's URL, and a user who typed credentials into it means them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import unquote

from trustroute.profiles.store.location import StoreLocation
from trustroute.profiles.store.settings import StoreSettings

SETTINGS = "store.username / store.password"
ENVIRONMENT = "TRUSTROUTE_DB_USER / TRUSTROUTE_DB_PASS"
#: Where credentials can be given, for the error of a server that needs some.
WHERE = (f"a user:password@ in the store URL, {SETTINGS} (store_options, config) or the "
         f"environment variables {ENVIRONMENT}")


@dataclass(frozen=True, slots=True)
class Credentials:
    """The user and password to sign in with (None: none given) and their source."""

    username: str | None
    password: str | None = field(repr=False)
    source: str

    @classmethod
    def of(cls, location: StoreLocation, settings: StoreSettings) -> Credentials:
        """The credentials for ``location`` (see the module for the order)."""
        password = settings.password if settings.password is not None else os.environ.get(
            "TRUSTROUTE_DB_PASS")
        user, has_password, url_password = url_userinfo(location)
        if user:
            return cls(user, url_password if has_password else password,
                       "the store URL" if has_password else f"the store URL's user and the "
                       f"password of {SETTINGS} or {ENVIRONMENT}")
        if settings.username is not None or settings.password is not None:
            return cls(settings.username, settings.password, SETTINGS)
        return cls(os.environ.get("TRUSTROUTE_DB_USER"), password, ENVIRONMENT)


def url_userinfo(location: StoreLocation) -> tuple[str, bool, str]:
    """(user, whether a password is given, password) of a server URL's
    ``user:password@`` part, percent-decoded; ``("", False, "")`` without one."""
    if not location.is_remote:
        return "", False, ""
    authority = location.url.split("://", 1)[1].split("/", 1)[0]
    info, at, _ = authority.rpartition("@")
    if not at:
        return "", False, ""
    user, colon, password = info.partition(":")
    return unquote(user), bool(colon), unquote(password)


def sdk_url(location: StoreLocation) -> str:
    """The URL the SDK is given: as written, but for a user without a password, which
    is left out (the socket library refuses such a URL; the sign-in carries the user)."""
    user, has_password, _ = url_userinfo(location)
    if not user or has_password:
        return location.url
    scheme, rest = location.url.split("://", 1)
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"
