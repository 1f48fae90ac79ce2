#!/usr/bin/env python3
"""Checks an OTLP ExportProfilesServiceRequest against the encoding rules of
reference/notes/otlp.md §8, independently of our encoder: the file is parsed with Python
classes generated from the REFERENCE opentelemetry-proto v1.11.0 schema.

Usage: otlp_check.py GEN_DIR FILE...
GEN_DIR holds the output of `protoc --python_out` over the reference protos. Prints, for
each FILE (its name first where there are several), one line per broken rule or a summary;
exits 1 if any FILE breaks a rule. One process serves many files: a live run's hundreds of
requests cost one interpreter start, not hundreds.
"""
import re
import sys

gen_dir, paths = sys.argv[1], sys.argv[2:]
sys.path.insert(0, gen_dir)

from opentelemetry.proto.collector.profiles.v1development import (  # noqa: E402
    profiles_service_pb2,
)

def check(path):
    """The rules one request breaks, and a summary of it."""
    req = profiles_service_pb2.ExportProfilesServiceRequest()
    with open(path, "rb") as f:
        req.ParseFromString(f.read())

    errors = []


    def rule(ok, msg):
        if not ok:
            errors.append(msg)


    if not req.HasField("dictionary"):
        return ["no dictionary"], ""
    d = req.dictionary
    tables = {
        "mapping_table": d.mapping_table,
        "location_table": d.location_table,
        "function_table": d.function_table,
        "link_table": d.link_table,
        "string_table": d.string_table,
        "attribute_table": d.attribute_table,
        "stack_table": d.stack_table,
    }

    # Index 0 of every table: present and the zero value.
    for name, t in tables.items():
        rule(len(t) > 0, f"{name} is empty: index 0 must hold the zero value")
    if all(len(t) for t in tables.values()):
        rule(d.string_table[0] == "", 'string_table[0] is not ""')
        for name in ("mapping_table", "location_table", "function_table", "attribute_table",
                     "stack_table"):
            rule(tables[name][0].ByteSize() == 0, f"{name}[0] is not the zero value")
        link0 = d.link_table[0]
        rule(link0.trace_id in (b"", bytes(16)) and link0.span_id in (b"", bytes(8)),
             "link_table[0] is not zero")


    def in_range(i, name, allow_zero=True):
        n = len(tables[name])
        return (0 if allow_zero else 1) <= i < n


    used = {name: set() for name in tables}
    used["string_table"].add(0)


    def use(name, i, what, allow_zero=True):
        rule(in_range(i, name, allow_zero), f"{what}: index {i} out of range of {name} "
                                            f"({len(tables[name])} entries)")
        used[name].add(i)


    def key_of(attr_idx):
        a = d.attribute_table[attr_idx]
        return d.string_table[a.key_strindex] if in_range(a.key_strindex, "string_table") else None


    def attrs_of(indices, what):
        """Returns {key: python value} of a referrer's attribute list, checking the indices."""
        out = {}
        for i in indices:
            use("attribute_table", i, what, allow_zero=False)
            if not in_range(i, "attribute_table", False):
                continue
            k = key_of(i)
            rule(k not in out, f"{what}: attribute key {k!r} repeats")
            v = d.attribute_table[i].value
            kind = v.WhichOneof("value")
            rule(kind in ("string_value", "int_value"),
                 f"{what}: attribute {k!r} value is {kind}, not an inline string/int")
            out[k] = getattr(v, kind) if kind else None
        return out


    # The dictionary's own references.
    for i, a in enumerate(d.attribute_table[1:], 1):
        use("string_table", a.key_strindex, f"attribute {i} key", allow_zero=False)
        use("string_table", a.unit_strindex, f"attribute {i} unit")
    for i, m in enumerate(d.mapping_table[1:], 1):
        use("string_table", m.filename_strindex, f"mapping {i} filename")
        attrs_of(m.attribute_indices, f"mapping {i}")
    for i, f in enumerate(d.function_table[1:], 1):
        rule(f.name_strindex or f.system_name_strindex or f.filename_strindex,
             f"function {i} names nothing")
        for fld in ("name_strindex", "system_name_strindex", "filename_strindex"):
            use("string_table", getattr(f, fld), f"function {i} {fld}")
    for i, loc in enumerate(d.location_table[1:], 1):
        use("mapping_table", loc.mapping_index, f"location {i} mapping")
        for ln in loc.lines:
            use("function_table", ln.function_index, f"location {i} line", allow_zero=False)
        la = attrs_of(loc.attribute_indices, f"location {i}")
        if "profile.frame.type" in la:
            rule(la["profile.frame.type"] in ("native", "kernel"),
                 f"location {i}: frame type {la['profile.frame.type']!r}")
    for i, st in enumerate(d.stack_table[1:], 1):
        rule(len(st.location_indices) > 0, f"stack {i} is empty but not at index 0")
        for li in st.location_indices:
            use("location_table", li, f"stack {i}", allow_zero=False)

    # Duplicates SHOULD NOT exist.
    for name, t in tables.items():
        if name == "link_table":
            continue
        seen = {}
        for i, e in enumerate(t):
            k = e if name == "string_table" else e.SerializeToString(deterministic=True)
            rule(k not in seen, f"{name}[{i}] duplicates {name}[{seen.get(k)}]")
            seen.setdefault(k, i)

    # Resources: one per process, inline attributes, service.name set.
    pids = set()
    nsamples = 0
    for ri, rp in enumerate(req.resource_profiles):
        what = f"resource {ri}"
        keys = {}
        for kv in rp.resource.attributes:
            rule(kv.key != "" and kv.key_strindex == 0, f"{what}: attribute key not inline")
            kind = kv.value.WhichOneof("value")
            rule(kind in ("string_value", "int_value"),
                 f"{what}: attribute {kv.key!r} value is {kind}, not inline")
            rule(kv.key not in keys, f"{what}: attribute {kv.key!r} repeats")
            keys[kv.key] = getattr(kv.value, kind) if kind else None
        rule(isinstance(keys.get("service.name"), str) and keys["service.name"] != "",
             f"{what}: no inline service.name")
        # A container's resource holds many processes: each sample names its own instead. Outside
        # containers a resource is a process (process.pid) or, with `run`'s default
        # --sample-labels, every process of one executable (no process.pid).
        container = "container.id" in keys
        rule("process.pid" not in keys or isinstance(keys["process.pid"], int),
             f"{what}: process.pid is not an int")
        rule(container or isinstance(keys.get("process.executable.name"), str),
             f"{what}: no process.executable.name")
        pk = keys.get("container.id") or (keys.get("process.pid"),
                                           keys.get("process.executable.name"))
        rule(pk not in pids, f"{what}: process {pk} has more than one ResourceProfiles")
        pids.add(pk)
        for sp in rp.scope_profiles:
            for pi, pr in enumerate(sp.profiles):
                pwhat = f"{what} profile {pi}"
                for vt_name in ("sample_type", "period_type"):
                    vt = getattr(pr, vt_name)
                    use("string_table", vt.type_strindex, f"{pwhat} {vt_name}")
                    use("string_table", vt.unit_strindex, f"{pwhat} {vt_name}")
                st = (d.string_table[pr.sample_type.type_strindex],
                      d.string_table[pr.sample_type.unit_strindex])
                pt = (d.string_table[pr.period_type.type_strindex],
                      d.string_table[pr.period_type.unit_strindex])
                if st == ("off_cpu", "nanoseconds"):
                    # off-CPU time: no period, which Pyroscope names off_cpu (notes §6)
                    rule(pt == ("", "") and pr.period == 0,
                         f"{pwhat}: off_cpu with period_type {pt}, period {pr.period}")
                    rule(pr.time_unix_nano > 10**18, f"{pwhat}: time_unix_nano "
                                                      f"{pr.time_unix_nano} is not a wall-clock time")
                else:
                    rule(pt[0] != "" and pt[1] in ("nanoseconds", "count"),
                         f"{pwhat}: period_type {pt}")
                if st == ("off_cpu", "nanoseconds"):
                    pass
                elif pt[0] == "cpu":
                    rule(pt == ("cpu", "nanoseconds"), f"{pwhat}: cpu period_type {pt}")
                    rule(st == ("samples", "count"), f"{pwhat}: sample_type {st}")
                else:
                    # An event N: (N, count) event counts or (latency, cycles), as Pyroscope
                    # takes names: [a-zA-Z0-9_] only.
                    rule(st in ((pt[0], "count"), ("latency", "cycles")),
                         f"{pwhat}: sample_type {st} under period_type {pt}")
                    rule(re.fullmatch(r"[A-Za-z0-9_]+", pt[0]) is not None,
                         f"{pwhat}: period type {pt[0]!r} is not a Pyroscope name")
                rule(pr.period > 0 or st == ("off_cpu", "nanoseconds"), f"{pwhat}: no period")
                rule(pr.time_unix_nano > 10**18, f"{pwhat}: time_unix_nano {pr.time_unix_nano} "
                                                  "is not a wall-clock time")
                for ai in pr.attribute_indices:
                    use("attribute_table", ai, f"{pwhat} attribute", allow_zero=False)
                for si, s in enumerate(pr.samples):
                    swhat = f"{pwhat} sample {si}"
                    nsamples += 1
                    rule(len(s.values) == 1, f"{swhat}: {len(s.values)} values, not one")
                    rule(len(s.timestamps_unix_nano) in (0, len(s.values)),
                         f"{swhat}: timestamps and values differ in length")
                    for ts in s.timestamps_unix_nano:
                        rule(pr.time_unix_nano <= ts < pr.time_unix_nano + pr.duration_nano,
                             f"{swhat}: timestamp {ts} outside the profile's window")
                    use("stack_table", s.stack_index, f"{swhat} stack")
                    use("link_table", s.link_index, f"{swhat} link")
                    sa = attrs_of(s.attribute_indices, swhat)
                    # The thread is named, or left out whole (--sample-labels); its id may be left
                    # out alone for Pyroscope's 30 label names.
                    rule("thread.id" not in sa or "thread.name" in sa,
                         f"{swhat}: a thread.id without its thread.name")
                    rule("thread.id" not in sa or isinstance(sa["thread.id"], int),
                         f"{swhat}: thread.id is not an int")
                    rule("thread.name" not in sa or isinstance(sa["thread.name"], str),
                         f"{swhat}: thread.name is not a string")

    # Orphans SHOULD NOT exist either (index 0 and the link table excepted).
    for name, t in tables.items():
        if name == "link_table":
            continue
        for i in range(1, len(t)):
            rule(i in used[name], f"{name}[{i}] is referred to by nothing")
    return errors, (f"ok: {len(req.resource_profiles)} resources, {nsamples} samples, "
                    + ", ".join(f"{len(t)} {n}" for n, t in tables.items()))


failed = 0
for path in paths:
    errors, summary = check(path)
    prefix = f"{path}: " if len(paths) > 1 else ""
    for e in errors:
        print(f"{prefix}FAIL:", e)
    if not errors:
        print(f"{prefix}{summary}")
    failed += bool(errors)
sys.exit(1 if failed or not paths else 0)
