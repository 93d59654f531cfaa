"""glm53 serve under load, on the loopback only: time to first token and tokens/s of one stream against
`glm53 generate` on the same prompt, then N clients asking at once for a while (none may fail; the longest wait
and the server's memory are printed).

    python scripts/serve_load.py --checkpoint DIR [--clients 10] [--seconds 60]

Bounded: at most 20 clients and 300 seconds, always 127.0.0.1 on a free port. The server is `glm53 serve` in its
own process; its resident memory (VmRSS) is read from /proc every 5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

PROMPT = "# Complete this Python function.\n# Return x squared.\ndef square(x):"
BODY = {"mode": "prompt", "prompt": PROMPT, "cases": "3 -> 9\n-2 -> 4", "checkpoints": [0], "max_new_tokens": 48}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def one_request(http, url: str, body: dict) -> dict:
    """Send one request; its status, seconds to the first token event, token count and total seconds."""
    started, first, tokens, status = time.perf_counter(), None, 0, None
    with http.stream("POST", url + "/api/generate", json=body) as r:
        status = r.status_code
        for line in r.iter_lines():
            if line.startswith("event: token"):
                tokens += 1
                first = first or time.perf_counter() - started
            elif line.startswith("event: error"):
                status = "error"
    return {"status": status, "first": first, "tokens": tokens, "seconds": time.perf_counter() - started}


def generate_figures(checkpoint: str) -> dict:
    """`glm53 generate`'s decoding (generate_groups, its settings) on the same prompt, in this process, as the command
    runs it (the main thread) and as the server runs a request (a worker thread): medians of 3 after a warm-up, load
    excluded; and the whole command's wall time. On a 2-core machine shared with other work the two threads differ
    by far more than the server's overhead: print both."""
    import torch

    from glm53.decode.engine import generate_groups
    from glm53.decode.sampling import Sampling
    from glm53.decode.generate import STOP_RULES
    from glm53.checkpoints.format import load_model

    model = load_model(checkpoint, "cpu").model
    sampling = Sampling(max_new_tokens=48)
    found: dict = {}

    def decode(where: str) -> None:
        times = []
        for _ in range(4):  # the first is a warm-up
            started = time.perf_counter()
            out = generate_groups(model, [PROMPT], 1, sampling, generator=torch.Generator().manual_seed(0),
                                  stop=STOP_RULES["statement"])[0][0]
            times.append(time.perf_counter() - started)
        found[where], found["tokens"] = statistics.median(times[1:]), len(out["token_ids"])

    decode("main")
    worker = threading.Thread(target=decode, args=("worker",))
    worker.start()
    worker.join()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "glm53", "generate", "--checkpoint", checkpoint, "--prompt", PROMPT,
                    "--device", "cpu"], check=True, capture_output=True)
    return {**found, "command_seconds": time.perf_counter() - started}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--seconds", type=float, default=60)
    args = p.parse_args()
    if not 1 <= args.clients <= 20 or not 1 <= args.seconds <= 300:
        sys.exit("serve_load.py: --clients must be 1 to 20 and --seconds 1 to 300")
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "glm53", "serve", "--checkpoint", args.checkpoint,
                               "--port", str(port), "--max-waiting", str(max(16, args.clients))])
    try:
        with httpx.Client(timeout=300) as http:
            for _ in range(600):  # until it listens (it loads the checkpoint and starts the sandbox first)
                try:
                    http.get(url + "/api/info")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            one_request(http, url, BODY)  # warm-up
            single = [one_request(http, url, BODY) for _ in range(3)]
        gen = generate_figures(args.checkpoint)
        ttft = statistics.median(r["first"] for r in single)
        stream_rate = statistics.median(r["tokens"] / (r["seconds"] - r["first"]) for r in single if r["tokens"] > 1)
        print(f"one stream ({single[0]['tokens']} tokens, median of 3): time to first token {1000 * ttft:.0f} ms, "
              f"{stream_rate:.1f} tokens/s after it, {statistics.median(r['seconds'] for r in single):.2f} s whole "
              "(with the sandbox's verdict)")
        print(f"glm53 generate, same prompt ({gen['tokens']} tokens, median of 3, loading excluded; the first token is "
              f"printed with the last): {gen['main']:.2f} s in the main thread as the command runs it "
              f"({gen['tokens'] / gen['main']:.1f} tokens/s), {gen['worker']:.2f} s in a worker thread as the server "
              f"runs it ({gen['tokens'] / gen['worker']:.1f} tokens/s); the whole command "
              f"{gen['command_seconds']:.1f} s")
        results: list[dict] = []
        rss: list[float] = [rss_mb(server.pid)]
        stop_at = time.monotonic() + args.seconds

        def client(i: int) -> None:
            with httpx.Client(timeout=300) as http:
                while time.monotonic() < stop_at:
                    try:
                        results.append(one_request(http, url, {**BODY, "seed": i, "temperature": 0.8}))
                    except httpx.HTTPError as err:
                        results.append({"status": type(err).__name__, "first": None, "tokens": 0, "seconds": 0})

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            time.sleep(5)  # a sampling interval, not a wait for anything
            rss.append(rss_mb(server.pid))
        for t in threads:
            t.join()
        failed = [r for r in results if r["status"] != 200]
        waits = sorted(r["seconds"] for r in results if r["status"] == 200)
        print(f"{args.clients} clients for {args.seconds:.0f} s: {len(results)} requests, {len(failed)} failed "
              f"{json.dumps(sorted({str(r['status']) for r in failed})) if failed else ''}; each took "
              f"{waits[0]:.2f} s to {waits[-1]:.2f} s (median {statistics.median(waits):.2f} s); "
              f"{sum(r['tokens'] for r in results) / args.seconds:.1f} tokens/s served in all")
        print(f"server RSS every 5 s (MB): {' '.join(f'{m:.0f}' for m in rss)}; "
              f"first {rss[0]:.0f}, last {rss[-1]:.0f}, most {max(rss):.0f}")
        print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
