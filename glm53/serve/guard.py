"""Only the person at the keyboard drives glm53 serve: an ASGI layer in front of the app that refuses, in one
sentence, what another site in their browser could send, before any of it reaches the model or the sandbox.

- A Host header that is not a loopback name or the --host the server was given (400): DNS rebinding points an
  attacker's name at 127.0.0.1, and only its Host tells the request apart.
- An Origin that is not the page's own, a trusted host on the port the request came to (403): a cross-site fetch or
  form says where it comes from.
- A POST whose Content-Type is not application/json (415): a cross-site form or no-cors fetch can send text/plain
  without a CORS preflight, never application/json.
- A body past MAX_BODY_BYTES (413): by its Content-Length before a byte is read, or, sent in chunks, as soon as it
  passes the cap; the body is never held whole past it.

Every answer, refusals included, says nosniff and carries the page's Content-Security-Policy (HEADERS).
"""

from __future__ import annotations

import re

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse

LOOPBACK = ("localhost", "127.0.0.1", "::1")
MAX_BODY_BYTES = 1 << 20
# the page is its own files: script and style only from them (app.js sets styles through the DOM, which this
# allows), images from them and the favicon's data: URL, no plugin, no <base>, no framing by another site
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
            "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# on every answer; a response that sets its own CSP (an SVG from a run) keeps it
HEADERS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": PAGE_CSP}
HOST = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[^:\[\]]+))(?::(?P<port>[0-9]{1,5}))?")


def sentence(status: int, text: str) -> JSONResponse:
    """A refusal. It carries HEADERS itself: a 500 is answered from outside the guard (Starlette's error layer)."""
    return JSONResponse({"error": " ".join(str(text).split())}, status_code=status, headers=HEADERS)


def host_and_port(value: str) -> tuple[str, str | None] | None:
    """A Host header's (name, port), the name lowercased and an IPv6 address without its brackets; None if it is
    not a host."""
    match = HOST.fullmatch(value.strip().lower())
    return (match["v6"] or match["name"], match["port"]) if match else None


class Guard:
    def __init__(self, app, host: str):
        self.app, self.trusted = app, {*LOOPBACK, host.strip().lower().strip("[]")}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_guarded(message):
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        headers = Headers(scope=scope)
        refusal = self.refusal(scope["method"], headers)
        if refusal is None and scope["method"] == "POST":
            body, refusal = await read_body(receive)
            if body is not None:
                receive = replay(body, receive)
            elif refusal is None:
                return  # the client went away while sending
        if refusal is not None:
            return await refusal(scope, receive, send_guarded)
        await self.app(scope, receive, send_guarded)

    def refusal(self, method: str, headers: Headers) -> JSONResponse | None:
        host = headers.get("host", "")
        named = host_and_port(host)
        if named is None or named[0] not in self.trusted:
            return sentence(400, f"the Host header {host[:80]!r} is not this server's name: open the playground at "
                                 "localhost, 127.0.0.1 or the --host glm53 serve was started with")
        origin = headers.get("origin")
        if origin is not None and (not origin.lower().startswith("http://")
                                   or host_and_port(origin[7:]) not in {(name, named[1]) for name in self.trusted}):
            return sentence(403, f"a request from the page at {origin[:80]!r} is refused: only the playground's own "
                                 "page may drive this server, so use it there")
        if method != "POST":
            return None
        kind = headers.get("content-type")
        if (kind or "").split(";")[0].strip().lower() != "application/json":
            sent = f"this one's is {kind[:60]!r}" if kind else "this one has no Content-Type"
            return sentence(415, f"send the body as JSON with Content-Type: application/json ({sent})")
        declared = headers.get("content-length")
        if declared is not None and not re.fullmatch(r"[0-9]{1,19}", declared):
            return sentence(400, f"the Content-Length {declared[:40]!r} is not a number of bytes")
        if declared is not None and int(declared) > MAX_BODY_BYTES:
            return sentence(413, f"the request body is {int(declared):,} bytes; at most {MAX_BODY_BYTES:,} are "
                                 "accepted")
        return None


async def read_body(receive) -> tuple[bytes | None, JSONResponse | None]:
    """The whole body, or a 413 as soon as it passes MAX_BODY_BYTES (the rest is left unread); (None, None) if the
    client went away."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None, None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_BODY_BYTES:
            return None, sentence(413, f"the request body runs past {MAX_BODY_BYTES:,} bytes; at most "
                                       f"{MAX_BODY_BYTES:,} are accepted")
        if not message.get("more_body", False):
            return b"".join(chunks), None


def replay(body: bytes, receive):
    """A receive that gives the body read already, then what the client sends next (its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again():
        return pending.pop() if pending else await receive()

    return again
