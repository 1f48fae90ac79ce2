#!/usr/bin/env python3
"""The CPU one command takes, for the benches: runs CMD..., writes what it printed (stdout
and stderr, merged), then "cpu_s S maxrss_kb K": its user + system seconds and peak RSS, and its
children's, as wait4() reports them for it alone. getrusage(RUSAGE_CHILDREN) would add the
children this process's image inherited from whatever exec'd it (a version manager's shell
shim runs its own commands first, in the same pid: a quarter of a second here)."""
import os
import subprocess
import sys

if len(sys.argv) < 2:
    sys.exit("usage: cpu_of.py CMD [ARGS...]")
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
out = p.stdout.read()
_, status, ru = os.wait4(p.pid, 0)  # reaped here, not by Popen: the rusage is this one's
p.returncode = os.waitstatus_to_exitcode(status)
sys.stdout.write(out.decode(errors="replace"))
print("cpu_s %.3f maxrss_kb %d" % (ru.ru_utime + ru.ru_stime, ru.ru_maxrss))
