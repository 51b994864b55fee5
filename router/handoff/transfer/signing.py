"""Standard Webhooks signatures (https://www.standardwebhooks.com/): the HMAC key of a
``whsec_`` secret, and the ``v1`` signature of one delivery.

Receivers verify with any Standard Webhooks library (the reference ``standardwebhooks``
package checks every attempt in the tests). The spec asks for keys of 24 to 64 random
bytes; a shorter one is refused, never echoed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

SECRET_PREFIX = "whsec_"
MIN_KEY_BYTES = 24


def secret_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret ``whsec_<base64>``; ValueError (never
    echoing the secret) when it is not one."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"must be written {SECRET_PREFIX}<base64 key>")
    encoded = secret[len(SECRET_PREFIX) :].strip()
    try:  # unpadded base64 is common; the key is what the padding completes
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"the part after {SECRET_PREFIX} is not base64") from None
    if not key:
        raise ValueError(f"the key after {SECRET_PREFIX} is empty")
    if len(key) < MIN_KEY_BYTES:  # the Standard Webhooks spec: 24 to 64 random bytes
        raise ValueError(f"the key after {SECRET_PREFIX} is {len(key)} bytes; at least "
                         f"{MIN_KEY_BYTES} random bytes are needed")
    return key


def sign(msg_id: str, timestamp: int, body: bytes, key: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
