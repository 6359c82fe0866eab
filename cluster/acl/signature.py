"""The credentials clients send, and how to check them. Pure.

Remoting (RocketMQ ACL 1.0; the C++ and Java clients alike): extFields ``AccessKey``, optional
``SecurityToken``, and ``Signature`` = padded Base64 of HmacSHA1(secretKey, content), where content
is the values of every other extField sorted by key, concatenated without separators, as UTF-8,
then the body. ``Signature`` and ``_UNIQUE_KEY_QUERY`` stay out of the content (RocketMQ's broker
leaves both out). gRPC (RocketMQ 5 clients): ``authorization: MQv2-HMAC-SHA1 Credential=<ak>,
SignedHeaders=x-mq-date-time, Signature=<hex HmacSHA1(sk, x-mq-date-time)>``. HTTP (the console,
the metrics endpoint): Basic with an account's accessKey and secretKey.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
from typing import NamedTuple

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_UNSIGNED = (SIGNATURE, UNIQUE_KEY_QUERY)
GRPC_ALGORITHM = "MQv2-HMAC-SHA1"
GRPC_DATE_TIME = "x-mq-date-time"
GRPC_DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"   # Java's yyyyMMdd'T'HHmmss'Z'
# The UTC offsets of the world's time zones. The Java and Python 5.x clients write their local wall
# time and label it Z (SimpleDateFormat and datetime.now() in the client's zone); the Node client
# writes UTC. A stamp is fresh when it lies within the skew of the proxy's clock read in any zone.
UTC_OFFSET_MIN_S, UTC_OFFSET_MAX_S = -12 * 3600, 14 * 3600


def remoting_content(fields: dict[str, str], body: bytes) -> bytes:
    """The bytes a remoting request's signature covers."""
    text = "".join(fields[key] for key in sorted(fields) if key not in _UNSIGNED)
    return text.encode() + (body or b"")


def remoting_signature(secret_key: str, content: bytes) -> str:
    return base64.b64encode(hmac.new(secret_key.encode(), content, hashlib.sha1).digest()).decode()


def remoting_signature_ok(secret_key: str, fields: dict[str, str], body: bytes) -> bool:
    given = fields.get(SIGNATURE)
    if not given:
        return False
    expected = remoting_signature(secret_key, remoting_content(fields, body))
    return hmac.compare_digest(expected.encode(), given.encode())


def sign_remoting(fields: dict[str, str], body: bytes, access_key: str, secret_key: str) -> dict[str, str]:
    """``fields`` with AccessKey and Signature added, as RocketMQ's clients sign a request."""
    signed = {key: value for key, value in fields.items() if key != SIGNATURE}
    signed[ACCESS_KEY] = access_key
    signed[SIGNATURE] = remoting_signature(secret_key, remoting_content(signed, body))
    return signed


class GrpcAuthorization(NamedTuple):
    access_key: str
    signed_headers: str
    signature: str


def parse_grpc_authorization(header: str) -> GrpcAuthorization:
    """The parts of a gRPC ``authorization`` value; ValueError naming what is wrong."""
    algorithm, _, rest = (header or "").strip().partition(" ")
    if algorithm != GRPC_ALGORITHM:
        raise ValueError(f"the authorization header's algorithm is {algorithm[:40]!r}, not {GRPC_ALGORITHM}")
    parts = {}
    for item in rest.split(","):
        key, sep, value = item.strip().partition("=")
        if sep:
            parts[key.strip()] = value.strip()
    missing = [name for name in ("Credential", "SignedHeaders", "Signature") if name not in parts]
    if missing:
        raise ValueError(f"the authorization header has no {', '.join(missing)}")
    return GrpcAuthorization(parts["Credential"], parts["SignedHeaders"], parts["Signature"])


def grpc_signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def grpc_signature_ok(secret_key: str, date_time: str, signature: str) -> bool:
    """Hex in either case (Java's clients send upper case, Python's lower case)."""
    return hmac.compare_digest(grpc_signature(secret_key, date_time).encode(), signature.strip().lower().encode())


def grpc_date_time_problem(date_time: str, now_s: float, skew_s: float) -> str | None:
    """Why a signed ``x-mq-date-time`` is not fresh at ``now_s`` (epoch seconds), or None."""
    try:
        if len(date_time) != 16:
            raise ValueError(date_time)
        stamp = datetime.datetime.strptime(date_time, GRPC_DATE_TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return f"{GRPC_DATE_TIME} {date_time[:40]!r} is not a date-time yyyyMMdd'T'HHmmss'Z'"
    ahead = stamp.timestamp() - now_s
    if UTC_OFFSET_MIN_S - skew_s <= ahead <= UTC_OFFSET_MAX_S + skew_s:
        return None
    now = datetime.datetime.fromtimestamp(now_s, datetime.timezone.utc).strftime(GRPC_DATE_TIME_FORMAT)
    return (f"{GRPC_DATE_TIME} {date_time} is more than {skew_s / 60:g} minutes away from the proxy's clock "
            f"({now}, read in any time zone from UTC-12 to UTC+14): clock skew, or a replayed request")


def grpc_authorization(access_key: str, secret_key: str, date_time: str) -> str:
    """The header a RocketMQ 5 client sends."""
    return (f"{GRPC_ALGORITHM} Credential={access_key}, SignedHeaders={GRPC_DATE_TIME}, "
            f"Signature={grpc_signature(secret_key, date_time)}")


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """``(user, password)`` of an HTTP ``Authorization: Basic`` value; None when it is not one."""
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (user, password) if sep else None
