"""The verifier's second wall: operating-system isolation for candidate processes (Linux).

Standard library only (the sandbox worker imports it under `python -I -S`). Three layers, each optional and
each reported, so that a gap in the static stage is not an escape:

- `namespaces`: per template, a new network namespace (only a loopback interface, down: no network at all), a
  new PID namespace whose init is the template (a program sees only itself and the template, which as init
  ignores every signal it has no handler for), a UTS namespace (the host name a program reads is
  `glm53-sandbox`, not the host's), and a new mount namespace in which every mount is read-only,
  nosuid and nodev (a mount that cannot be made so turns the layer off), then a pivot into an empty read-only root
  holding only the scratch directory, the one writable place (the old root, /proc and /sys are detached: no host
  file is in reach, even to read); per program, a new IPC namespace (no SysV segment or message queue of one job
  is visible to the next), a new session key ring and then (after the uid drop) a user namespace of its own, where its
  user, user-session and persistent key rings are its own, empty and gone with it (a key one job adds is not in the
  next's reach), and every capability dropped (bounding, ambient, effective, permitted, inheritable; no_new_privs): in
  the unprivileged mode the template holds every capability over its namespaces, with which a program could remount
  the root read-write. The worker empties and checks the scratch folder after every job. These per-program steps are
  tried once in the template; where the kernel refuses the user namespace, the report says the key ring is the
  template's. As root this is a plain unshare; otherwise it goes through a user namespace, where the kernel allows
  one.
- `drop-user`: as root, each program runs under a uid and gid of its own template's, `SANDBOX_ID_BASE` plus the
  template's process id (a reserved range no account uses): no capabilities, no root-owned files, and no other
  template's processes or the caller's can be signalled even with seccomp off (inside its own user namespace a
  program reads the overflow uid, 65534). Unprivileged, the program keeps the caller's uid (inside the user
  namespace, with no capability and no host file in its empty root), so one template's programs are not kept
  apart by uid: the layer reports off.
- `seccomp`: a syscall allow-list for a pure computation (memory, reads, clocks, exit). Everything else fails
  with EPERM: sockets, exec, fork/clone, ptrace, kill and every other signal sent, mount, unshare, ioctl, and
  any open for writing or creating (anywhere: the candidate never needs to write a file). `fcntl` only with
  the descriptor-flag commands (no owner, signal, lease or notify command, which would make the kernel signal
  another process); `prlimit64` and `sched_getaffinity` only on the calling process (pid 0) and `prlimit64`
  only to read. The filter is compiled once with libseccomp (through ctypes) and loaded in each child with
  `no_new_privs` set.

Set-up runs once in the sandbox template process (before any job) for the namespaces; the per-program steps
(IPC namespace, uid, limits, seccomp) run in each child before the candidate is defined.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re

LAYERS = ("namespaces", "drop-user", "seccomp")

# <sched.h> and <sys/mount.h>
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x40000000
CLONE_NEWUTS = 0x04000000
SANDBOX_HOSTNAME = b"glm53-sandbox"
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PIVOT_ROOT_SYSCALL = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}  # no libc wrapper
CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2
# <linux/prctl.h>, <linux/capability.h>, <linux/keyctl.h>: capabilities dropped and the key ring replaced per program
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
KEYCTL_JOIN_SESSION_KEYRING = 1
KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 271, "s390x": 280}  # no libc wrapper
# uids and gids [2**30, 2**30 + 2**22) are the sandboxes': one per template, by its pid (pids are below 2**22)
SANDBOX_ID_BASE = 1 << 30
# <fcntl.h>: the only commands a child may use (descriptor and status flags read, close-on-exec set, a dup)
F_DUPFD_CLOEXEC, F_GETFD, F_SETFD, F_GETFL = 1030, 1, 2, 3
ALLOWED_FCNTL = (F_GETFD, F_SETFD, F_GETFL, F_DUPFD_CLOEXEC)

# libseccomp's constants (seccomp.h)
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 4, 7
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# What a running Python computation needs once its job is read. Names missing on an architecture are skipped.
ALLOWED_SYSCALLS = (
    "read", "readv", "pread64", "write", "writev", "close", "lseek", "fstat", "newfstatat", "stat", "lstat",
    "statx", "getdents64", "getcwd", "readlink", "readlinkat", "access", "faccessat", "faccessat2",
    "mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "futex", "sched_yield",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "getpid", "gettid", "getppid", "getuid",
    "geteuid", "getgid", "getegid", "getrandom", "clock_gettime", "clock_getres", "gettimeofday", "time",
    "getrusage", "uname", "exit", "exit_group",
)


class IsolationError(OSError):
    pass


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise IsolationError(code, f"{what}: {os.strerror(code)}")


def set_parent_death_signal(libc=None, parent: int | None = None) -> None:
    """Die with SIGKILL when the parent dies, so no sandbox process outlives the worker. `parent`: the pid this
    process was forked by; if it died before the setting took, the signal will never come, so exit now."""
    _check((libc or _libc()).prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if parent is not None and os.getppid() != parent:
        os._exit(0)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def unescape_mount_path(field: str) -> str:
    """/proc/self/mountinfo writes a space, tab, newline and backslash in a path as octal escapes (\\040 ...)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def enter_namespaces(scratch: str) -> str:
    """Unshare network, IPC, PID and mount namespaces and make every mount but `scratch` read-only. Returns how.
    The caller's next child is the new PID namespace's init."""
    libc = _libc()
    flags = CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS
    how = "root"
    if os.geteuid() != 0:
        uid, gid = os.geteuid(), os.getegid()
        _check(libc.unshare(flags | CLONE_NEWUSER), "unshare(user, net, ipc, pid, mount, uts)")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        how = "user namespace"
    else:
        _check(libc.unshare(flags), "unshare(net, ipc, pid, mount, uts)")
    # a UTS namespace of its own: a program reads this name, not the host's
    _check(libc.sethostname(SANDBOX_HOSTNAME, len(SANDBOX_HOSTNAME)), "sethostname")
    mount = libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _check(mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount(/, private)")
    with open("/proc/self/mountinfo") as f:
        mounts = [(unescape_mount_path(line.split()[4]), line.split()[5].split(",")) for line in f]
    # flags a user namespace may not drop from a mount it inherited (the atime ones included): kept as they are
    kept = {"noexec": MS_NOEXEC, "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
    for point, options in mounts:
        extra = sum(bit for name, bit in kept.items() if name in options)
        # MS_BIND: a per-mount change in our namespace, not a remount of the filesystem for the whole machine
        result = mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | extra,
                       None)
        # a point that no longer resolves (its folder deleted, or outside this root) cannot be reached either
        if result != 0 and not (ctypes.get_errno() == errno.ENOENT and not os.path.lexists(point)):
            _check(result, f"remount {point!r} read-only")
    enter_empty_root(libc, mount, os.path.realpath(scratch).encode())
    return how


def enter_empty_root(libc, mount, scratch: bytes) -> None:
    """Pivot into a new, read-only root that holds nothing but the scratch folder (at /scratch, the working
    directory), and detach the old root whole: no file of the host's is in reach, not even to read (a task file on
    disk holds expected values; a host's unix socket is a path). The new root is built on /proc's mount point,
    which every Linux system has and which a program must not see anyway."""
    number = PIVOT_ROOT_SYSCALL.get(os.uname().machine)
    if number is None:
        raise IsolationError(errno.ENOSYS, f"pivot_root's syscall number is not known on {os.uname().machine}")
    _check(mount(b"tmpfs", b"/proc", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=16k,mode=0755"),
           "mount the new root")
    os.mkdir("/proc/scratch", 0o755)
    os.mkdir("/proc/old", 0o700)
    _check(mount(scratch, b"/proc/scratch", None, MS_BIND, None), "bind scratch")
    _check(mount(None, b"/proc/scratch", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, None), "scratch writable")
    _check(libc.syscall(number, b"/proc", b"/proc/old"), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/old", MNT_DETACH), "detach the old root")
    os.rmdir("/old")
    _check(mount(None, b"/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
           "new root read-only")
    os.chdir("/scratch")


def sandbox_id(template_pid: int) -> int:
    """The uid and gid of a template's programs (root only): a reserved id no other template shares."""
    return SANDBOX_ID_BASE + template_pid


def enter_child(separate_ipc: bool, uid: int | None, parent: int | None = None, own_keys: bool = False,
                drop_capabilities: bool = False) -> None:
    """In each program's process, before its limits and filter: a fresh IPC namespace, a key ring of its own, its
    own uid, then no capability at all. A change of user clears the parent-death signal (prctl(2)), so it is set
    again after: without a PID namespace (root in a container that refuses one) it is what ends a program whose
    template died."""
    libc = _libc()
    if separate_ipc:
        _check(libc.unshare(CLONE_NEWIPC), "unshare(ipc)")
    if own_keys:
        # a new, empty, anonymous session key ring instead of the one inherited from the caller
        _check(_keyctl(libc, KEYCTL_JOIN_SESSION_KEYRING, None), "keyctl(join a new session key ring)")
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        set_parent_death_signal(parent=parent)
    if own_keys:
        # the user and user-session key rings (and the persistent one) are looked up per user namespace: in a new
        # one, unmapped, they are this program's own, empty, and gone with it. Made after the uid is dropped, so
        # the process's credentials stay the sandbox uid's (in its own namespace it holds capabilities only over
        # itself; they are all dropped next).
        _check(libc.unshare(CLONE_NEWUSER), "unshare(user) for a key ring of its own")
    if drop_capabilities:
        drop_all_capabilities(libc)


def _keyctl(libc, command: int, arg) -> int:
    number = KEYCTL_SYSCALL.get(os.uname().machine)
    if number is None:
        ctypes.set_errno(errno.ENOSYS)
        return -1
    result = libc.syscall(number, command, arg)
    return 0 if result >= 0 else result


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_all_capabilities(libc=None) -> None:
    """Every capability gone for good: the bounding set emptied (none can be gained by exec), the ambient set
    cleared, and the effective, permitted and inheritable sets zeroed; then no_new_privs. Needed in a user
    namespace (the unprivileged mode), where the template holds every capability over its namespaces: a program
    with them could remount the sandbox's root read-write."""
    libc = libc or _libc()
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:  # past the kernel's last capability
                break
            _check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
    if libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
        _check(-1, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")  # EINVAL: a kernel before ambient capabilities (4.3)
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset(none)")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompFilter:
    """The allow-list compiled to classic BPF once; `install()` (in the child) loads it with no_new_privs."""

    def __init__(self):
        try:
            lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
        except OSError:
            raise IsolationError(errno.ENOENT, "libseccomp is not installed (Debian/Ubuntu: libseccomp2)") from None
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(_ArgCmp)]
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        ctx = lib.seccomp_init(0x00050000 | errno.EPERM)  # SCMP_ACT_ERRNO(EPERM): the default for the rest
        if not ctx:
            raise IsolationError(errno.EINVAL, "seccomp_init failed")
        try:
            for syscall in ALLOWED_SYSCALLS:
                number = lib.seccomp_syscall_resolve_name(syscall.encode())
                if number >= 0:
                    self._rule(lib, ctx, number, [])
            # opening is allowed only without any write, create, truncate or append flag
            for syscall, flags_arg in (("open", 1), ("openat", 2)):
                number = lib.seccomp_syscall_resolve_name(syscall.encode())
                if number >= 0:
                    self._rule(lib, ctx, number, [_ArgCmp(flags_arg, SCMP_CMP_MASKED_EQ, WRITE_FLAGS, 0)])
            # reading one's own limits and affinity is fine; setting limits, or asking about another process
            # (which would tell which process ids exist), is not
            number = lib.seccomp_syscall_resolve_name(b"prlimit64")
            if number >= 0:
                self._rule(lib, ctx, number, [_ArgCmp(0, SCMP_CMP_EQ, 0, 0), _ArgCmp(2, SCMP_CMP_EQ, 0, 0)])
            number = lib.seccomp_syscall_resolve_name(b"sched_getaffinity")
            if number >= 0:
                self._rule(lib, ctx, number, [_ArgCmp(0, SCMP_CMP_EQ, 0, 0)])
            # fcntl only with commands that touch the descriptor itself: F_SETOWN/F_SETSIG/F_SETFL(O_ASYNC) would
            # have the kernel signal another process, F_SETLEASE/F_NOTIFY likewise
            number = lib.seccomp_syscall_resolve_name(b"fcntl")
            if number >= 0:
                for command in ALLOWED_FCNTL:
                    self._rule(lib, ctx, number, [_ArgCmp(1, SCMP_CMP_EQ, command, 0)])
            read_fd, write_fd = os.pipe()
            try:
                _check(lib.seccomp_export_bpf(ctx, write_fd), "seccomp_export_bpf")
                os.close(write_fd)
                write_fd = -1
                chunks = []
                while chunk := os.read(read_fd, 65536):
                    chunks.append(chunk)
            finally:
                os.close(read_fd)
                if write_fd >= 0:
                    os.close(write_fd)
        finally:
            lib.seccomp_release(ctx)
        self._program_bytes = ctypes.create_string_buffer(b"".join(chunks))
        self._program = _SockFprog(len(self._program_bytes.raw) // 8, ctypes.addressof(self._program_bytes))
        self._libc = _libc()
        self.instructions = self._program.len

    @staticmethod
    def _rule(lib, ctx, number: int, comparisons: list) -> None:
        array = (_ArgCmp * max(1, len(comparisons)))(*comparisons)
        result = lib.seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, number, len(comparisons), array)
        if result != 0:
            raise IsolationError(-result, f"seccomp rule for syscall {number}: {os.strerror(-result)}")

    def install(self) -> None:
        _check(self._libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(self._libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._program), 0, 0),
               "prctl(PR_SET_SECCOMP)")


class TemplateSetUp:
    """What a template entered: the report, the compiled filter and each program's own steps."""

    def __init__(self):
        self.report: dict = {}
        self.seccomp: SeccompFilter | None = None
        self.new_pid_namespace = False  # the template must fork its init before forking programs
        self.separate_ipc = False
        self.uid: int | None = None
        self.own_keys = False  # a new session key ring and user namespace per program (probed: try_child_steps)
        self.drop_capabilities = False


def set_up_template(scratch: str, wanted: tuple[str, ...]) -> TemplateSetUp:
    """Enter every wanted layer the platform offers; the report says "on (...)" or "off: reason" per layer. The
    seccomp filter is compiled first: libseccomp is a file, and no host file is in reach once the namespaces are."""
    setup = TemplateSetUp()
    report = setup.report
    if "seccomp" in wanted:
        try:
            setup.seccomp = SeccompFilter()
            report["seccomp"] = f"on ({setup.seccomp.instructions} BPF instructions)"
        except (OSError, AttributeError) as err:
            report["seccomp"] = f"off: {err}"
    for layer in LAYERS:
        if layer not in wanted:
            report[layer] = "off: not requested"
            continue
        try:
            if layer == "namespaces":
                how = enter_namespaces(scratch)
                setup.new_pid_namespace = setup.separate_ipc = setup.own_keys = setup.drop_capabilities = True
                report[layer] = (f"on ({how}: network, PID, mount and UTS namespaces per template, an empty "
                                 "read-only root holding only the scratch folder, emptied after every job; per "
                                 "program an IPC namespace, a key ring of its own and no capability)")
            elif layer == "drop-user":
                if os.geteuid() != 0:
                    report[layer] = (f"off: not root; programs run as the caller's uid {os.geteuid()} (in a user "
                                     "namespace, with no capability and, with the namespaces layer, no host file "
                                     "in reach), so one template's programs are not kept apart by uid (run as root "
                                     "for a uid of the sandbox's own)")
                    continue
                setup.uid = sandbox_id(os.getpid())
                report[layer] = f"on (uid {setup.uid}, this template's own; the template itself stays apart)"
        except (OSError, AttributeError) as err:
            report[layer] = f"off: {err}"
    setup.report = {layer: report[layer] for layer in LAYERS}  # in the layers' order, as receipts print them
    return setup


def try_child_steps(setup: TemplateSetUp) -> None:
    """Run a program's own steps once in a throw-away process, where they can fail (a kernel or policy that refuses
    an unprivileged user namespace refuses the key ring's): if they do, go without the key ring's and say so, rather
    than fail every program. Called in the process that forks the programs."""
    if not (setup.own_keys or setup.drop_capabilities):
        return
    pid = os.fork()
    if pid == 0:
        try:
            enter_child(setup.separate_ipc, setup.uid, None, setup.own_keys, setup.drop_capabilities)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure means the step is not available here
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return
    setup.own_keys = False
    setup.report["namespaces"] = setup.report["namespaces"].replace(
        "a key ring of its own", "the template's key ring (a user namespace per program is refused here)")


def isolation_level(report: dict) -> str:
    """'full' when every layer is on, 'none' when none is, else 'partial'."""
    on = [layer for layer in LAYERS if str(report.get(layer, "")).startswith("on")]
    return "full" if len(on) == len(LAYERS) else ("none" if not on else "partial")
