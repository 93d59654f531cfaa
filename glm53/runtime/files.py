"""Atomic, never-overwriting file output: write to a temporary sibling, fsync, then rename into place."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path


def refuse_existing(path: str | os.PathLike) -> None:
    """glm53 never overwrites a result: raise if `path` exists."""
    if Path(path).exists():
        raise FileExistsError(f"{path} already exists; glm53 never overwrites results. "
                              "Choose another path or move the old one away.")


LOCK_NAME = ".glm53.lock"


def is_housekeeping(name: str) -> bool:
    """The lock file and the temporary files and folders of atomic writes (hidden, ending in .tmp)."""
    return name == LOCK_NAME or (name.startswith(".") and name.endswith(".tmp"))


def remove_stale_temporaries(folder: str | os.PathLike) -> list[str]:
    """Delete what interrupted atomic writes left in `folder` (call it holding the folder's lock)."""
    removed = []
    for entry in Path(folder).iterdir() if Path(folder).is_dir() else ():
        if entry.name != LOCK_NAME and is_housekeeping(entry.name):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            removed.append(entry.name)
    return removed


@contextlib.contextmanager
def run_lock(folder: str | os.PathLike):
    """One writer per run folder: an exclusive lock on `folder/.glm53.lock`, held for the block (the kernel
    releases it if the process dies)."""
    import fcntl

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"{folder} exists as a file; --out must name a folder")
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise FileExistsError(f"{folder} is in use by another glm53 process; wait for it to finish, "
                              "or choose another --out") from None
    try:
        yield folder
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def refuse_nonempty_dir(path: str | os.PathLike, hint: str = "") -> None:
    """Raise if `path` holds anything but housekeeping files (an empty folder may be reused), or is a file."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(not is_housekeeping(p.name) for p in path.iterdir())):
        raise FileExistsError(f"{path} already exists{' and is not empty' if path.is_dir() else ' as a file'}; "
                              f"glm53 never overwrites results. {hint or 'Choose another --out.'}")


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, overwrite: bool = False):
    """A text file handle whose content appears at `path` only when the block ends without an error."""
    path = Path(path)
    if not overwrite:
        refuse_existing(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes owner-only files; results are shared like any other
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            # link() fails if the target appeared meanwhile, so even a race never overwrites.
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str, overwrite: bool = False) -> None:
    with atomic_writer(path, overwrite) as f:
        f.write(text)


def json_text(obj, **kwargs) -> str:
    """JSON that keeps non-ASCII text readable and can always be written as UTF-8: a model's completion may hold
    a lone surrogate (the byte tokenizer decodes any bytes, exactly), which UTF-8 cannot encode, so those are
    written as JSON escapes (\\udXXX), which json.loads reads back as the same character."""
    return json.dumps(obj, ensure_ascii=False, **kwargs).encode("utf-8", "backslashreplace").decode("utf-8")


def atomic_write_json(path: str | os.PathLike, obj, overwrite: bool = False) -> None:
    atomic_write_text(path, json_text(obj, indent=2, sort_keys=True) + "\n", overwrite)


class AtomicDirectory:
    """Build a directory under a temporary name and rename it into place on success.

        with AtomicDirectory(final) as tmp:
            write files into tmp
    A failure leaves no partial directory at `final`; an existing `final` is never replaced.
    """

    def __init__(self, final: str | os.PathLike):
        self.final = Path(final)

    def __enter__(self) -> Path:
        refuse_existing(self.final)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.", suffix=".tmp", dir=self.final.parent))
        os.chmod(self.tmp, 0o777 & ~_umask())
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        for child in self.tmp.iterdir():
            if child.is_file():
                with open(child, "rb") as f:
                    os.fsync(f.fileno())
        os.rename(self.tmp, self.final)  # atomic on one filesystem; fails if final is a non-empty directory
        _fsync_dir(self.final.parent)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def truncate_jsonl(path: str | os.PathLike, keep) -> list[dict]:
    """Keep only the rows for which keep(row) is true (a resumed run drops what came after its checkpoint)."""
    rows = [r for r in read_jsonl(path) if keep(r)]
    atomic_write_text(path, "".join(json_text(r) + "\n" for r in rows), overwrite=True)
    return rows
