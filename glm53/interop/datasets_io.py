"""Task files and corpora as Hugging Face datasets: `glm53 tasks export --format datasets|parquet` writes them, and
--tasks (--tasks-file) and --corpus read them back. data/ reads task files and corpora a floor below this one, so
it asks for these readers and the writer by role (runtime/providers.py; the package face registers them).

A path names a dataset in one of these forms (anything else is no dataset, and the caller reads its own formats):
    DIR            a folder that `save_to_disk` wrote of one Dataset (state.json and dataset_info.json)
    DIR:SPLIT      one split of a folder `save_to_disk` wrote of a DatasetDict (dataset_dict.json), or SPLIT.parquet
                   of a folder of parquet files (what --split all --format parquet writes); DIR alone is refused in
                   one line naming its splits
    FILE.parquet   a parquet file

Columns. A task's are its JSON Lines row's keys (glm53/data/tasks.py Task.to_json; a broad task's add split, root,
depth, phrasings, pairs, body), each value as the row has it, except "cases": a case list mixes types an Arrow
column cannot hold (an argument list beside its expected value; ints, booleans, strings and nested lists in one
split; ints past int64, such as 12345678901234567890), so it is stored as the JSON text the row's "cases" has,
which json.loads gives back exactly, integers of any size included. A row read back is the row written, so it
reads to an equal task. Reading also takes "cases" as a list, for a dataset made elsewhere whose cases Arrow could
hold; a key that only some rows have is null in the others, and a null is read as the key absent (as "language"
is absent from a reference row). A corpus's column is "text", as in its JSON Lines rows; other columns are ignored.

Everything goes through the `datasets` package (the hf extra), imported only when a path is one of these forms,
and only on local paths: load_from_disk, save_to_disk and to_parquet, and a parquet file read into an in-memory
Dataset (Dataset.from_parquet would copy it into ~/.cache/huggingface first). None of them downloads anything.
Simplification: a dataset is read whole into memory, as a JSON Lines file is.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..data.tasks import TASK_KEYS
from ..runtime.files import AtomicDirectory, atomic_writer, json_text
from . import require_hf

PARQUET = ".parquet"
DATASET_FILES = ("state.json", "dataset_info.json")  # what save_to_disk writes for a Dataset
DATASET_DICT_FILE = "dataset_dict.json"  # and for a DatasetDict, beside a folder for each split
TEXT = "text"


@dataclass(frozen=True)
class DatasetSource:
    """Where a dataset path's rows are: `label` is the path as given (every message names it)."""
    label: str
    kind: str  # "datasets" (a save_to_disk folder) or "parquet"
    path: Path  # the save_to_disk folder (a DatasetDict's, with `split`) or the parquet file
    split: str | None = None


def _splits(folder: Path) -> tuple[str, tuple[str, ...]] | None:
    """(kind, split names) of a DatasetDict folder or a folder holding only parquet files, else None."""
    if (folder / DATASET_DICT_FILE).is_file():
        try:
            return "datasets", tuple(json.loads((folder / DATASET_DICT_FILE).read_text())["splits"])
        except (ValueError, KeyError, TypeError):
            return None
    entries = [e for e in folder.iterdir() if not e.name.startswith(".")]
    if entries and all(e.suffix == PARQUET and e.is_file() for e in entries):
        return "parquet", tuple(sorted(e.stem for e in entries))
    return None


def dataset_source(path, what: str) -> DatasetSource | None:
    """What `path` names as a dataset (module docstring), or None when it is no dataset. `what` starts each message
    ("task file", "--corpus"): a folder of splits given without one, and a split it does not have, are one line."""
    label, given = str(path), Path(path)
    if given.is_file():
        return DatasetSource(label, "parquet", given) if given.suffix == PARQUET else None
    if given.is_dir():
        if all((given / name).is_file() for name in DATASET_FILES):
            return DatasetSource(label, "datasets", given)
        found = _splits(given)
        if found is not None:
            raise ValueError(f"{what} {label} holds the splits {', '.join(found[1])}, not one dataset; choose one "
                             f"as {label}:{found[1][0]}")
        return None
    folder, colon, split = label.rpartition(":")
    found = _splits(Path(folder)) if colon and folder and split and Path(folder).is_dir() else None
    if found is None:
        return None
    kind, names = found
    if split not in names:
        raise ValueError(f"{what} {label}: {folder} has no split {split!r}; its splits are {', '.join(names)}")
    return DatasetSource(label, kind, Path(folder) / f"{split}{PARQUET}" if kind == "parquet" else Path(folder),
                         split if kind == "datasets" else None)


def _datasets(use: str):
    """The datasets package, or a one-line ValueError naming the extra that brings it."""
    require_hf(use, ("datasets",))
    import datasets

    return datasets


@contextlib.contextmanager
def _quiet(datasets):
    """datasets' progress bars off for the block: a task file is small, and the command says what it wrote."""
    was_on = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_on:
            datasets.enable_progress_bars()


def _load(source: DatasetSource, what: str, needed: tuple[str, ...]):
    """The Dataset `source` names, its columns checked for `needed` (a one-line ValueError naming the missing)."""
    use = f"{what} {source.label} (a {'parquet file' if source.kind == 'parquet' else 'datasets folder'})"
    datasets = _datasets(use)
    try:
        with _quiet(datasets):
            if source.kind == "parquet":
                import pyarrow.parquet

                dataset = datasets.Dataset(datasets.table.InMemoryTable(pyarrow.parquet.read_table(source.path)))
            else:
                dataset = datasets.load_from_disk(str(source.path))
                dataset = dataset[source.split] if source.split else dataset
    except (OSError, ValueError, KeyError) as err:  # pyarrow's errors are OSError or ValueError
        raise ValueError(f"{use} cannot be read: {type(err).__name__}: {err}") from None
    if not isinstance(dataset, datasets.Dataset):
        raise ValueError(f"{use} holds a {type(dataset).__name__}, not a Dataset; give one split's folder")
    missing = [c for c in needed if c not in dataset.column_names]
    if missing:
        raise ValueError(f"{what} {source.label} has no column {', '.join(map(repr, missing))} (its columns: "
                         f"{', '.join(dataset.column_names) or 'none'}); it needs {', '.join(map(repr, needed))}")
    return dataset


def read_dataset_tasks(path) -> list[tuple[str, str, dict]] | None:
    """(where, position, row) of each task of a dataset `path`, each row as its JSON Lines line would hold it (for
    glm53.data.tasks.read_tasks to check), or None when `path` is no dataset."""
    source = dataset_source(path, "task file")
    if source is None:
        return None
    rows = []
    for index, row in enumerate(_load(source, "task file", TASK_KEYS).to_list()):
        where, row = f"{source.label} row {index}", {k: v for k, v in row.items() if v is not None}
        if isinstance(row.get("cases"), str):
            try:
                row["cases"] = json.loads(row["cases"])
            except ValueError as err:
                raise ValueError(f"{where}: 'cases' is not JSON ({getattr(err, 'msg', err)}); it holds the JSON "
                                 "text of [[args_list, expected], ...]") from None
        rows.append((where, f"row {index}", row))
    return rows


def read_dataset_texts(path) -> tuple[list[tuple[str, object]], str] | None:
    """([(document name, its "text" value)], "datasets" or "parquet") of a dataset `path`, for
    glm53.data.corpus.read_documents to check, or None when `path` is no dataset."""
    source = dataset_source(path, "--corpus")
    if source is None:
        return None
    texts = _load(source, "--corpus", (TEXT,))[TEXT]
    return [(f"row {index}", text) for index, text in enumerate(texts)], source.kind


def _task_columns(tasks) -> dict[str, list]:
    """The tasks' JSON Lines rows as columns (module docstring): every key any row has, in order of first sight."""
    rows = [t.to_json() for t in tasks]
    rows = [{**row, "cases": json_text(row["cases"])} for row in rows]  # the text its JSON Lines line holds
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return {key: [row.get(key) for row in rows] for key in keys}


def write_dataset_tasks(make_splits, out: str, form: str, whole: bool) -> dict[str, list]:
    """Write the tasks of `make_splits()` ({split: tasks}, called once the package has loaded, so a missing extra
    costs no work) to `out`, which must not exist, and return them. `form` "datasets": save_to_disk of one split's
    Dataset, or with `whole` of a DatasetDict of every split; "parquet": a parquet file, or with `whole` a folder
    of SPLIT.parquet. Atomic: a failure leaves nothing at `out`."""
    datasets = _datasets(f"glm53 tasks export --format {form}")
    splits = make_splits()
    tables = {split: datasets.Dataset.from_dict(_task_columns(tasks)) for split, tasks in splits.items()}
    with _quiet(datasets):
        if not whole and form == "parquet":
            with atomic_writer(out, binary=True) as f:
                next(iter(tables.values())).to_parquet(f)
            return splits
        with AtomicDirectory(out) as tmp:
            if form == "datasets":
                (datasets.DatasetDict(tables) if whole else next(iter(tables.values()))).save_to_disk(str(tmp))
            else:
                for split, table in tables.items():
                    table.to_parquet(str(tmp / f"{split}{PARQUET}"))
    return splits
