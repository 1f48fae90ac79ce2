#!/usr/bin/env python3
"""Checks on the stacks of any program, pebsprof's or perf's, for the toolchain tests and the
toolchain benchmark.

usage: stack_checks.py whole KIND FILE [COMM]       "WHOLE TOTAL MEDIAN_DEPTH"
       stack_checks.py unknown KIND FILE            "UNKNOWN TOTAL" (a frame in no known file)
       stack_checks.py orphans folded FILE COMM     "ORPHANS TOTAL" (samples without their process)
       stack_checks.py short folded FILE COMM       "SHORT TOTAL" (not whole, outside exec and exit)
       stack_checks.py edges KIND FILE CALLER->CALLEE...   "INVENTED TOTAL"
       stack_checks.py jit KIND FILE PERF_MAP       "NAMED JIT" (leaf frames of anonymous code)

KIND is folded (pebsprof's folded stacks, the process name first, root first) or perf (perf
script -F comm,tid,ip,sym,dso output, leaf first). A stack is whole when it reaches one of the
frames every thread starts from (_start, start_thread, clone3, Go's runtime.goexit...). In
edges, the pairs listed are the only callers each callee may have: a sample with another caller
of a listed callee holds an invented edge. In jit, a leaf frame of anonymous code is one
pebsprof drew as "[anonymous code]+0x..." (unnamed) or named from a perf map, perf's [unknown]
in an anon mapping or a perf-map name (its dso is /tmp/perf-PID.map). whole with COMM counts
only the samples of processes of that name; unknown counts the samples with a frame no file
holds (pebsprof's "[unknown]", perf's [unknown] dso). orphans counts, of the samples of
processes named COMM, those whose user frames are all "[unknown]": a sample without its
process (one walked by frame pointers through code without them may end in one "[unknown]":
that is the walk's, not the process's; one taken inside its execve has the registers of the
image it leaves, and is not counted). short counts, of the samples of processes named COMM,
those whose stacks are not whole, less those that cannot be: taken in its exec (the user
frames the image it leaves: all "[unknown]") or in its exit (the outermost user frame _exit:
its memory is being torn down, nothing but the registers is left to read).
"""
import statistics
import sys

ROOTS = {"_start", "__libc_start_main", "__libc_start_call_main", "start_thread", "clone",
         "clone3", "__clone", "__clone3", "runtime.goexit", "runtime.goexit.abi0",
         "runtime.mstart", "runtime.mstart.abi0", "runtime.rt0_go", "runtime.rt0_go.abi0",
         "thread_start"}


def strip(name):
    # kernel frames carry _[k] in folded stacks; perf's C++ names may carry parameters
    name = name[:-4] if name.endswith("_[k]") else name
    return name.split("(")[0] if "::" in name and "(" in name else name


def folded(path):
    """(frames leaf first, dsos or None, count) per line."""
    for line in open(path, errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        parts = stack.split(";")
        frames = [strip(f) for f in parts[1:]]
        yield frames[::-1], None, int(n), parts[0]


def perf(path):
    block = []
    for line in list(open(path, errors="replace")) + [""]:
        line = line.rstrip("\n")
        if not line.strip():
            if block:
                frames, dsos = [], []
                for l in block[1:]:
                    parts = l.split(None, 1)
                    if len(parts) < 2:
                        continue
                    rest = parts[1]
                    dso = rest[rest.rfind(" (") + 2:-1] if rest.endswith(")") else ""
                    sym = rest[:rest.rfind(" (")] if rest.endswith(")") else rest
                    sym = sym.rsplit("+0x", 1)[0]
                    frames.append(strip(sym))
                    dsos.append(dso)
                if frames:
                    yield frames, dsos, 1, block[0].split(None, 1)[0] if block[0].split() else ""
            block = []
        else:
            block.append(line)


def load(kind, path):
    return list(folded(path) if kind == "folded" else perf(path))


def whole(stacks):
    w = t = 0
    depths = []
    for frames, _, n, _ in stacks:
        t += n
        depths += [len(frames)] * n
        if any(f in ROOTS for f in frames):
            w += n
    return w, t, statistics.median(depths) if depths else 0


def edges(stacks, pairs):
    allowed = {}
    for p in pairs:
        caller, callee = p.split("->")
        allowed.setdefault(callee, set()).add(caller)
    bad = t = 0
    for frames, _, n, _ in stacks:
        t += n
        if any(callee in allowed and caller not in allowed[callee]
               for callee, caller in zip(frames, frames[1:])):
            bad += n
    return bad, t


def jit(stacks, perf_map):
    names = set()
    for line in open(perf_map, errors="replace"):
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) == 3:
            names.add(strip(parts[2]))
    named = total = 0
    for frames, dsos, n, _ in stacks:
        leaf = frames[0]
        if dsos is None:
            if leaf.startswith("[anonymous code]"):
                total += n
            elif leaf in names:
                named += n
                total += n
        else:
            dso = dsos[0]
            if dso.startswith("/tmp/perf-"):
                named += n
                total += n
            elif dso in ("[unknown]", "//anon", "[anon]") or dso.startswith("[anon"):
                total += n
    return named, total


def unknown(stacks):
    u = t = 0
    for frames, dsos, n, _ in stacks:
        t += n
        if dsos is None:
            bad = any(f == "[unknown]" for f in frames)
        else:
            bad = any(d in ("[unknown]", "unknown") for d in dsos)
        if bad:
            u += n
    return u, t


def of_comm(path, comm):
    """(the folded line's stack, its frames root first, its user frames, count) of comm's."""
    for line in open(path, errors="replace"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        parts = stack.split(";")
        if parts[0] == comm:
            yield stack, parts[1:], [f for f in parts[1:] if not f.endswith("_[k]")], int(n)


def orphans(path, comm):
    o = t = 0
    for stack, _, user, n in of_comm(path, comm):
        t += n
        if "execve" not in stack and user and all(f == "[unknown]" for f in user):
            o += n
    return o, t


def short(path, comm):
    s = t = 0
    heaviest = []
    for stack, frames, user, n in of_comm(path, comm):
        t += n
        if any(strip(f) in ROOTS for f in frames):
            continue
        if not user or all(f == "[unknown]" for f in user) or user[0] == "_exit":
            continue
        # in its exec: the user frame is the caller's execve, nothing above it is there
        if user == ["execve"] and any(strip(f).endswith("sys_execve") for f in frames):
            continue
        s += n
        heaviest.append((n, stack))
    # what a failed check shows: the heaviest short stacks, on stderr
    for n, stack in sorted(heaviest, reverse=True)[:3]:
        print("short: %d %s" % (n, stack), file=sys.stderr)
    return s, t


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    cmd, kind, path = sys.argv[1:4]
    if cmd == "orphans" and kind == "folded" and len(sys.argv) == 5:
        print("%d %d" % orphans(path, sys.argv[4]))
        return
    if cmd == "short" and kind == "folded" and len(sys.argv) == 5:
        print("%d %d" % short(path, sys.argv[4]))
        return
    stacks = load(kind, path)
    if cmd == "whole":
        if len(sys.argv) == 5:
            stacks = [s for s in stacks if s[3] == sys.argv[4]]
        print("%d %d %g" % whole(stacks))
    elif cmd == "unknown":
        print("%d %d" % unknown(stacks))
    elif cmd == "edges":
        print("%d %d" % edges(stacks, sys.argv[4:]))
    elif cmd == "jit" and len(sys.argv) == 5:
        print("%d %d" % jit(stacks, sys.argv[4]))
    else:
        sys.exit(__doc__)


main()
