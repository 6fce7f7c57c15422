"""A seccomp filter that makes the kernel, not the solution's own interpreter, refuse what no honest
kernel needs: the candidate installs it after its trusted imports and before the solution's code runs.

The audit hook (`drkernel.gym.candidate.guards`) lives in the same Python as the solution, so
anything the solution can reach (ctypes, a raw ``syscall``) can go around it: it is a detector. This
filter is a boundary: a forbidden system call, from any thread or any child of the candidate, kills
the process with ``SIGSYS`` (``SECCOMP_RET_KILL_PROCESS``) before the call does anything. The
orchestrator reads that exit status from outside, where no solution reaches, and names the hack
``forbidden_syscall`` (`drkernel.gym.verdict.hacks.forbidden_syscall_hack`).

Killed outright (x86_64 and aarch64 numbers; any other architecture, and x86_64's x32 numbers, kill):

- tracing other processes: ``ptrace``, ``process_vm_readv``, ``process_vm_writev``;
- the network: ``socket`` and ``socketpair`` for any family but ``AF_UNIX`` (the harness's channel);
- namespace games: ``unshare``, ``setns``, and ``clone`` with any ``CLONE_NEW*`` flag;
- mounts: ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API
  (``open_tree``, ``move_mount``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``, ``mount_setattr``);
- the kernel's own machinery: ``bpf``, ``keyctl``, ``add_key``, ``request_key``, ``kexec_load``,
  ``kexec_file_load``, ``init_module``, ``finit_module``, ``delete_module``, ``userfaultfd``,
  ``io_uring_setup``; ``personality`` except the query ``personality(0xffffffff)``.

``clone3`` passes its flags in memory a filter cannot read, so it fails with ``ENOSYS`` and the C
library falls back to ``clone``, whose flags are checked (what container runtimes do). Allowed on
purpose: ``fork``, ``clone`` without namespace flags and ``execve`` (Triton runs ``ptxas`` as a
subprocess when it compiles on a GPU; threads are clones), and ``perf_event_open`` (CUPTI and the
profilers the coverage checks use may call it). The filter is installed with
``SECCOMP_FILTER_FLAG_TSYNC``, so every thread the process already has (torch starts its pools early)
is covered too, and every later thread and child inherits it.
"""

from __future__ import annotations

import ctypes
import platform
import struct
from dataclasses import dataclass

__all__ = ["FORBIDDEN", "SECCOMP_ENV", "SeccompUnavailable", "install", "program"]

SECCOMP_ENV = "DRKERNEL_SECCOMP"
"""In the candidate's environment: ``0`` skips the filter (set for ``--unsafe-no-sandbox`` children only)."""

# seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian on both arches)
_NR, _ARCH, _ARG0 = 0, 4, 16
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
RET_KILL_PROCESS, RET_ALLOW, RET_ERRNO, ENOSYS = 0x80000000, 0x7FFF0000, 0x00050000, 38
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
PR_SET_NO_NEW_PRIVS = 38
AF_UNIX = 1
CLONE_NEW_FLAGS = 0x7E020000  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
PERSONALITY_QUERY = 0xFFFFFFFF
# classic BPF opcodes
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06

FORBIDDEN = ("ptrace", "process_vm_readv", "process_vm_writev", "unshare", "setns", "mount", "umount2",
             "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
             "mount_setattr", "bpf", "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
             "init_module", "finit_module", "delete_module", "userfaultfd", "io_uring_setup")
"""System calls that kill the candidate whatever their arguments."""

# name: (x86_64, aarch64); numbers from the kernel's unistd_64.h and asm-generic/unistd.h
SYSCALLS: dict[str, tuple[int, int]] = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "socket": (41, 198), "socketpair": (53, 199), "clone": (56, 220), "clone3": (435, 435),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "bpf": (321, 280), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "personality": (135, 92), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "seccomp": (317, 277),
}


class SeccompUnavailable(OSError):
    """The kernel refused the filter (no seccomp, or an architecture without a syscall table here)."""


@dataclass(frozen=True)
class _Ins:
    """One BPF instruction; jumps name labels, resolved by `_assemble`."""

    code: int
    k: int = 0
    jt: str | None = None
    jf: str | None = None
    label: str | None = None


def _arch_index(machine: str) -> int:
    if machine not in AUDIT_ARCH:
        raise SeccompUnavailable(0, f"no seccomp syscall table for {machine}")
    return 0 if machine == "x86_64" else 1


def _instructions(machine: str) -> list[_Ins]:
    """The filter as labelled instructions (see the module docstring for the policy)."""
    i = _arch_index(machine)
    nr = {name: pair[i] for name, pair in SYSCALLS.items()}
    out = [_Ins(LD_W_ABS, _ARCH), _Ins(JEQ_K, AUDIT_ARCH[machine], jf="kill"), _Ins(LD_W_ABS, _NR)]
    if machine == "x86_64":
        out.append(_Ins(JGE_K, X32_SYSCALL_BIT, jt="kill"))
    out += [_Ins(JEQ_K, nr[name], jt="kill") for name in FORBIDDEN]
    out += [_Ins(JEQ_K, nr["socket"], jt="family"), _Ins(JEQ_K, nr["socketpair"], jt="family"),
            _Ins(JEQ_K, nr["clone"], jt="clone"), _Ins(JEQ_K, nr["clone3"], jt="enosys"),
            _Ins(JEQ_K, nr["personality"], jt="persona"), _Ins(RET_K, RET_ALLOW)]
    out += [_Ins(LD_W_ABS, _ARG0, label="family"), _Ins(JEQ_K, AF_UNIX, jt="allow", jf="kill")]
    out += [_Ins(LD_W_ABS, _ARG0, label="clone"), _Ins(JSET_K, CLONE_NEW_FLAGS, jt="kill", jf="allow")]
    out += [_Ins(LD_W_ABS, _ARG0, label="persona"), _Ins(JEQ_K, PERSONALITY_QUERY, jt="allow", jf="kill")]
    out += [_Ins(RET_K, RET_ALLOW, label="allow"), _Ins(RET_K, RET_KILL_PROCESS, label="kill"),
            _Ins(RET_K, RET_ERRNO | ENOSYS, label="enosys")]
    return out


def _assemble(ins: list[_Ins]) -> bytes:
    """``struct sock_filter`` array (u16 code, u8 jt, u8 jf, u32 k); jumps are relative to the next."""
    where = {x.label: n for n, x in enumerate(ins) if x.label}
    out = b""
    for n, x in enumerate(ins):
        jt, jf = ((where[j] - n - 1) if j else 0 for j in (x.jt, x.jf))
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError(f"jump out of range at instruction {n}")
        out += struct.pack("=HBBI", x.code, jt, jf, x.k)
    return out


def program(machine: str | None = None) -> bytes:
    """The filter's BPF bytes for ``machine`` (default: this one's, ``platform.machine()``)."""
    return _assemble(_instructions(machine or platform.machine()))


def install() -> None:
    """Install the filter on every thread of this process (no_new_privs first, as an unprivileged
    process must); irreversible. Raises `SeccompUnavailable` when the kernel refuses."""
    machine = platform.machine()
    code = program(machine)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompUnavailable(err, f"prctl(PR_SET_NO_NEW_PRIVS): errno {err}")
    buf = ctypes.create_string_buffer(code, len(code))
    prog = struct.pack("=HxxxxxxQ", len(code) // 8, ctypes.addressof(buf))  # struct sock_fprog
    nr = SYSCALLS["seccomp"][_arch_index(machine)]
    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_ulong(SECCOMP_SET_MODE_FILTER),
                      ctypes.c_ulong(SECCOMP_FILTER_FLAG_TSYNC), ctypes.c_char_p(prog))
    if rc != 0:  # > 0: the id of a thread that could not be synchronised
        err = ctypes.get_errno() if rc < 0 else 0
        raise SeccompUnavailable(err, f"seccomp(SET_MODE_FILTER, TSYNC) returned {rc} (errno {err})")
