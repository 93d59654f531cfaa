"""Only the person at the keyboard drives glm53 serve: another site in their browser cannot make it generate or read
what it serves (a Host other than the loopback's or --host's, a foreign Origin and a POST that is not JSON are each
refused), a run folder's files cannot run script in the page (REPORT.md is rendered without raw HTML and sanitised;
the page and its files carry a CSP and nosniff), symlinks cannot reach outside --runs, and a body past the cap is
refused before it is read. Each refusal is one sentence."""

import http.server
import json
import socket
import threading
import time
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from .conftest import PNG, LoopbackServer, require_serve_extra, start_browser

require_serve_extra()

JSON = {"Content-Type": "application/json"}
ASK = {"mode": "prompt", "prompt": "def f(x):", "checkpoints": [0], "max_new_tokens": 2}
EVIL_REPORT = """# Evil run

<script>window.pwned = "script tag"</script>

<img src="x" onerror="window.pwned = 'onerror'">

[click me](javascript:void(window.pwned='link')) and <a href="javascript:void(window.pwned='raw')">raw</a>

| step | loss |
| --- | --- |
| 1 | 5.6 |

![chart](chart.svg)
"""
EVIL_SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>window.pwned = "svg"</script><circle r="4"/></svg>'


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory):
    """A runs folder holding what an attacker might leave in it: a report and a chart with script in them, a run
    folder that is a symlink to elsewhere, and a run whose REPORT.md is a symlink to a file outside."""
    root = tmp_path_factory.mktemp("hostile")
    runs, elsewhere = root / "runs", root / "elsewhere"
    (runs / "evil").mkdir(parents=True)
    (runs / "evil" / "REPORT.md").write_text(EVIL_REPORT)
    (runs / "evil" / "chart.svg").write_text(EVIL_SVG)
    (elsewhere / "secret-run").mkdir(parents=True)
    (elsewhere / "secret-run" / "REPORT.md").write_text("# Secret\n\n![c](chart.png)\n")
    (elsewhere / "secret-run" / "chart.png").write_bytes(PNG)
    (elsewhere / "secret.md").write_text("# Secret notes\n")
    (runs / "linked").symlink_to(elsewhere / "secret-run", target_is_directory=True)
    (runs / "leaky").mkdir()
    (runs / "leaky" / "run-receipt.json").write_text("{}")
    (runs / "leaky" / "REPORT.md").symlink_to(elsewhere / "secret.md")
    return runs


@pytest.fixture(scope="module")
def hostile_app(generator_pair, hostile_runs):
    from glm53.serve.app import create_app

    generator, cfg = generator_pair
    return create_app(generator, replace(cfg, runs=str(hostile_runs)))


@pytest.fixture(scope="module")
def hostile_client(hostile_app):
    from fastapi.testclient import TestClient

    return TestClient(hostile_app, base_url="http://127.0.0.1:8053", raise_server_exceptions=False)


@pytest.fixture
def ran(generator_pair, monkeypatch) -> list:
    """What the model was asked to do during the test (nothing runs: the generator only counts)."""
    calls: list = []
    monkeypatch.setattr(generator_pair[0], "run", lambda *args: calls.append(("run", args)))
    monkeypatch.setattr(generator_pair[0], "attention", lambda *args: calls.append(("attention", args)) or [])
    return calls


def refusal(response, status: int, *words: str) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    error = response.json()["error"]
    assert all(w in error for w in words) and "\n" not in error and "Traceback" not in error, error
    return error


# ---------------------------------------------------------------- who may ask

@pytest.mark.parametrize("host", ["evil.example", "evil.example:8053", "127.0.0.1.nip.io:8053", "testserver",
                                  "localhost.evil.example", "[::2]:8053", ""])
def test_a_host_other_than_the_loopback_or_host_is_refused(client, ran, host):
    """DNS rebinding: a name the attacker controls, pointed at 127.0.0.1, reaches the port with its own Host."""
    for method, url in (("get", "/api/info"), ("get", "/api/runs/demo"), ("get", "/"), ("post", "/api/generate")):
        response = getattr(client, method)(url, headers={"Host": host}, **({"json": ASK} if method == "post" else {}))
        refusal(response, 400, "Host", "localhost")
    assert ran == []


@pytest.mark.parametrize("host", ["localhost", "localhost:8053", "LOCALHOST:8053", "127.0.0.1", "127.0.0.1:9",
                                  "[::1]", "[::1]:8053"])
def test_the_loopback_names_are_trusted(client, host):
    assert client.get("/api/info", headers={"Host": host}).status_code == 200


def test_the_host_the_server_was_given_is_trusted(generator_pair):
    from fastapi.testclient import TestClient

    from glm53.serve.app import create_app

    generator, cfg = generator_pair
    lan = TestClient(create_app(generator, replace(cfg, host="lan-host.example")), base_url="http://lan-host.example:8053")
    assert lan.get("/api/info").status_code == 200
    assert lan.get("/api/info", headers={"Host": "other.lan:8053"}).status_code == 400


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8053",
                                    "http://localhost", "http://127.0.0.1:8053.evil.example", "http://127.0.0.1:8053/",
                                    "http://evil.example:8053"])
def test_a_foreign_origin_is_refused(client, ran, origin):
    refusal(client.post("/api/generate", json=ASK, headers={"Origin": origin}), 403, origin, "page")
    refusal(client.get("/api/info", headers={"Origin": origin}), 403, origin)
    assert ran == []


def test_the_pages_own_origin_is_served(client):
    for origin in ("http://127.0.0.1:8053", "http://localhost:8053", "http://[::1]:8053"):  # the same server
        assert client.get("/api/info", headers={"Origin": origin}).status_code == 200, origin
    response = client.post("/api/generate", content=b"[1]", headers={**JSON, "Origin": "http://127.0.0.1:8053"})
    refusal(response, 400, "send a JSON object")  # past the Origin and Content-Type checks, to the body's


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x",
                                  "text/json", None])
def test_a_post_that_is_not_json_is_refused_and_runs_nothing(client, ran, kind):
    """A cross-site form or a no-cors fetch can send text/plain (no CORS preflight) but never application/json."""
    headers = {"Content-Type": kind} if kind else {}
    for url in ("/api/generate", "/api/attention"):
        body = ASK if url == "/api/generate" else {"model": 0, "ids": [1, 2], "position": 1}
        response = refusal(client.post(url, content=json.dumps(body), headers=headers), 415, "application/json")
        assert (kind or "no Content-Type") in response
    assert ran == []


def test_json_with_a_charset_is_json(client):
    response = client.post("/api/generate", content=b"[1]", headers={"Content-Type": "Application/JSON; charset=utf-8"})
    refusal(response, 400, "send a JSON object")


# ---------------------------------------------------------------- what a body may be

def raw_http(url: str, head: str, *chunks: bytes, wait_s: float = 20) -> tuple[int, float]:
    """Send a request's head and the given body pieces on a socket, leave the rest unsent, and return the status of
    the answer and the seconds it took (a socket.timeout if the server waits for more)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        began = time.monotonic()
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        for chunk in chunks:
            sock.sendall(chunk)
        answer = b""
        while b"\r\n" not in answer:
            got = sock.recv(4096)
            if not got:
                break
            answer += got
        return int(answer.split()[1]), time.monotonic() - began


def test_a_declared_length_past_the_cap_is_refused_before_the_body_is_read(live_server):
    head = (f"POST /api/generate HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
            f"Content-Length: {256 << 20}\n")
    status, seconds = raw_http(live_server.url, head)  # not one byte of the 256 MiB is sent
    assert status == 413 and seconds < 10


def test_a_chunked_body_is_cut_at_the_cap(live_server):
    head = "POST /api/generate HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\nTransfer-Encoding: chunked\n"
    piece = b"10000\r\n" + b" " * 0x10000 + b"\r\n"  # 64 KiB a chunk; 17 of them pass 1 MiB, and no last chunk follows
    status, seconds = raw_http(live_server.url, head, *[piece] * 17)
    assert status == 413 and seconds < 10


def test_a_declared_length_past_the_cap_is_one_sentence(client):
    response = client.post("/api/generate", content=b"{}", headers={**JSON, "Content-Length": str(2 << 20)})
    refusal(response, 413, "2,097,152 bytes", "at most 1,048,576")


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"checkpoints": ' + b"[" * 40 + b"0" + b"]" * 40 + b"}",
                                  b'{"a": ' * 5000 + b"1" + b"}" * 5000])
def test_a_deeply_nested_body_is_a_400(client, ran, body):
    for url in ("/api/generate", "/api/attention"):
        refusal(client.post(url, content=body, headers=JSON), 400, "nested")
    assert ran == []


@pytest.mark.parametrize("url", ["/api/runs/demo/file/charts/lo%00ss.png", "/api/runs/demo/file/%00",
                                 "/api/runs/de%00mo", "/page/app%00.js", "/api/tasks?split=d%00ev"])
def test_a_nul_in_a_path_is_a_404(client, url):
    refusal(client.get(url), 404)


# ---------------------------------------------------------------- what the runs view serves

def test_symlinks_do_not_reach_outside_runs(hostile_client):
    assert "linked" not in [r["name"] for r in hostile_client.get("/api/runs").json()["runs"]]
    for url in ("/api/runs/linked", "/api/runs/linked/file/chart.png"):
        refusal(hostile_client.get(url), 404)
    leaky = hostile_client.get("/api/runs/leaky").json()  # a run of its own, whose REPORT.md points outside
    assert leaky["report"] is None, leaky
    assert [r["report"] for r in hostile_client.get("/api/runs").json()["runs"] if r["name"] == "leaky"] == [False]


def elements(html: str) -> list[tuple[str, dict]]:
    found = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Collect().feed(html)
    return found


def test_a_report_is_rendered_without_raw_html(hostile_client):
    html = hostile_client.get("/api/runs/evil").json()["report"]
    tags = elements(html)
    assert not [t for t, _ in tags if t in ("script", "iframe", "object", "embed", "style")], html
    assert not [a for _, attrs in tags for a in attrs if a.startswith("on") or a == "style"], html
    assert not [v for _, attrs in tags for v in attrs.values() if v and "javascript:" in v.lower()], html
    assert "&lt;script&gt;" in html  # the raw HTML is shown as the text it is
    assert "<table>" in html and '<img alt="chart" src="/api/runs/evil/file/chart.svg"' in html


def test_every_response_says_nosniff_and_pages_and_files_carry_a_csp(hostile_client, client, generator_pair,
                                                                     monkeypatch):
    for url in ("/", "/page/app.js", "/page/style.css", "/api/info", "/api/runs/evil", "/nothing",
                "/api/runs/evil/file/chart.svg"):
        response = hostile_client.get(url)
        assert response.headers["x-content-type-options"] == "nosniff", url
        assert "object-src 'none'" in response.headers["content-security-policy"] or url.endswith(".svg"), url
    assert client.get("/api/info", headers={"Host": "evil.example"}).headers["x-content-type-options"] == "nosniff"
    monkeypatch.setattr(generator_pair[0], "attention", lambda *args: {}["an unexpected error"])
    failed = client.post("/api/attention", json={"model": 0, "ids": [1, 2], "position": 1})
    assert failed.status_code == 500 and failed.headers["x-content-type-options"] == "nosniff"
    page = hostile_client.get("/").headers["content-security-policy"]
    assert "script-src 'self'" in page and "frame-ancestors 'none'" in page and "base-uri 'none'" in page
    svg = hostile_client.get("/api/runs/evil/file/chart.svg")
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    assert "default-src 'none'" in svg.headers["content-security-policy"]
    assert "sandbox" in svg.headers["content-security-policy"]


# ---------------------------------------------------------------- in a real browser

def recording(app, seen: list):
    """The app, noting each request's method, path, Origin, Content-Type and the status it was answered with."""

    async def recorder(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        note = {"method": scope["method"], "path": scope["path"], "origin": headers.get("origin"),
                "type": headers.get("content-type"), "status": None}
        seen.append(note)

        async def noting(message):
            if message["type"] == "http.response.start":
                note["status"] = message["status"]
            await send(message)

        await app(scope, receive, noting)

    return recorder


ATTACK = """<!doctype html><title>a page on another site</title>
<form method="post" enctype="text/plain" action="TARGET/api/generate" target="sink">
<input name='{"mode":"prompt","prompt":"def f(x):","checkpoints":[0],"max_new_tokens":2,"signature":"' value='"}'>
</form><iframe name="sink"></iframe>
<script>
const target = "TARGET", body = JSON.stringify(ASK), plain = {"Content-Type": "text/plain"};
const tries = {
  "text/plain fetch": [target + "/api/generate", {method: "POST", headers: plain, body}],
  "no-cors fetch": [target + "/api/generate", {method: "POST", mode: "no-cors", headers: plain, body}],
  "json fetch": [target + "/api/generate", {method: "POST", headers: {"Content-Type": "application/json"}, body}],
  "attention fetch": [target + "/api/attention", {method: "POST", mode: "no-cors", headers: plain,
                                                  body: JSON.stringify({model: 0, ids: [1, 2], position: 1})}],
  "read info": [target + "/api/info", {}],
  "read a report": [target + "/api/runs/evil", {}],
};
window.results = {};
(async () => {
  for (const [name, [url, options]] of Object.entries(tries)) {
    try {
      const r = await fetch(url, options);
      window.results[name] = `read ${r.type} ${r.status} ${await r.text()}`;
    } catch (err) { window.results[name] = `blocked ${err.name}`; }
  }
  const answered = new Promise((done) => document.querySelector("iframe").addEventListener("load", done));
  document.forms[0].submit();
  await Promise.race([answered, new Promise((done) => setTimeout(done, 10000))]);
  try { window.results["form answer"] = `read ${frames.sink.document.body.innerText}`; }
  catch (err) { window.results["form answer"] = `blocked ${err.name}`; }
  window.done = true;
})();
</script>"""


def serve_page(html: str) -> tuple[http.server.HTTPServer, str]:
    """A page on another origin of this machine (another port of the loopback), as an attacker's site."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html.encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="module")
def watched_server(hostile_app):
    seen: list = []
    server = LoopbackServer(recording(hostile_app, seen))
    server.seen = seen
    yield server
    server.stop()


@pytest.fixture
def browser(tmp_path):
    # rebound.test resolves to 127.0.0.1, as a name an attacker re-points at the loopback (DNS rebinding) would
    driver = start_browser(tmp_path / "profile", "--host-resolver-rules=MAP rebound.test 127.0.0.1")
    yield driver
    driver.quit()


def test_another_site_in_the_browser_cannot_drive_the_server_or_read_it(browser, watched_server, ran):
    from selenium.webdriver.support.ui import WebDriverWait

    page, url = serve_page(ATTACK.replace("TARGET", watched_server.url).replace("ASK", json.dumps(ASK)))
    try:
        browser.get(url)
        WebDriverWait(browser, 60).until(lambda b: b.execute_script("return window.done === true"))
        results = browser.execute_script("return window.results")
    finally:
        page.shutdown()
    assert set(results) == {"text/plain fetch", "no-cors fetch", "json fetch", "attention fetch", "read info",
                            "read a report", "form answer"}, results
    assert all(r.startswith("blocked") or r == "read opaque 0 " for r in results.values()), results
    posts = [s for s in watched_server.seen if s["method"] == "POST"]
    # the requests did reach the server (the browser sent them), and each was refused
    assert len(posts) >= 4 and all(s["status"] in (403, 415) and s["origin"] for s in posts), posts
    assert any((s["type"] or "").startswith("text/plain") for s in posts), posts
    assert ran == []  # the model generated nothing and the sandbox ran nothing

    # DNS rebinding: the attacker's name, now pointing at the loopback, gets a refusal and nothing of the server's
    port = watched_server.url.rsplit(":", 1)[1]
    browser.get(f"http://rebound.test:{port}/")
    assert "Host" in browser.find_element("tag name", "body").text
    status, text = browser.execute_async_script(
        "const done = arguments[0]; fetch('/api/info').then(async (r) => done([r.status, await r.text()]))")
    assert status == 400 and "checkpoints" not in text, text


def test_a_hostile_report_and_chart_run_no_script_in_the_page(browser, watched_server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    browser.get(watched_server.url)
    browser.find_element(By.ID, "tab-runs").click()
    wait.until(seen.element_to_be_clickable((By.CSS_SELECTOR, "#runs-list button[data-run=evil]"))).click()
    wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".run-report table")))
    wait.until(lambda b: b.execute_script(
        "return [...document.querySelectorAll('.run-report img')].every((i) => i.complete)"))
    time.sleep(0.5)  # an onerror or a link's script would have run by now
    report = browser.find_element(By.CSS_SELECTOR, ".run-report")
    assert browser.execute_script("return window.pwned") is None
    for link in report.find_elements(By.TAG_NAME, "a"):
        link.click()
    assert browser.execute_script("return window.pwned") is None
    assert "<script>" in report.text  # the report's raw HTML is shown as text
    browser.get(watched_server.url + "/api/runs/evil/file/chart.svg")  # the chart opened on its own
    time.sleep(0.5)
    assert browser.execute_script("return window.pwned") is None
