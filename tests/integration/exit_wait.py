"""A process that waits in its own exit, for the off-CPU test: the init of a PID namespace
waits in do_exit (zap_pid_ns_processes) until every process of its namespace is reaped, and a
member traced from outside is reaped only when its tracer waits for it, here WAIT_S seconds
after the init exited. Returns once the init is past its exit (a zombie, or gone), so that an
agent stopped after it has seen the wait end. Needs root (CLONE_NEWPID, ptrace).

usage: exit_wait.py [WAIT_S]"""
import ctypes
import os
import signal
import sys
import time

WAIT_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
CLONE_NEWPID = 0x20000000
PTRACE_SEIZE = 0x4206


def outer_pid():
    """This process's pid as the outer namespace knows it."""
    with open("/proc/self/status") as f:
        return next(l.split()[1] for l in f if l.startswith("NSpid:"))


def state(pid):
    """The state letter of pid ("" when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
said_r, said_w = os.pipe()
go_r, go_w = os.pipe()
ns = os.fork()
if ns == 0:
    if libc.unshare(CLONE_NEWPID) != 0:
        os._exit(3)
    if os.fork() == 0:  # pid 1 of the new namespace: says its outer pid
        os.write(said_w, b"init " + outer_pid().encode() + b"\n")
        if os.fork() == 0:  # its member: says its pid as the outer namespace knows it
            os.write(said_w, b"member " + outer_pid().encode() + b"\n")
            time.sleep(60)
            os._exit(0)
        os.read(go_r, 1)  # until the member is traced
        os._exit(0)  # its exit kills the member, then waits for it to be reaped
    os._exit(0)
signal.alarm(30)  # whatever goes wrong below, not forever
os.close(said_w)
os.waitpid(ns, 0)
said = b""
while said.count(b"\n") < 2:  # both lines, or none where the namespace was not made
    chunk = os.read(said_r, 64)
    if not chunk:
        break
    said += chunk
pids = dict(l.split() for l in said.decode().splitlines() if len(l.split()) == 2)
if "init" not in pids or "member" not in pids:
    sys.exit("exit_wait: no PID namespace here (unshare failed)")
init, member = int(pids["init"]), int(pids["member"])
if libc.ptrace(PTRACE_SEIZE, member, None, None) != 0:
    sys.exit("exit_wait: PTRACE_SEIZE: %s" % os.strerror(ctypes.get_errno()))
os.write(go_w, b"x")
time.sleep(WAIT_S)  # the init waits in its exit meanwhile
os.waitpid(member, 0)  # reaped by its tracer: the init's wait ends
while state(init) not in ("", "Z", "X"):  # past its exit: it ran again after the wait
    time.sleep(0.01)
