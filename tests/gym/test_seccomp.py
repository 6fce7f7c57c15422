"""The seccomp filter (`drkernel.gym.candidate.seccomp`): the policy on both architectures (the BPF
program run by a small classic-BPF interpreter), real processes killed by the kernel for forbidden
calls from any thread, honest ones (fork, exec, threads, AF_UNIX sockets) untouched, and the verdict:
a candidate killed by SIGSYS is hacked under the rule ``forbidden_syscall``."""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drkernel.gym import Status
from drkernel.gym.candidate import seccomp
from drkernel.gym.orchestrator.sandbox import child_env
from drkernel.gym.verdict.assemble import CandidateFacts, Facts, RequestFacts, assemble
from drkernel.gym.verdict.hacks import FORBIDDEN_SYSCALL
from gym_cases import RELU_SOLUTION, request

HACKED = Path(__file__).resolve().parents[1] / "adversarial" / "hacked"
ATTACKS = ("14_seccomp_ptrace.py", "14_seccomp_raw_socket.py", "14_seccomp_unshare.py")
KILL, ALLOW, ENOSYS = seccomp.RET_KILL_PROCESS, seccomp.RET_ALLOW, seccomp.RET_ERRNO | seccomp.ENOSYS


def run_bpf(prog: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Classic BPF as the kernel runs a seccomp filter (only the opcodes the filter uses)."""
    args = tuple(args) + (0,) * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *args)  # struct seccomp_data
    ins = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        pc += 1
        if code == seccomp.LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == seccomp.RET_K:
            return k
        else:
            taken = {seccomp.JEQ_K: acc == k, seccomp.JGE_K: acc >= k, seccomp.JSET_K: bool(acc & k)}[code]
            pc += jt if taken else jf


# (name, args, x86_64 nr, aarch64 nr, expected action)
POLICY = [
    ("ptrace", (0,), 101, 117, KILL),
    ("process_vm_readv", (), 310, 270, KILL),
    ("socket AF_INET", (2, 1), 41, 198, KILL),
    ("socket AF_NETLINK", (16, 3), 41, 198, KILL),
    ("socket AF_UNIX", (1, 1), 41, 198, ALLOW),
    ("socketpair AF_UNIX", (1, 1), 53, 199, ALLOW),
    ("unshare", (0x10000000,), 272, 97, KILL),
    ("setns", (3, 0), 308, 268, KILL),
    ("mount", (), 165, 40, KILL),
    ("bpf", (), 321, 280, KILL),
    ("io_uring_setup", (), 425, 425, KILL),
    ("clone thread", (0x3D0F00,), 56, 220, ALLOW),                 # pthread_create's flags
    ("clone fork", (0x1200011,), 56, 220, ALLOW),                  # fork(): CHILD_SETTID|CLEARTID|SIGCHLD
    ("clone newuser", (0x10000000 | 17,), 56, 220, KILL),
    ("clone newnet, high bits", (0xFFFF_FFFF_0000_0000 | 0x40000000,), 56, 220, KILL),
    ("clone3", (), 435, 435, ENOSYS),
    ("personality query", (0xFFFFFFFF,), 135, 92, ALLOW),
    ("personality set", (0x0040000,), 135, 92, KILL),
    ("perf_event_open", (), 298, 241, ALLOW),                      # CUPTI and profilers
    ("execve", (), 59, 221, ALLOW),
    ("read", (), 0, 63, ALLOW),
]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("name,args,x86,arm,expect", POLICY, ids=[p[0] for p in POLICY])
def test_policy_on_both_architectures(machine, name, args, x86, arm, expect):
    prog = seccomp.program(machine)
    nr = x86 if machine == "x86_64" else arm
    assert run_bpf(prog, nr, seccomp.AUDIT_ARCH[machine], args) == expect


def test_another_architecture_or_x32_numbers_are_killed():
    prog = seccomp.program("x86_64")
    assert run_bpf(prog, 0, seccomp.AUDIT_ARCH["x86_64"]) == ALLOW           # read
    assert run_bpf(prog, 0, 0x40000003) == KILL                              # i386 ABI (int 0x80)
    assert run_bpf(prog, 0x40000000 | 0, seccomp.AUDIT_ARCH["x86_64"]) == KILL  # x32 read
    assert run_bpf(seccomp.program("aarch64"), 63, seccomp.AUDIT_ARCH["x86_64"]) == KILL
    with pytest.raises(seccomp.SeccompUnavailable):
        seccomp.program("riscv64")


def run_installed(body: str) -> subprocess.CompletedProcess:
    """``body`` in a fresh interpreter, after the filter is installed (``libc``: ctypes' handle)."""
    code = ("import ctypes, os, platform, socket, subprocess, sys, threading\n"
            "from drkernel.gym.candidate import seccomp\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "seccomp.install()\n" + textwrap.dedent(body) + "\nprint('survived', flush=True)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


SYS_SOCKET = {"x86_64": 41, "aarch64": 198}


@pytest.mark.parametrize("body", [
    "libc.ptrace(0, 0, None, None)",
    f"libc.syscall({SYS_SOCKET}[platform.machine()], 2, 1, 0)",
    "libc.unshare(0x10000000)",
    "libc.syscall(310 if platform.machine() == 'x86_64' else 270, os.getppid(), 0, 0, 0, 0, 0)",
    "os.fork() == 0 and libc.ptrace(0, 0, None, None); os.wait(); libc.ptrace(0, 0, None, None)",
], ids=["ptrace", "raw_inet_socket", "unshare", "process_vm_readv", "child_then_parent"])
def test_forbidden_calls_kill_the_process_with_sigsys(body):
    out = run_installed(body)
    assert out.returncode == -signal.SIGSYS, out.stderr
    assert "survived" not in out.stdout


def test_honest_process_work_is_untouched():
    out = run_installed("""
        a, b = socket.socketpair(socket.AF_UNIX)
        a.send(b"x"); assert b.recv(1) == b"x"
        assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                              text=True).stdout.strip() == "42"      # fork + exec, as ptxas is run
        t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()
        assert libc.personality(0xFFFFFFFF) >= 0
        assert libc.syscall(435, None, 0) == -1 and ctypes.get_errno() == 38  # clone3: ENOSYS
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["thread", "survived"]


def test_threads_started_before_the_filter_are_covered():
    # torch's intra-op pool and a Python thread exist before install(): TSYNC puts every thread of
    # the process under the filter (Seccomp: 2 in each task's status), and a call from the old thread
    # kills the whole process.
    code = textwrap.dedent("""
        import ctypes, os, threading, torch
        torch.set_num_threads(2)
        torch.ones(1 << 22).mul_(2).sum()
        go = threading.Event()
        def old_thread():
            go.wait()
            ctypes.CDLL(None).ptrace(0, 0, None, None)
        t = threading.Thread(target=old_thread); t.start()
        from drkernel.gym.candidate import seccomp
        seccomp.install()
        modes = []
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/status") as f:
                modes += [line.split()[1] for line in f if line.startswith("Seccomp:")]
        print(" ".join(modes), flush=True)
        go.set(); t.join()
        print("survived", flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGSYS, out.stderr
    modes = out.stdout.split("\n")[0].split()
    assert len(modes) >= 2 and set(modes) == {"2"}, out.stdout
    assert "survived" not in out.stdout


def test_only_unsandboxed_or_explicitly_unfiltered_children_skip_the_filter():
    assert child_env({}, private="/tmp/x")[seccomp.SECCOMP_ENV] == "1"
    assert child_env({}, private="/tmp/x", sandboxed=False)[seccomp.SECCOMP_ENV] == "0"
    forced = {seccomp.SECCOMP_ENV: "1"}
    assert child_env(forced, private="/tmp/x", sandboxed=False)[seccomp.SECCOMP_ENV] == "0"
    # an evaluator built with seccomp=False (to test the OS walls alone) passes "0" itself
    assert child_env({seccomp.SECCOMP_ENV: "0"}, private="/tmp/x")[seccomp.SECCOMP_ENV] == "0"


REQ = RequestFacts("p", "r", "kernelgym", "lenient", {}, "src", "h")


@pytest.mark.parametrize("returncode,hacked", [(-signal.SIGSYS, True), (-signal.SIGSEGV, False), (1, False)])
def test_sigsys_death_is_the_forbidden_syscall_hack(returncode, hacked):
    c = CandidateFacts((), planned_trials=2, died=True, returncode=returncode, log_tail="last words")
    r = assemble(Facts(REQ, candidate=c))
    assert r.status is Status.CRASHED and not r.valid
    rules = [h for h in r.hacks if h.code == 14 and h.evidence.startswith(FORBIDDEN_SYSCALL)]
    assert bool(rules) == hacked
    if hacked:
        assert "last words" in rules[0].evidence and "forbidden system call" in r.error


@pytest.mark.parametrize("name", ATTACKS)
def test_attacks_past_the_audit_hook_are_judged_forbidden_syscall(boundary_only_evaluator, name):
    # Without the static and audit-hook guards the ctypes call runs: the kernel refuses it.
    r = boundary_only_evaluator.evaluate(request((HACKED / name).read_text()))
    assert r.status is Status.CRASHED and not r.valid and not r.valid_lenient, r.error
    assert any(h.code == 14 and h.evidence.startswith(FORBIDDEN_SYSCALL) for h in r.hacks), r.hacks


def test_honest_solution_under_the_filter_is_correct(evaluator):
    r = evaluator.evaluate(request(RELU_SOLUTION))
    assert r.status is Status.CORRECT and r.valid, r.error
    assert not r.hacks
