"""Atomic, never-overwriting file output: write to a temporary sibling, fsync, then rename into place.

A command probes its output first (`refuse_existing`, `refuse_unwritable`), so that a result is never lost to an
unwritable or missing folder after the work; every message names the path the user gave, never a temporary one.
Simplification: the probe tests the folder once, before the work; a folder that turns read-only or a disk that
fills during the work still fails at the end (cli.main then names the folder: `disk_full_message`).
"""

from __future__ import annotations

import contextlib
import errno
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


def _nearest_existing(path: Path) -> Path:
    """The folder a write to `path` lands in, or the nearest existing ancestor where it would be made (a path
    whose parent is a file stops at that file)."""
    folder = path if path.is_dir() else path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _unwritable(path, folder: Path, err: OSError | None = None) -> ValueError:
    if not folder.is_dir():
        return ValueError(f"cannot write {path}: {folder} is a file, not a folder; choose another --out")
    reason = "a read-only file system" if err is not None and err.errno == errno.EROFS else \
        (err.strerror or str(err)) if err is not None else "not writable"
    return ValueError(f"cannot write {path}: the folder {folder} is not writable ({reason}); choose another --out "
                      "or make the folder writable")


def refuse_unwritable(path: str | os.PathLike) -> None:
    """Before any work: raise a one-line ValueError naming `path` unless a file can be made where `path` would be
    written (its folder, or the nearest existing ancestor a missing folder is made in). The honest test is to
    create and remove a file there: permission bits say nothing for root, nor of a read-only mount."""
    folder = _nearest_existing(Path(path))
    if not folder.is_dir():
        raise _unwritable(path, folder)
    try:
        fd, probe = tempfile.mkstemp(prefix=".glm53-probe.", suffix=".tmp", dir=folder)  # housekeeping-named
    except OSError as err:
        raise _unwritable(path, folder, err) from None
    os.close(fd)
    os.unlink(probe)


def refuse_unusable_output(path: str | os.PathLike) -> None:
    """Both probes a command runs on its --out before any work: it must not exist, and it must be writable."""
    refuse_existing(path)
    refuse_unwritable(path)


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk, or a full quota
# torch.save's writer on a short write (the disk filled under it): "[enforce fail at inline_container.cc:672] .
# unexpected pos 704 vs 598" (torch 2.13), or "PytorchStreamWriter failed writing file ...: file write failed"
TORCH_SHORT_WRITE = ("unexpected pos", "PytorchStreamWriter", "file write failed")


def _disk_full(err: BaseException | None) -> tuple[BaseException, bool] | None:
    """(the error in `err`'s chain that says the disk is full, whether it says so for certain), or None. Besides
    OSError ENOSPC, safetensors says it as `I/O error: No space left on device (os error 28)`, and torch.save
    only that its write came up short (`TORCH_SHORT_WRITE`), which a full disk is the common cause of."""
    for _ in range(8):  # a chain is short; the bound guards against a cycle
        if err is None:
            return None
        text = str(err)
        if (isinstance(err, OSError) and err.errno in NO_SPACE) or "No space left on device" in text \
                or "os error 28" in text:
            return err, True
        if "inline_container.cc" in text and any(words in text for words in TORCH_SHORT_WRITE):
            return err, False
        err = err.__cause__ or err.__context__
    return None


def disk_full_message(err: BaseException, out: str | os.PathLike | None) -> str | None:
    """One line for a write that ran out of disk space, naming the folder written to (`out`, the command's
    --out, else the file the error names) and its free space now, or None for any other error."""
    found = _disk_full(err)
    if found is None:
        return None
    full, certain = found
    where = Path(out) if out else Path(getattr(full, "filename", None) or ".")
    folder = _nearest_existing(where.absolute())
    try:
        free = f"{shutil.disk_usage(folder).free / 2**20:,.0f} MiB free now"
    except OSError:
        free = "free space unknown"
    what = "the disk is full" if certain else "the disk is likely full"
    why = "no space left" if certain else "torch.save wrote fewer bytes than it meant to"
    return (f"{what}: writing {where} failed, {why} on the device that holds {folder} ({free}); free some space "
            "there, or choose an --out on another disk")


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
    refuse_unwritable(folder)  # before mkdir and the lock file, so the message names the folder given
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
def atomic_writer(path: str | os.PathLike, overwrite: bool = False, binary: bool = False):
    """A text file handle (with `binary`, a bytes one) whose content appears at `path` only when the block ends
    without an error."""
    path = Path(path)
    if not overwrite:
        refuse_existing(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # named as the user's path, not the temporary one
        raise _unwritable(path, _nearest_existing(path), err) from None
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes owner-only files; results are shared like any other
    try:
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as f:
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
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.", suffix=".tmp", dir=self.final.parent))
        except OSError as err:  # named as the user's path, not the temporary one
            raise _unwritable(self.final, _nearest_existing(self.final), err) from None
        os.chmod(self.tmp, 0o777 & ~_umask())
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return
        try:
            shared = 0o666 & ~_umask()
            for child in sorted(self.tmp.rglob("*")):  # files in subfolders too (a DatasetDict's splits)
                if child.is_file() and not child.is_symlink():
                    # safetensors (0.8) creates its files owner-only (0600, where torch.save and open() give 0644
                    # under umask 022): results are shared like any other file (executable bits, if any, are kept)
                    os.chmod(child, shared | (child.stat().st_mode & 0o111))
                    with open(child, "rb") as f:
                        os.fsync(f.fileno())
            os.rename(self.tmp, self.final)  # atomic on one filesystem; fails if final is a non-empty directory
        except BaseException as err:  # every way out but the rename leaves no temporary behind
            shutil.rmtree(self.tmp, ignore_errors=True)
            if isinstance(err, OSError) and self.final.exists():  # another writer finished first
                raise FileExistsError(f"{self.final} appeared while this was being written (another command writing "
                                      "the same --out?); glm53 never overwrites results, so nothing was written. "
                                      "Choose another --out") from None
            raise
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


def read_json(path: str | os.PathLike):
    """A JSON file's value; a damaged or unreadable one is a one-line ValueError naming the file (json's own
    error names only a line and column)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}); a write "
                         "that stopped midway, or an edit: restore it, or delete the folder it belongs to and rerun "
                         "what wrote it") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text, so not a JSON file glm53 wrote; restore it, or delete the "
                         "folder it belongs to and rerun what wrote it") from None


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    # "\n" only: json_text writes U+2028 and the like raw (ensure_ascii=False), and str.splitlines ends a line there
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def truncate_jsonl(path: str | os.PathLike, keep) -> list[dict]:
    """Keep only the rows for which keep(row) is true (a resumed run drops what came after its checkpoint)."""
    rows = [r for r in read_jsonl(path) if keep(r)]
    atomic_write_text(path, "".join(json_text(r) + "\n" for r in rows), overwrite=True)
    return rows
