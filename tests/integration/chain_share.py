#!/usr/bin/env python3
"""How many samples in the leaf of tests/data/unwind's chains hold the whole expected chain.

usage: chain_share.py folded FOLDED EXPECTED [--user-mode]   (pebsprof's folded stacks, root
                                                 first; --user-mode: samples taken in pp_spin
                                                 itself, not in the kernel under it)
       chain_share.py perf EXPECTED < SCRIPT   (perf script -F ip,sym, leaf first)
       chain_share.py edges FOLDED EXPECTED    (samples with an invented caller)

Prints "SHARE WHOLE/SPIN" (share 0 to 1); edges prints "INVENTED/ALL": the samples in which
a function of the chain (or pp_spin) sits under a caller its code cannot have, one that is
not the next function of EXPECTED (a wrong step that still lands in the program's code). EXPECTED lists the chain from the leaf down, one
function a line, as perf names them (C++ without parameters). Samples in pp_spin count; a
sample is whole when the frames under pp_spin are the chain, in order.
"""
import sys


def expected(path):
    return [line.strip() for line in open(path) if line.strip()]


def perf_name(name):
    return name.split("(")[0] if "::" in name else name


def share(stacks, want, user_mode=False):
    spin = whole = 0
    for leaf_first, n in stacks:
        if "pp_spin" not in leaf_first:
            continue
        i = leaf_first.index("pp_spin")
        if user_mode and i != 0:
            continue
        spin += n
        if leaf_first[i + 1:i + 1 + len(want)] == want:
            whole += n
    return whole, spin


def folded(path):
    for line in open(path):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        frames = [perf_name(f) for f in stack.split(";")[1:]]  # the process name first
        yield frames[::-1], int(n)


def perf_script(text):
    for block in text.split("\n\n"):
        frames = [l.split(None, 1)[1].strip() for l in block.split("\n")
                  if len(l.split(None, 1)) > 1]
        if frames:
            yield frames, 1


def invented(stacks, want):
    chain = ["pp_spin"] + want
    callers = {chain[i]: chain[i + 1] for i in range(len(chain) - 1)}
    bad = total = 0
    for leaf_first, n in stacks:
        total += n
        for callee, caller in zip(leaf_first, leaf_first[1:]):
            if callee in callers and caller in callers.values() and caller != callers[callee]:
                bad += n
                break
    return bad, total


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "edges":
        bad, total = invented(folded(sys.argv[2]), expected(sys.argv[3]))
        print("%d/%d" % (bad, total))
        return
    if len(sys.argv) in (4, 5) and sys.argv[1] == "folded" and sys.argv[4:] in ([], ["--user-mode"]):
        whole, spin = share(folded(sys.argv[2]), expected(sys.argv[3]), len(sys.argv) == 5)
    elif len(sys.argv) == 3 and sys.argv[1] == "perf":
        whole, spin = share(perf_script(sys.stdin.read()), expected(sys.argv[2]))
    else:
        sys.exit(__doc__)
    print("%.4f %d/%d" % (whole / spin if spin else 0.0, whole, spin))


main()
