"""`glm53 serve`: a playground in the browser (FastAPI and uvicorn, the `serve` extra). Read in this order:

    serve_config.py   ServeConfig: where it listens and the bounds every request is held to (light)
    commands.py       `glm53 serve`: parse, refuse, load, listen
    checkpoints.py    the served checkpoints, loaded and checked as `glm53 eval` loads them, with their suite
    trace.py          per byte: its probability and routed experts; per position: the sparse layers' picks
    generation.py     requests in turn, each completion streamed and its program judged by the verifier pool
    requests.py       a request body made into a Job, or refused with one sentence
    runs.py           the runs view: reports, receipts and curves of the run folders under --runs
    guard.py          only the person at the keyboard drives it: Host, Origin and Content-Type checked first
    app.py            the routes, the event stream and the one-sentence refusals
    page/             the page itself: index.html, app.js, style.css (plain: no build step, no CDN)
"""
