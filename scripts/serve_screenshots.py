"""The docs' screenshots of `glm53 serve` (docs/playground.md), taken in the system's headless Chromium.

    python scripts/serve_screenshots.py --checkpoint RUN/pretrain/checkpoint-0100 \
        --checkpoint RUN/rl/checkpoint-0016 --runs RUNS --task confirm/confirm-double-000 --out docs/images

Starts `glm53 serve` on 127.0.0.1 (a free port), asks both checkpoints for one task (or a description with its
cases), and
saves: playground-verdict.png (the first pane: completion and verdict), playground-experts.png (its bytes, heat
map and one position's sparse picks), playground-side-by-side.png (the whole page) and playground-runs.png (the
first run's report). Needs the serve extra and Debian's chromium and chromium-driver; refuses existing files.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         "--window-size=1400,1100", "--hide-scrollbars")
NAMES = ("playground-verdict.png", "playground-experts.png", "playground-side-by-side.png", "playground-runs.png")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", action="append", required=True)
    p.add_argument("--runs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--description", default="Double the input.")
    p.add_argument("--signature", default="double(x)")
    p.add_argument("--cases", default="3 -> 6\n-2 -> -4\n0 -> 0\n21 -> 42")
    p.add_argument("--task", default=None, metavar="SPLIT/TASK_ID",
                   help="pick this task of a split (its prompt and cases) instead of typing the description")
    args = p.parse_args()
    out = Path(args.out)
    taken = [n for n in NAMES if (out / n).exists()]
    if taken:
        sys.exit(f"serve_screenshots.py: {out / taken[0]} exists; remove it or give another --out")
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    port = free_port()
    command = [sys.executable, "-m", "glm53", "serve", "--port", str(port), "--runs", args.runs]
    for c in args.checkpoint:
        command += ["--checkpoint", c]
    server = subprocess.Popen(command)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="glm53-shots-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"))
    try:
        wait = WebDriverWait(driver, 120)
        for _ in range(240):  # the server loads its checkpoints and starts its sandbox first
            try:
                driver.get(f"http://127.0.0.1:{port}/")
                break
            except Exception:  # noqa: BLE001 - connection refused until it listens
                time.sleep(0.5)
        wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".use-checkpoint")))
        if args.task:
            from selenium.webdriver.support.ui import Select

            split, task_id = args.task.split("/")
            driver.find_element(By.CSS_SELECTOR, "input[name=mode][value=task]").click()
            Select(driver.find_element(By.ID, "split")).select_by_value(split)
            wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, f"#task option[value='{task_id}']")))
            Select(driver.find_element(By.ID, "task")).select_by_value(task_id)
        else:
            driver.find_element(By.ID, "description").send_keys(args.description)
            signature = driver.find_element(By.ID, "signature")
            signature.clear()
            signature.send_keys(args.signature)
            driver.find_element(By.ID, "cases").send_keys(args.cases)
        driver.find_element(By.ID, "generate").click()
        for pane in ("#pane-0", f"#pane-{len(args.checkpoint) - 1}"):
            wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, f"{pane} .verdict .badge")))
        bytes_shown = driver.find_elements(By.CSS_SELECTOR, "#pane-0 .bytes .byte")
        bytes_shown[min(6, len(bytes_shown) - 1)].click()
        wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, "#pane-0 .attention .row")))
        out.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out / NAMES[2]))
        pane = driver.find_element(By.ID, "pane-0")
        driver.execute_script("window.scrollTo(0, 0)")
        for element, name in ((pane, NAMES[0]), (pane, NAMES[1])):
            if name == NAMES[1]:
                driver.execute_script("arguments[0].scrollIntoView()", pane.find_element(By.CSS_SELECTOR, ".bytes"))
            element.screenshot(str(out / name))
        driver.find_element(By.ID, "tab-runs").click()
        wait.until(seen.element_to_be_clickable((By.CSS_SELECTOR, "#runs-list button.run"))).click()
        wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, ".run-report img")))
        time.sleep(1)  # the report's charts finish loading (a screenshot only; nothing is asserted)
        driver.save_screenshot(str(out / NAMES[3]))
        print("wrote " + ", ".join(str(out / n) for n in NAMES))
    finally:
        driver.quit()
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
