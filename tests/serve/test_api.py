"""glm53 serve's API through FastAPI's test client and a real loopback server: the stream is `glm53 generate`'s
completion with its per-byte trace, verdicts come per case from the sandbox at the suite's level, every bound and
refusal is a 4xx with one sentence, two checkpoints answer side by side, requests are served in turn, and a
closed page stops its generation."""

import json
import threading

import pytest
import torch

from glm53.cli import main

from .conftest import CONTEXT, events, require_serve_extra

require_serve_extra()

PROMPT = "# Complete this Python function.\n# Return x plus one.\ndef add_one(x):"
JSON = {"Content-Type": "application/json"}
ASK = {"mode": "prompt", "prompt": PROMPT, "cases": "1 -> 2\n-3 -> -2", "checkpoints": [0], "max_new_tokens": 12}


def ask(client, **changes) -> list[tuple[str, dict]]:
    with client.stream("POST", "/api/generate", json={**ASK, **changes}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return events("".join(response.iter_text()))


def of(stream, name, model=0) -> list[dict]:
    return [data for event, data in stream if event == name and data.get("model", model) == model]


@pytest.mark.parametrize("sampling", [[], ["--temperature", "0.8", "--seed", "7"]], ids=["greedy", "sampled"])
def test_the_stream_is_glm53_generates_completion_with_its_trace(client, serve_files, capsys, sampling):
    flags = dict(zip(sampling[::2], sampling[1::2]))
    stream = ask(client, temperature=float(flags.get("--temperature", 0)), seed=int(flags.get("--seed", 0)))
    assert [e for e, _ in stream][0] == "start" and [e for e, _ in stream][-1] == "done"
    completion = of(stream, "completion")[0]
    capsys.readouterr()
    assert main(["generate", "--checkpoint", str(serve_files / "a" / "checkpoint-0000"), "--prompt", PROMPT,
                 "--max-new-tokens", "12", "--device", "cpu", "--json", *sampling]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert completion["completion"] == printed["completion"] and completion["token_ids"] == printed["token_ids"]
    tokens = of(stream, "token")
    assert [t["id"] for t in tokens][: len(completion["token_ids"])] == completion["token_ids"]
    assert "".join(d["piece"] for d in of(stream, "text")) == completion["completion"]
    assert len(tokens) == 12 or completion["hit_token_cap"] is False
    for t in tokens:  # every MoE layer's top-2 of 4 experts, and a probability
        assert len(t["experts"]) == 4 and all(len(set(e)) == 2 and set(e) <= set(range(4)) for e in t["experts"])
        assert 0 < t["prob"] <= 1


def test_the_trace_is_the_full_forwards_routing_and_probability(generator_pair, client):
    """The per-byte view read from the cached decoding loop equals a plain full forward over prompt + completion:
    the probability of each byte at the position that wrote it, and that position's routed experts."""
    from glm53.data.tokenizer import ByteTokenizer
    from glm53.decode.generate import banned_ids

    stream = ask(client, max_new_tokens=10)
    completion, tokens = of(stream, "completion")[0], of(stream, "token")
    model = generator_pair[0].served[0].model
    ids = completion["prompt_ids"] + [t["id"] for t in tokens]
    routed = []
    moes = [m for layer in model.layers for m in layer.modules() if type(m).__name__ == "MixtureOfExperts"]
    for m in moes:
        m.routing_probe = routed.append
    try:
        with torch.no_grad():
            logits = model(torch.tensor([ids[:-1]]))[0]
    finally:
        for m in moes:
            m.routing_probe = None
    logits[:, banned_ids(model, ByteTokenizer())] = float("-inf")
    start = len(completion["prompt_ids"]) - 1
    for j, t in enumerate(tokens):
        assert t["prob"] == pytest.approx(float(logits[start + j].softmax(-1)[t["id"]]), rel=1e-4, abs=1e-6)
        assert t["experts"] == [r[start + j].tolist() for r in routed]


def test_verdicts_come_per_case_from_the_sandbox_at_the_suites_level(generator_pair, client, monkeypatch):
    from glm53.data.suites import get_suite
    from glm53.serve.generation import Job
    from glm53.serve.requests import parse_cases

    generator = generator_pair[0]
    job = Job(PROMPT, "add_one", parse_cases("1 -> 2\n-3 -> 0\n5 -> 6", 16), (0,), None, 0)
    verdict = generator.judge(0, job, "\n    return x + 1\n")
    assert (verdict["status"], verdict["passed"], verdict["total"]) == ("failed", 2, 3)
    assert [c["status"] for c in verdict["cases"]] == ["passed", "failed", "passed"]
    assert verdict["language"] == "reference"
    # the reference level refuses what only the python level allows (a loop): judged as the suite judges
    loop = "\n    for y in [x]:\n        return y + 1\n"
    assert generator.judge(0, job, loop)["status"] == "invalid"
    broad = get_suite("broad")  # a checkpoint of the broad suite is judged at its level, python, where a loop is fine
    monkeypatch.setattr(generator.served[0], "suite", broad)
    judged = generator.judge(0, job, loop)
    assert (judged["status"], judged["passed"], judged["language"]) == ("failed", 2, "python")
    monkeypatch.undo()
    stream = ask(client)
    verdict = of(stream, "verdict")[0]
    assert verdict["total"] == 2 and len(verdict["cases"]) == 2 and verdict["cases"][0]["args"] == "1"
    # nothing to call: not judged, said in a sentence
    untyped = of(ask(client, cases=""), "verdict")[0]
    assert untyped["status"] == "not judged" and "no test cases" in untyped["message"]


def test_a_checkpoints_suite_is_the_one_its_run_named(tmp_path):
    from glm53.serve.checkpoints import checkpoint_suite

    (tmp_path / "checkpoint-0001").mkdir()
    assert checkpoint_suite(tmp_path / "checkpoint-0001").name == "reference"  # no run.json: as runs before suites
    (tmp_path / "run.json").write_text(json.dumps({"suite": "broad"}))
    assert checkpoint_suite(tmp_path / "checkpoint-0001").name == "broad"


def test_a_task_from_a_split_brings_its_prompt_and_cases(client):
    listed = client.get("/api/tasks", params={"split": "dev"}).json()["tasks"]
    task = listed[0]
    stream = ask(client, mode="task", split="dev", task_id=task["task_id"], cases="", prompt=None)
    completion = of(stream, "completion")[0]
    assert completion["prompt"] == task["prompt"]
    assert of(stream, "verdict")[0]["total"] == len(task["cases"].splitlines())


def test_a_description_becomes_the_tasks_prompt_form(client):
    stream = ask(client, mode="description", description="Return x plus one.", signature="add_one(x)", prompt=None)
    assert of(stream, "completion")[0]["prompt"] == PROMPT


def test_two_checkpoints_answer_side_by_side_on_the_same_prompt_and_seed(client):
    both = ask(client, checkpoints=[0, 1], temperature=0.8, seed=3)
    assert [d["model"] for d in of(both, "completion", None) if True] or True
    order = [(e, d["model"]) for e, d in both if e in ("start", "completion", "verdict")]
    assert order == [("start", 0), ("completion", 0), ("start", 1), ("completion", 1), ("verdict", 0), ("verdict", 1)]
    for model in (0, 1):  # each pane is what that checkpoint alone makes with the same seed
        alone = ask(client, checkpoints=[model], temperature=0.8, seed=3)
        assert of(both, "completion", model)[0]["token_ids"] == of(alone, "completion", model)[0]["token_ids"]
    first, second = of(both, "token", 0), of(both, "token", 1)
    assert [t["prob"] for t in first] != [t["prob"] for t in second]  # two different models


BAD = [
    ({"mode": "description", "description": "x" * 2001, "signature": "f(x)"}, 413,
     "description is 2,001 characters; at most 2,000"),
    ({"prompt": "x" * 3000}, 413, "prompt is 3,000 characters"),
    ({"prompt": "#" * CONTEXT + "\ndef f(x):"}, 413, "holds 256 in its context"),
    ({"cases": "\n".join(f"{i} -> {i}" for i in range(17))}, 413, "17 test cases were given; at most 16"),
    ({"cases": "1 => 2"}, 400, "case line 1 is not `args -> expected`"),
    ({"cases": "1 -> 2\n1 -> {1, 2}"}, 400, "case line 2: the expected value: a value of type set cannot be judged"),
    ({"max_new_tokens": 201}, 400, "max_new_tokens must be a whole number from 1 to 200"),
    ({"max_new_tokens": 0}, 400, "max_new_tokens must be"),
    ({"temperature": -1}, 400, "temperature must be a number from 0.0 to 100.0"),
    ({"top_p": 0}, 400, "top_p must be a number above 0.0 and at most 1.0, got 0"),
    ({"seed": -1}, 400, "seed must be a whole number from 0"),
    ({"seed": 1.5}, 400, "seed must be a whole number"),
    ({"checkpoints": [2]}, 400, "checkpoints must list distinct indices"),
    ({"checkpoints": [0, 0]}, 400, "checkpoints must list distinct indices"),
    ({"mode": "poem"}, 400, "mode must be one of description, prompt, task"),
    ({"mode": "description", "description": "a\nb", "signature": "f(x)"}, 400, "description must be one line"),
    ({"mode": "description", "description": "a", "signature": "f(x"}, 400, "signature must read like name(x)"),
    ({"mode": "task", "split": "dev", "task_id": "nope"}, 404, "no task 'nope' in split 'dev'"),
    ({"prompt": "print(1)"}, 400, "the prompt opens no function"),
    ({"colour": "red"}, 400, "unknown field 'colour'"),
]


@pytest.mark.parametrize("changes,status,words", BAD, ids=[b[2][:30] for b in BAD])
def test_a_request_past_a_bound_gets_a_4xx_with_one_sentence(client, changes, status, words):
    response = client.post("/api/generate", json={**ASK, **changes})
    assert response.status_code == status
    error = response.json()["error"]
    assert words in error and "\n" not in error and "Traceback" not in error


@pytest.mark.parametrize("method,url,body,status,words", [
    ("post", "/api/generate", b"{not json", 400, "the request body is not JSON"),
    ("post", "/api/generate", b"[1, 2]", 400, "send a JSON object"),
    ("post", "/api/generate", b'{"mode": "prompt", "prompt": "def f(x):", "seed": NaN}', 400,
     "seed must be a whole number"),
    ("post", "/api/generate", b'{"mode": "prompt", "prompt": "def f(x):", "temperature": NaN}', 400,
     "temperature must be a number"),
    ("post", "/api/generate", b"x" * (1 << 20 | 1), 413, "at most 1,048,576 are accepted"),
    ("get", "/api/generate", None, 405, "GET is not served at /api/generate"),
    ("get", "/etc/passwd", None, 404, "there is nothing at /etc/passwd"),
    ("get", "/page/..%2f..%2fcli.py", None, 404, "there is nothing"),
    ("get", "/api/tasks?split=moon", None, 404, "has no split 'moon'"),
    ("post", "/api/attention", b'{"model": 0, "ids": [1, 2], "position": 5}', 400, "position must be a whole number"),
    ("post", "/api/attention", b'{"model": 0, "ids": [1, 999], "position": 0}', 400, "ids must be 1 to 256 token ids"),
    ("post", "/api/attention", b'{"model": 3, "ids": [1], "position": 0}', 400, "model must be the index"),
])
def test_malformed_requests_are_refused_in_one_sentence(client, method, url, body, status, words):
    response = client.post(url, content=body, headers=JSON) if method == "post" else client.get(url)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert words in error and "\n" not in error and "Traceback" not in error


def test_an_unexpected_error_is_one_sentence_never_a_traceback(client, generator_pair, monkeypatch):
    def broken(*args):
        raise KeyError("deep inside")

    monkeypatch.setattr(generator_pair[0], "attention", broken)
    response = client.post("/api/attention", json={"model": 0, "ids": [1, 2], "position": 1})
    assert response.status_code == 500
    assert response.json() == {"error": "the server met an unexpected KeyError; its log has the details"}


def test_a_full_house_is_told_the_server_is_busy(client, generator_pair):
    generator, cfg = generator_pair
    for _ in range(cfg.max_waiting):
        generator.admit()
    try:
        response = client.post("/api/generate", json=ASK)
    finally:
        for _ in range(cfg.max_waiting):
            generator.release()
    assert response.status_code == 503
    assert response.json()["error"] == ("the server is busy with 6 requests (at most 6 wait at once); try again when "
                                        "one has finished")
    assert ask(client)[-1][0] == "done"  # and the house empties again


def test_the_attention_picks_of_a_completion(client):
    stream = ask(client, max_new_tokens=6)
    completion = of(stream, "completion")[0]
    ids = completion["prompt_ids"] + completion["token_ids"][:3]
    picks = client.post("/api/attention", json={"model": 0, "ids": ids, "position": len(ids) - 1}).json()
    (layer,) = picks["layers"]  # TINY: one sparse layer of the fixed pattern, the last
    assert layer["layer"] == 3 and layer["selection"] == "pattern"
    assert sum(layer["weights"]) == pytest.approx(1.0) and layer["keys"][-1] == len(ids) - 1


def test_the_runs_view_reads_reports_receipts_and_curves(client):
    assert client.get("/api/runs").json()["runs"] == [{"name": "demo", "report": True,
                                                       "receipt": "run-receipt.json", "finished": True}]
    run = client.get("/api/runs/demo").json()
    assert "<table>" in run["report"] and 'src="/api/runs/demo/file/charts/loss.png"' in run["report"]
    assert run["receipt"]["receipt"]["final"] == {"passed": 3}
    assert run["curves"] == [{"name": "pretrain loss", "points": [[1, 5.0], [2, 4.0], [3, 3.0], [4, 2.0]]},
                             {"name": "pretrain val_loss", "points": [[2, 3.5], [4, 1.5]]}]
    chart = client.get("/api/runs/demo/file/charts/loss.png")
    assert chart.status_code == 200 and chart.headers["content-type"] == "image/png"
    for url in ("/api/runs/demo/file/../../a/checkpoint-0000/config.json", "/api/runs/demo/file/REPORT.md",
                "/api/runs/notes", "/api/runs/..",
                "/api/runs/demo/file/%2e%2e/%2e%2e/a/checkpoint-0000/model.safetensors"):
        response = client.get(url)
        assert response.status_code == 404 and "\n" not in response.json()["error"], url


def test_the_page_is_served_whole_and_needs_nothing_from_outside(client):
    page = client.get("/").text
    assert '<script src="/page/app.js">' in page and '<link rel="stylesheet" href="/page/style.css">' in page
    for name in ("index.html", "app.js", "style.css"):
        text = client.get(f"/page/{name}").text if name != "index.html" else page
        outside = [w for w in text.replace("http://www.w3.org/2000/svg", "").split() if "http" in w and "//" in w]
        assert not outside, (name, outside)


# ---------------------------------------------------------------- a real server on the loopback

def test_requests_at_once_are_served_in_turn_each_whole(live_server):
    import httpx

    results: dict[int, list] = {}

    def one(i: int) -> None:
        with httpx.Client(timeout=120) as http, http.stream("POST", live_server.url + "/api/generate",
                                                            json={**ASK, "seed": 5, "temperature": 0.8}) as r:
            results[i] = [r.status_code, events("".join(r.iter_text()))]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert sorted(results) == [0, 1, 2, 3] and all(status == 200 for status, _ in results.values())
    streams = [stream for _, stream in results.values()]
    # the same prompt and seed give the same tokens and the same trace in every stream: nothing leaked between them
    assert all(of(s, "token") == of(streams[0], "token") and s[-1][0] == "done" for s in streams)


def test_closing_the_page_stops_its_generation(live_server, generator_pair, monkeypatch):
    import httpx

    from glm53.serve import generation

    stopped, finished = threading.Event(), []
    original = generation.stream_completion

    def watched(*args, **kwargs):
        try:
            finished.append(original(*args, **kwargs))
        except generation.Cancelled:
            stopped.set()
            raise
        return finished[-1]

    monkeypatch.setattr(generation, "stream_completion", watched)
    body = {**ASK, "cases": "", "max_new_tokens": 200}
    with httpx.Client(timeout=120) as http, http.stream("POST", live_server.url + "/api/generate", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("event: token"):
                break  # the page closes after its first token
    assert stopped.wait(timeout=120), "the generation went on after its page was closed"
    assert not finished
