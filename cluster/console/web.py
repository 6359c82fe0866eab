"""How a page is answered: its work runs on a worker thread (the Admin blocks), its errors become
an error page that names the cause (a form value, a missing topic, the broker's own reason), and
requests that could come from another site are refused.

The guard. A page of any site open in the same browser can send requests to 127.0.0.1, and a name
of the attacker's that resolves to 127.0.0.1 (DNS rebinding) makes them same-origin for the browser.
A console on loopback therefore answers only a Host header that names loopback by a literal:
``localhost``, a dotted quad of 127.0.0.0/8 or ``[::1]``, with or without a port; anything else
(``127.0.0.1.evil.example``, ``127.evil``, ``localhost.evil``) gets 403. A form posted from another
origin (cross-site request forgery) gets 403 too: its Origin, when sent, must be the Host the request
was sent to (a loopback literal on loopback), and a browser's Sec-Fetch-Site must say same-origin.
With access control (``ConsoleContext.access``) every request needs an admin account's HTTP Basic
credentials (401 without them, 403 for an account that is not admin), on loopback too unless the
cluster trusts loopback (``cluster up --console-trust-loopback``). A console listening beyond
loopback always asks for them and does not check the Host (the name its users reach it by is theirs
to choose): a rebound name gets no credentials from the browser."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import secrets
import threading
import time
import urllib.parse
from collections import OrderedDict
from functools import cached_property

from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse

from rocketbox.cluster.console.forms import FormError, iso_local
from rocketbox.cluster.console.settings import loopback_problem
from rocketbox.cluster.errors import BrokerError, ClientError, NoRouteError
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger("rocketbox.console")
_warn = RateLimitedLog(log, burst=10, interval_s=10.0)
TEMPLATES_DIR = os.path.join(os.path.dirname(__file__), "templates")
STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
# A form is a few fields and at most a test message's body.
MAX_BODY_BYTES = 256 * 1024
_PORT = re.compile(r"(:[0-9]{1,5})?")
_LENGTH = re.compile(r"[0-9]{1,12}")
# What a browser says of a request's origin that a form of the console itself may send.
_SAME_SITE_FETCHES = ("same-origin", "none")


class Flashes:
    """What an action did, kept for the page its POST redirects to (POST/redirect/GET): taken by the
    token in that page's URL, once, so reloading the page shows it without it and repeats nothing.
    At most ``limit`` are kept, each for ``ttl_s``: one never shown is forgotten."""

    def __init__(self, limit: int = 64, ttl_s: float = 300.0, clock=time.monotonic):
        self.limit, self.ttl_s, self.clock = limit, ttl_s, clock
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[float, dict]] = OrderedDict()

    def put(self, flash: dict) -> str:
        token = secrets.token_urlsafe(12)
        with self._lock:
            self._kept[token] = (self.clock(), flash)
            while len(self._kept) > self.limit:
                self._kept.popitem(last=False)
        return token

    def take(self, token: str | None) -> dict:
        with self._lock:
            kept = self._kept.pop(token, None) if token else None
        return kept[1] if kept is not None and self.clock() - kept[0] <= self.ttl_s else {}


def _human_bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def make_templates():
    """The pages' Jinja2 environment. Jinja2 (~25-35 ms of the web process's imports, which are on
    ``cluster up``'s path) loads with the first page, not at the start."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape
    from starlette.templating import Jinja2Templates
    env = Environment(loader=FileSystemLoader(TEMPLATES_DIR), autoescape=select_autoescape(["html"]))
    env.filters["when"] = iso_local
    env.filters["bytes"] = _human_bytes
    env.filters["q"] = lambda value: urllib.parse.quote(str(value), safe="")
    return Jinja2Templates(env=env)


def explain(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, title, message) for what a page's work raised."""
    if isinstance(exc, FormError):
        return 400, "Bad input", str(exc)
    if isinstance(exc, NoRouteError):
        return 404, "Not found", str(exc)
    if isinstance(exc, BrokerError):
        return 502, "Refused by the broker", str(exc)
    if isinstance(exc, (TransportError, ClientError)):
        return 504, "No answer", str(exc)
    if isinstance(exc, ValueError):   # the Admin checks names and values before sending
        return 400, "Bad input", str(exc)
    return 500, "Console error", f"{type(exc).__name__}: {exc} (the console's log has the details)"


def loopback_authority(authority: str) -> bool:
    """True for a Host (or an Origin's host[:port]) that names loopback by a literal: ``localhost``,
    a dotted quad of 127.0.0.0/8 or ``[::1]``, each with or without a port; never a DNS name."""
    authority = authority.lower()
    if authority.startswith("["):
        host, bracket, port = authority[1:].partition("]")
        if not bracket or "%" in host:
            return False
    else:
        host, colon, port = authority.partition(":")
        port = colon + port
    if not _PORT.fullmatch(port):
        return False
    if host == "localhost" and not authority.startswith("["):
        return True
    try:
        address = ipaddress.IPv6Address(host) if authority.startswith("[") else ipaddress.IPv4Address(host)
    except ValueError:   # a name, or a number that is not a dotted quad (127.1, 2130706433)
        return False
    return address.is_loopback


def _cross_site(request, loopback_only: bool) -> bool:
    """A form a page of another origin may have posted: its Origin is not the Host it was sent to
    (nor a loopback literal, on loopback), or the browser says the request crossed sites."""
    if request.headers.get("sec-fetch-site", "same-origin").lower() not in _SAME_SITE_FETCHES:
        return True
    origin = request.headers.get("origin")
    if origin is None:
        return False   # not sent by a browser: curl, a script
    parts = urllib.parse.urlsplit(origin)
    host = (request.headers.get("host") or "").lower()
    return (parts.scheme not in ("http", "https") or parts.path or parts.query or parts.netloc.lower() != host
            or (loopback_only and not loopback_authority(parts.netloc)))


class Pages:
    def __init__(self, context):
        self.context = context
        self.flashes = Flashes()
        self.loopback_only = loopback_problem(context.settings.host) is None

    @cached_property
    def templates(self):
        return make_templates()

    def refusal(self, request) -> HTMLResponse | None:
        """403 for a Host that does not name loopback by a literal (on loopback); 401/403 without an
        admin's credentials (when asked for); 403 for a form that may come from another site; 411/413
        for a form without its length or over MAX_BODY_BYTES."""
        if self.loopback_only and not (len(request.headers.getlist("host")) == 1
                                       and loopback_authority(request.headers["host"])):
            _warn.warning("host", "%s %s with Host %r refused: not a loopback literal", request.method,
                          request.url.path[:200], (request.headers.get("host") or "")[:200])
            return HTMLResponse("the console answers only to loopback host names by their literal (localhost, "
                                "127.0.0.1, [::1]); a DNS name pointing at loopback is refused (DNS rebinding)",
                                status_code=403)
        access = self.context.access
        if access is not None:
            client = request.client.host if request.client else ""
            from rocketbox.cluster.acl.decision import AUTHENTICATION, http_refusal   # with credentials only
            refused = http_refusal(access.config, request.headers.get("authorization"), client, admin_only=True)
            if refused is not None:
                status = 401 if refused.kind == AUTHENTICATION else 403
                _warn.warning(f"acl:{status}", "%s %s from %s -> %d: %s", request.method, request.url.path[:200],
                              client, status, refused.reason)
                return PlainTextResponse(refused.reason, status_code=status,
                                         headers={"WWW-Authenticate": 'Basic realm="RocketBox console"'})
        if request.method == "POST":
            if _cross_site(request, self.loopback_only):
                return HTMLResponse("cross-site form posts are refused", status_code=403)
            length = request.headers.get("content-length")
            if length is None or not _LENGTH.fullmatch(length):
                return HTMLResponse("a form needs its Content-Length", status_code=411)
            if int(length) > MAX_BODY_BYTES:
                return HTMLResponse(f"a form is at most {MAX_BODY_BYTES} bytes", status_code=413)
        return None

    async def _form(self, request):
        if request.method == "POST":
            return await request.form(max_files=0, max_fields=50)
        return request.query_params

    def _endpoint(self, work, nav: str, answer):
        """An endpoint: the guard, then ``work(request, form)`` on a worker thread (the Admin blocks),
        its failure an error page, else ``answer(request, what work returned)``."""
        async def endpoint(request):
            refused = self.refusal(request)
            if refused is not None:
                return refused
            try:
                form = await self._form(request)
                result = await run_in_threadpool(work, request, form)
            except Exception as exc:   # every failure is answered; the process goes on serving
                return self.error_page(request, exc, nav)
            return answer(request, result)
        return endpoint

    def page(self, template: str, work, *, nav: str = ""):
        """An endpoint rendering ``template`` with ``work(request, form)``'s dict and the flash its
        URL names, if any."""
        def render(request, data: dict):
            fragment = request.query_params.get("fragment") == "1"
            flash = self.flashes.take(request.query_params.get("flash"))
            return self.templates.TemplateResponse(request, template,
                                                   {**data, **flash, "nav": nav, "fragment": fragment})
        return self._endpoint(work, nav, render)

    def action(self, work, *, nav: str = ""):
        """A form's endpoint: ``work(request, form)`` does what it asks and returns (the page to show,
        what to tell there); the answer is a 303 to that page, which shows it once."""
        def redirect(request, result: tuple[str, dict]):
            location, flash = result
            joiner = "&" if "?" in location else "?"
            return RedirectResponse(f"{location}{joiner}flash={self.flashes.put(flash)}", status_code=303)
        return self._endpoint(work, nav, redirect)

    def api(self, work):
        """A JSON endpoint (live refresh, charts): ``work(request)``'s value, or {"error": ...}."""
        async def endpoint(request):
            refused = self.refusal(request)
            if refused is not None:
                return refused
            try:
                return JSONResponse(await run_in_threadpool(work, request))
            except Exception as exc:
                status, title, message = self._logged(request, exc)
                return JSONResponse({"error": message, "title": title}, status_code=status)
        return endpoint

    def _logged(self, request, exc: BaseException) -> tuple[int, str, str]:
        """Every error answer is logged, at most a burst of each status per window (a client that
        repeats a bad request must not fill the disk); a console bug also with its traceback."""
        status, title, message = explain(exc)
        written = _warn.warning(str(status), "%s %s -> %d %s: %s", request.method, request.url.path[:200], status,
                                title, message[:500])
        if written and status == 500:
            log.error("the traceback of that error", exc_info=exc)
        return status, title, message

    def error_page(self, request, exc: BaseException, nav: str = ""):
        status, title, message = self._logged(request, exc)
        return self.templates.TemplateResponse(request, "error.html", {
            "title": title, "message": message, "status": status, "nav": nav, "fragment": False,
            "back": request.headers.get("referer") or ""}, status_code=status)
