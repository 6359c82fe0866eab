"""How a page is answered: its work runs on a worker thread (the Admin blocks), its errors become
an error page that names the cause (a form value, a missing topic, the broker's own reason), and
requests that could come from another site are refused.

The guard: the console listens on loopback only, but a page of any site open in the same browser
can still send requests to 127.0.0.1. A Host header that is not a loopback name (DNS rebinding)
and a form posted from another origin (cross-site request forgery) are refused with 403. With
access control asking for credentials (``ConsoleContext.access``) every request needs an admin
account's HTTP Basic credentials (401 without them, 403 for an account that is not admin); the Host
check then gives way (a rebound name gets no credentials), the cross-site check stays (a browser
sends its Basic credentials along with a forged post)."""

from __future__ import annotations

import logging
import os
import urllib.parse

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
from starlette.templating import Jinja2Templates

from rocketbox.cluster.acl.decision import AUTHENTICATION, http_refusal
from rocketbox.cluster.console.forms import FormError, iso_local
from rocketbox.cluster.errors import BrokerError, ClientError, NoRouteError
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger("rocketbox.console")
_warn = RateLimitedLog(log, burst=10, interval_s=10.0)
TEMPLATES_DIR = os.path.join(os.path.dirname(__file__), "templates")
STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
# A form is a few fields and at most a test message's body.
MAX_BODY_BYTES = 256 * 1024
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def _human_bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def make_templates() -> Jinja2Templates:
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


def _host_allowed(request) -> bool:
    host = (request.headers.get("host") or "").lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in LOOPBACK_NAMES or name.startswith("127.")


def _cross_site(request) -> bool:
    origin = request.headers.get("origin")
    if not origin or origin == "null":
        return origin == "null"
    return urllib.parse.urlsplit(origin).netloc.lower() != (request.headers.get("host") or "").lower()


class Pages:
    def __init__(self, context):
        self.context = context
        self.templates = make_templates()

    def refusal(self, request) -> HTMLResponse | None:
        """401/403 without an admin's credentials (when asked for); 403 for a request that may come
        from another site; 413 for an oversized form."""
        access = self.context.access
        if access is not None:
            client = request.client.host if request.client else ""
            refused = http_refusal(access.config, request.headers.get("authorization"), client, admin_only=True)
            if refused is not None:
                status = 401 if refused.kind == AUTHENTICATION else 403
                _warn.warning(f"acl:{status}", "%s %s from %s -> %d: %s", request.method, request.url.path[:200],
                              client, status, refused.reason)
                return PlainTextResponse(refused.reason, status_code=status,
                                         headers={"WWW-Authenticate": 'Basic realm="RocketBox console"'})
        elif not _host_allowed(request):
            return HTMLResponse("the console answers only to loopback host names (localhost, 127.0.0.1)",
                                status_code=403)
        if request.method == "POST":
            if _cross_site(request):
                return HTMLResponse("cross-site form posts are refused", status_code=403)
            if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:
                return HTMLResponse(f"a form is at most {MAX_BODY_BYTES} bytes", status_code=413)
        return None

    async def _form(self, request):
        if request.method == "POST":
            return await request.form(max_files=0, max_fields=50)
        return request.query_params

    def page(self, template: str, work, *, nav: str = ""):
        """An endpoint rendering ``template`` with ``work(request, form)``'s dict (on a worker thread)."""
        async def endpoint(request):
            refused = self.refusal(request)
            if refused is not None:
                return refused
            try:
                form = await self._form(request)
                data = await run_in_threadpool(work, request, form)
            except Exception as exc:   # every failure is answered; the process goes on serving
                return self.error_page(request, exc, nav)
            fragment = request.query_params.get("fragment") == "1"
            return self.templates.TemplateResponse(request, template, {**data, "nav": nav, "fragment": fragment})
        return endpoint

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
