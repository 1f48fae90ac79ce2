#!/usr/bin/env python3
"""Checks of an off-CPU capture of tests/programs/pp_waits.

  folded FILE --expect wait_sleep=50,wait_pipe=33,wait_futex=17 --tol N
         [--kernel FUNC=FRAME,...] [--whole-user]
      The wall-clock folded stacks (nanoseconds): among the main thread's sleeping waits in
      the named functions (lines ending in "[off-CPU: sleeping]" below run_round), each
      function's share of their time is within N points of the expected one, and other
      states than waiting for a CPU (a page fault, stopped) are under a fifth of its sleep:
      a busy machine may keep a woken thread from its CPU, which the profile shows apart as
      runnable or throttled. Every such line reaches main
      and has its wait's kernel frame (--kernel). A wait is the function's by its own frame,
      or by that kernel frame where a frame-pointer walk lost the caller of a libc function;
      --whole-user wants the function's own frame in 80 % of each one's time (the first waits
      may come before the process's unwind tables). Prints the shares.
  time FILE FUNC [STATE]
      Prints the nanoseconds off the CPU of the lines through FUNC (in STATE).
  otlp GEN_DIR FILE
      The OTLP request: per process an off_cpu/nanoseconds Profile without a period, whose
      samples carry off_cpu.state and whose stacks wait (a [off-CPU] state, a scheduler
      frame); the event's Profile holds none of them. Prints the Profiles' types.
"""
import sys


def folded_lines(path):
    with open(path) as f:
        for line in f:
            stack, _, value = line.rstrip("\n").rpartition(" ")
            if stack:
                yield stack.split(";"), int(value)


def wait_of(frames):
    last = frames[-1]
    if last.startswith("[off-CPU: ") and last.endswith("]"):
        return last[len("[off-CPU: "):-1]
    return None


def check_folded(args):
    path = args[0]
    opts = {}
    flags = set()
    rest = args[1:]
    while rest:
        if rest[0] == "--whole-user":
            flags.add(rest.pop(0))
        else:
            opts[rest[0]] = rest[1]
            rest = rest[2:]
    expect = {k: float(v) for k, v in (p.split("=") for p in opts["--expect"].split(","))}
    tol = float(opts.get("--tol", "5"))
    kernel = dict(p.split("=") for p in opts.get("--kernel", "").split(",") if p)
    # waits whose end no switch showed (the summary's "whose end was not seen"): the shim
    # records them ending at their wakeup, without the kernel stack they waited in
    unseen = int(opts.get("--unseen", "0"))
    kernelless = []
    sleeping = {f: 0 for f in expect}
    other = {f: 0 for f in expect}
    whole = {f: 0 for f in expect}
    errors = []
    for frames, value in folded_lines(path):
        state = wait_of(frames)
        if state is None or "run_round" not in frames:
            continue
        i = frames.index("run_round")
        user = frames[i + 1] if i + 1 < len(frames) else ""
        func = user if user in expect else None
        if func is None and (user.startswith("wait_") or user == "burn"):
            continue  # another function of the program's
        # a frame-pointer walk misses the caller of a libc function without frame pointers:
        # then the wait's kernel frame tells which one it was
        for f, k in kernel.items():
            if func is None and any(k in x for x in frames[i:] if x.endswith("_[k]")):
                func = f
        if func is None:
            continue
        if state in ("runnable", "throttled"):
            continue  # preempted, or woken and waiting for a CPU: how busy the machine was
        if state != "sleeping":
            other[func] += value
            continue
        sleeping[func] += value
        if user == func:
            whole[func] += value
        if "main" not in frames[:i]:
            errors.append("%s's stack does not reach main: %s" % (func, ";".join(frames)))
        k = kernel.get(func)
        if k and not any(k in f for f in frames[i:]) and value > 5e6:
            if unseen and not any(x.endswith("_[k]") for x in frames):
                kernelless.append((func, value))
            else:
                errors.append("%s's %.1f ms has no kernel frame %s: %s" %
                              (func, value / 1e6, k, ";".join(frames[i:])))
    # each of pp_waits's waits is 20 ms: more time without kernel frames than the unseen
    # waits could hold is a kernel stack lost where the switch was seen
    lost = sum(v for _, v in kernelless)
    if kernelless:
        print("%.1f ms in waits without kernel frames (%s), %d waits whose end was not seen" %
              (lost / 1e6, ", ".join(sorted(set(f for f, _ in kernelless))), unseen))
    if lost > unseen * 30e6:
        errors.append("%.1f ms without kernel frames, more than %d unseen ends of 20 ms" %
                      (lost / 1e6, unseen))
    total = sum(sleeping.values())
    if not total:
        print("no off-CPU time in " + ", ".join(expect))
        return 1
    for f, want in expect.items():
        got = 100.0 * sleeping[f] / total
        print("%s %.1f%% of %.0f ms (expected %g +- %g; other states %.1f ms)" %
              (f, got, total / 1e6, want, tol, other[f] / 1e6))
        if abs(got - want) > tol:
            errors.append("%s: %.1f%%, expected %g +- %g" % (f, got, want, tol))
        # the first waits of a process may come before its unwind tables, walked by frame
        # pointers: most of them, not all, have the function's own frame
        if "--whole-user" in flags and whole[f] * 10 < sleeping[f] * 8:
            errors.append("%s: %.1f of %.1f ms with its own frame (want 80 %%)" %
                          (f, whole[f] / 1e6, sleeping[f] / 1e6))
        # a preemption or a page fault now and then, but mostly the function's own sleep
        if other[f] * 4 > sleeping[f]:
            errors.append("%s: %.1f ms in other states beside %.1f ms sleeping" %
                          (f, other[f] / 1e6, sleeping[f] / 1e6))
    for e in errors[:10]:
        print("error: " + e)
    return 1 if errors else 0


def print_time(args):
    path, func = args[:2]
    state = args[2] if len(args) > 2 else None
    print(sum(v for frames, v in folded_lines(path)
              if wait_of(frames) and func in frames and state in (None, wait_of(frames))))
    return 0


def check_otlp(args):
    gen_dir, path = args
    sys.path.insert(0, gen_dir)
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2

    req = profiles_service_pb2.ExportProfilesServiceRequest()
    with open(path, "rb") as f:
        req.ParseFromString(f.read())
    d = req.dictionary
    s = d.string_table
    errors, types, off_samples = [], set(), 0
    for rp in req.resource_profiles:
        for sp in rp.scope_profiles:
            for prof in sp.profiles:
                t = s[prof.sample_type.type_strindex] + "/" + s[prof.sample_type.unit_strindex]
                types.add(t)
                off = t == "off_cpu/nanoseconds"
                if off and (prof.period or prof.period_type.type_strindex):
                    errors.append("the off_cpu Profile has a period: Pyroscope would name "
                                  "it after the period type")
                for smp in prof.samples:
                    attrs = {s[d.attribute_table[a].key_strindex]:
                             d.attribute_table[a].value for a in smp.attribute_indices}
                    has_state = "off_cpu.state" in attrs
                    if has_state != off:
                        errors.append("a %s sample %s off_cpu.state" %
                                      (t, "with" if has_state else "without"))
                    if not off:
                        continue
                    off_samples += 1
                    if attrs["off_cpu.state"].string_value not in (
                            "runnable", "sleeping", "disk", "stopped", "throttled"):
                        errors.append("off_cpu.state %r" % attrs["off_cpu.state"].string_value)
                    if sum(smp.values) <= 0:
                        errors.append("an off-CPU sample without nanoseconds")
    print("types: " + ", ".join(sorted(types)) + "; off-CPU samples %d" % off_samples)
    if "off_cpu/nanoseconds" not in types or not off_samples:
        errors.append("no off_cpu/nanoseconds Profile")
    for e in errors[:10]:
        print("error: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    fn = {"folded": check_folded, "time": print_time, "otlp": check_otlp}.get(cmd)
    if not fn:
        print(__doc__)
        sys.exit(2)
    sys.exit(fn(sys.argv[2:]))
