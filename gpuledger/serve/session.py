"""Who a request is: a bearer token (API clients), a session cookie (a browser that logged in at
``/``), or a user named by a trusted header of an authenticating reverse proxy (off by default).

- ``GET /`` is the login page: a form taking an API token. ``POST /login`` checks the token as the
  API does and sets the session cookie: a random id (the token never goes into the cookie),
  ``HttpOnly``, ``Secure`` when the request came over TLS (directly or as ``X-Forwarded-Proto:
  https``), ``SameSite=Strict``, ``Path=/``. ``POST /logout`` ends the session on the server and
  clears the cookie. Sessions live in the process (restarting serve logs everyone out; with
  several replicas, route a browser to one of them) for at most ``SESSION_S`` and never past the
  token's own expiry; a token removed from the tokens file ends its sessions at the next restart.
- **CSRF**: the cookie is ``SameSite=Strict`` (a browser sends it on no request started by another
  site, not even a link: reads need no more, they change nothing), and every ``POST`` must carry an
  ``Origin`` (or, without one, a ``Referer``) of this server's own scheme, host and port, else 403.
  Strict rather than Lax: the only thing Lax would add is the cookie on a link followed from
  elsewhere, which here costs one more login, against a finance page opened by another site.
- **Trusted header** (``GPULEDGER_TRUSTED_USER_HEADER``, e.g. ``X-Forwarded-Email`` of
  oauth2-proxy or ``X-Auth-Request-User``): the user it names gets the scope
  ``GPULEDGER_TRUSTED_USERS`` gives it (``'alice@example.com=all,bob@example.com=business_unit:Research'``);
  a user not listed gets 403. Safe ONLY when serve is reachable through that proxy alone (which
  sets the header and strips any the client sent): anyone who reaches serve directly can send the
  header and be whoever they name.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from gpuledger.serve.tokens import BadTokens, Known, Scope, Tokens

AUDITED = ("/login", "/logout")  # lines of the access log too, beside the API's
COOKIE = "gpuledger_session"
SESSION_S = 8 * 3600  # a working day; then log in again
router = APIRouter(include_in_schema=False)


@dataclass
class Sessions:
    """Session id -> the token it was opened with (its id, scope and expiry) and when it ends."""

    live: dict[str, tuple[Known, float]] = field(default_factory=dict)

    def open(self, who: Known) -> str:
        now = time.time()
        for old in [s for s, (_, end) in self.live.items() if end < now]:  # sessions nobody logged out of
            del self.live[old]
        sid = secrets.token_urlsafe(32)
        self.live[sid] = (who, now + SESSION_S)
        return sid

    def get(self, sid: str) -> Known | None:
        found = self.live.get(sid)
        if found is None or found[1] < time.time():
            self.live.pop(sid, None)
            return None
        return found[0]

    def close(self, sid: str) -> None:
        self.live.pop(sid, None)


def trusted_users(text: str) -> dict[str, Scope]:
    """``GPULEDGER_TRUSTED_USERS``: ``'<user>=<scope>,…'``."""
    users: dict[str, Scope] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        user, sep, scope = item.partition("=")
        if not sep or not user.strip():
            raise BadTokens("GPULEDGER_TRUSTED_USERS is '<user>=<scope>' separated by commas")
        users[user.strip().lower()] = Scope.parse(scope)
    return users


def identify(request: Request) -> Known:
    """The request's identity, or 401 (403 for a trusted-header user who is not listed). The id,
    scope and any refusal's reason go on the request for the access log."""
    state = request.app.state
    tokens: Tokens = state.tokens
    kind, _, token = request.headers.get("authorization", "").partition(" ")
    found: Known | None = None
    if kind.lower() == "bearer" and token.strip():
        found = tokens.identify(token.strip())
    elif request.cookies.get(COOKIE):
        found = state.sessions.get(request.cookies[COOKIE])
    elif state.trusted_header and request.headers.get(state.trusted_header):
        user = request.headers[state.trusted_header].strip().lower()
        request.state.token_id = f"user:{user}"
        if user not in state.trusted_users:
            request.state.reason = f"user {user} has no scope in GPULEDGER_TRUSTED_USERS"
            raise HTTPException(403, request.state.reason)
        found = Known(f"user:{user}", state.trusted_users[user])
    if found is None:
        request.state.reason = "no valid bearer token or session"
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    request.state.token_id, request.state.scope = found.id, found.scope
    reason = found.expired(datetime.now(UTC))
    if reason is not None:
        request.state.reason = reason
        raise HTTPException(401, reason, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return found


def same_origin(request: Request) -> None:
    """403 unless the POST comes from a page of this server (the CSRF check)."""
    origin = request.headers.get("origin") or request.headers.get("referer") or ""
    parts = urlsplit(origin)
    host = request.headers.get("host", "")
    if not parts.scheme or parts.netloc != host or parts.scheme not in ("http", "https"):
        request.state.reason = "cross-site POST refused"
        raise HTTPException(403, "a POST must come from this server's own pages (Origin or Referer)")


def secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


def login_page(message: str = "", status: int = 200) -> HTMLResponse:
    note = f'<p class="err" id="login-error">{escape(message)}</p>' if message else ""
    return HTMLResponse(
        f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>gpuledger — log in</title>
<style>body{{font-family:system-ui,Helvetica,Arial,sans-serif;margin:48px auto;max-width:420px;color:#222}}
input{{width:100%;padding:6px;margin:6px 0 12px;box-sizing:border-box}} .err{{color:#c00}}</style></head><body>
<h1>gpuledger</h1><p>GPU cost and utilisation. Log in with your API token.</p>{note}
<form method="post" action="/login" id="login"><label for="token">API token</label>
<input type="password" name="token" id="token" autocomplete="current-password" required autofocus>
<button type="submit" id="login-submit">Log in</button></form></body></html>""",
        status_code=status,
        headers={"Cache-Control": "no-store", **SECURITY_HEADERS},
    )


SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


@router.get("/")
def index(request: Request) -> Response:
    if request.cookies.get(COOKIE) and request.app.state.sessions.get(request.cookies[COOKIE]):
        return RedirectResponse("/dashboard", status_code=303)
    return login_page()


@router.post("/login")
async def login(request: Request) -> Response:
    same_origin(request)
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    found = request.app.state.tokens.identify(token) if token else None
    if found is None:
        request.state.reason = "login with an unknown token"
        return login_page("That token is not valid.", 401)
    request.state.token_id, request.state.scope = found.id, found.scope
    reason = found.expired(datetime.now(UTC))
    if reason is not None:
        request.state.reason = reason
        return login_page(f"That token has expired ({reason}).", 401)
    response = RedirectResponse("/dashboard", status_code=303)
    response.set_cookie(
        COOKIE,
        request.app.state.sessions.open(found),
        max_age=SESSION_S,
        httponly=True,
        secure=secure(request),
        samesite="strict",
        path="/",
    )
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    same_origin(request)
    if request.cookies.get(COOKIE):
        request.app.state.sessions.close(request.cookies[COOKIE])
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, secure=secure(request), samesite="strict")
    return response
