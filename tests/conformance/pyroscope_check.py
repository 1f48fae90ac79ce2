#!/usr/bin/env python3
"""Applies Grafana Pyroscope's ingest rules to our profiles: does Pyroscope accept them, and
under which profile type ids? Written from Pyroscope's own source, at v1.21.0 and at its
head of 2026-08-21 (3fe6a457a), not from our encoder:

- OTLP (POST /v1development/profiles): pkg/ingester/otlp/ingest_handler.go `export`
  (labels: __delta__, __otel__, the profile name, resource then scope attributes with a
  non-empty string/int value, first of each key only, then service_name from service.name
  or unknown_service[:<process.executable.name>]); pkg/ingester/otlp/convert.go
  `ConvertOtelToGoogle` / `newProfileBuilder` (the name: process_cpu for samples:count over
  cpu:nanoseconds with a period, which multiplies values by the period; otherwise the period
  type, and "" when the period is 0; sample attributes with a string/int value as labels);
- /ingest?name=APP{k=v,...}&format=pprof: api/model/labelset labelset.go `Parse` and
  validate.go (the name: [A-Za-z0-9_.\-/], label names [A-Za-z0-9_.]; HTTP 400 otherwise),
  pkg/og/convert/pprof/profile.go `metricName`
  (wall; then per sample type, its display name from pkg/og/storage/tree/pprof.go
  DefaultSampleTypeMapping, "cpu" -> process_cpu, alloc_/inuse_/space/objects -> memory,
  mutex_, block_, goroutines; else the last sample type) and `createLabels`;
- both: pkg/model/pprofsplit/pprof_split.go `VisitSampleSeries` (each set of string sample
  labels a series: series labels plus the sample labels not set yet), pkg/validation
  validate.go `ValidateLabels` (at most 30 label names, a valid __name__, a service_name,
  names at most 1024 bytes; v1.21 defaults sanitize: [a-zA-Z0-9_.], no leading digit, dots
  become underscores, a clash with a different value is a duplicate; head defaults take
  any UTF-8 name; no duplicate names) and `ValidateProfile` (at most 4 MiB and 16000 samples
  per profile, 100 labels per sample, no '-' in a sample type, one value per sample type),
  with the limits' defaults of pkg/validation/limits.go; pkg/distributor/distributor.go
  `rateLimit` (a request's profiles as pprof and its series' label bytes, summed, within the
  2 MiB burst, or refused whatever the rate).

We add one rule of ours: every frame has a function name (Pyroscope draws no other), which
`--symbolize local` (the default) guarantees; `--symbolize none` leaves frames without a Line
on purpose, for Pyroscope's symbolizer, and is not checked here.

Usage: pyroscope_check.py GEN_DIR {otlp FILE | ingest FILE.pb.gz APP_NAME | batch}
                          [--version v1.21|head] [--series-out FILE] [--burst BYTES]
GEN_DIR holds protoc --python_out of the reference OTLP and pprof protos. Prints the profile
type ids accepted ("ok: id,id,...") and exits 0, or one line per rejection and exits 1.
batch judges the requests stdin lists, "otlp FILE" or "ingest FILE NAME" a line, each on its
own, its lines prefixed with the FILE; exits 1 if any is rejected.
--series-out appends the label set of every series the profile makes to FILE, one per line.
"""
import gzip
import sys

MAX_LABEL_NAMES = 30
MAX_LABEL_NAME_LEN = 1024
MAX_LABEL_VALUE_LEN = 2048
MAX_PROFILE_BYTES = 4 * 1024 * 1024
MAX_SAMPLES = 16000
MAX_SAMPLE_LABELS = 100
BURST_BYTES = 2 * 1024 * 1024  # distributor.ingestion-burst-size-mb, in bytes

args = sys.argv[1:]
version = "head"
series_out = None
if "--series-out" in args:
    i = args.index("--series-out")
    series_out = open(args[i + 1], "a")
    del args[i:i + 2]
if "--burst" in args:  # the tenant's burst in bytes, where it is not the default
    i = args.index("--burst")
    BURST_BYTES = int(args[i + 1])
    del args[i:i + 2]
if "--version" in args:
    i = args.index("--version")
    version = args[i + 1]
    del args[i:i + 2]
gen_dir, mode = args[0], args[1]
sys.path.insert(0, gen_dir)
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2  # noqa
from proto import profile_pb2  # noqa: E402  (the reference pprof schema)

errors = []
type_ids = set()


def legacy_sanitize(name):
    """validation.SanitizeLegacyLabelName: (sanitized, ok)."""
    if not name:
        return name, False
    for i, ch in enumerate(name):
        if not (ch.isascii() and (ch.isalpha() or ch == "_" or (ch.isdigit() and i > 0))):
            if ch != ".":
                return name, False
    return name.replace(".", "_"), True


def validate_labels(labels, what):
    """validation.ValidateLabels on a list of (name, value)."""
    if not labels:
        errors.append(f"{what}: no labels")
        return
    if len(labels) > MAX_LABEL_NAMES:
        errors.append(f"{what}: {len(labels)} label names; limit {MAX_LABEL_NAMES}: "
                      + ",".join(sorted(n for n, _ in labels)))
        return
    d = dict(labels)
    if not d.get("__name__"):
        errors.append(f"{what}: invalid metric name ''")
        return
    if not d.get("service_name"):
        errors.append(f"{what}: service name is not provided")
        return
    seen = {}
    for name, value in sorted(labels):
        if len(name) > MAX_LABEL_NAME_LEN or len(value) > MAX_LABEL_VALUE_LEN:
            errors.append(f"{what}: label {name!r} too long")
        if version == "v1.21":
            new, ok = legacy_sanitize(name)
            if not ok:
                errors.append(f"{what}: invalid label name {name!r}")
                continue
            name = new
        if name in seen and (version == "head" or seen[name] != value):
            errors.append(f"{what}: duplicate label name {name!r}")
        seen[name] = value


def validate_profile(prof, size, what):
    """validation.ValidateProfile on a pprof Profile message."""
    if not prof.sample_type:
        errors.append(f"{what}: empty profile")
    if size > MAX_PROFILE_BYTES:
        errors.append(f"{what}: profile of {size} bytes; limit {MAX_PROFILE_BYTES}")
    if len(prof.sample) > MAX_SAMPLES:
        errors.append(f"{what}: {len(prof.sample)} samples; limit {MAX_SAMPLES}")
    st = prof.string_table
    for s in prof.sample:
        if len(s.label) > MAX_SAMPLE_LABELS:
            errors.append(f"{what}: a sample has {len(s.label)} labels")
        if len(s.value) != len(prof.sample_type):
            errors.append(f"{what}: sample value length mismatch")
    for vt in prof.sample_type:
        if "-" in st[vt.type]:
            errors.append(f"{what}: sample type contains - ({st[vt.type]!r})")
    # Ours: a frame without a function name is not drawn.
    funcs = {f.id: f for f in prof.function}
    for loc in prof.location:
        if not loc.line or not any(funcs.get(ln.function_id) and
                                   st[funcs[ln.function_id].name] for ln in loc.line):
            errors.append(f"{what}: location {loc.id} at {loc.address:#x} has no function name")


def visit_series(prof, labels, what):
    """pprofsplit.VisitSampleSeries: a series per set of string sample labels."""
    st = prof.string_table
    groups = {}
    for s in prof.sample:
        key = tuple(sorted((st[l.key], st[l.str]) for l in s.label if l.str > 0))
        groups.setdefault(key, []).append(s)
    for key in groups or {(): []}:
        series = list(labels)
        names = {n for n, v in series if v}
        for n, v in key:
            if n not in names:
                series.append((n, v))
                names.add(n)
        validate_labels(series, what)
        if series_out:
            series_out.write(repr(sorted((n, v) for n, v in series if v)) + "\n")
    name = dict(labels).get("__name__", "")
    pt = prof.period_type
    for vt in prof.sample_type:
        type_ids.add(f"{name}:{st[vt.type]}:{st[vt.unit]}:{st[pt.type]}:{st[pt.unit]}")


def any_value(v):
    """stringValueFromAnyValue."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return str(v.int_value)
    if kind == "array_value" and len(v.array_value.values) == 1:
        return any_value(v.array_value.values[0])
    return ""


def otlp_to_pprof(p, d, what):
    """convert.go: one pprof per service.name of the samples (ours set none); returns
    (pprof Profile, profile name)."""
    s = d.string_table
    out = profile_pb2.Profile()
    strings = {}

    def addstr(x):
        if x not in strings:
            strings[x] = len(out.string_table)
            out.string_table.append(x)
        return strings[x]

    addstr("")
    out.time_nanos, out.duration_nanos, out.period = p.time_unix_nano, p.duration_nano, p.period
    st = (s[p.sample_type.type_strindex], s[p.sample_type.unit_strindex])
    out.sample_type.add(type=addstr(st[0]), unit=addstr(st[1]))
    out.period_type.type = addstr(s[p.period_type.type_strindex])
    out.period_type.unit = addstr(s[p.period_type.unit_strindex])
    ptype = (s[p.period_type.type_strindex], s[p.period_type.unit_strindex]) if p.period else ("", "")
    profile_type = f"{st[0]}:{st[1]}:{ptype[0]}:{ptype[1]}"
    scale = 1
    if profile_type == "samples:count:cpu:nanoseconds":
        out.sample_type[0].type, out.sample_type[0].unit = addstr("cpu"), addstr("nanoseconds")
        name, scale = "process_cpu", p.period
    elif profile_type == "off_cpu:nanoseconds::":
        name = "off_cpu"
    else:
        name = profile_type.split(":")[2]
    funcs, locs = {}, {}
    for sm in p.samples:
        values = list(sm.values) or ([len(sm.timestamps_unix_nano)] if sm.timestamps_unix_nano else [])
        if not values:
            errors.append(f"{what}: sample value is required")
            continue
        values = [v * scale for v in values]
        if p.period and len(values) != 1:
            errors.append(f"{what}: sample values length mismatch")
        ps = out.sample.add(value=values)
        for ai in sm.attribute_indices:
            a = d.attribute_table[ai]
            key = s[a.key_strindex]
            v = any_value(a.value)
            if key != "service.name" and v:
                ps.label.add(key=addstr(key), str=addstr(v))
        for li in d.stack_table[sm.stack_index].location_indices:
            if li not in locs:
                loc = d.location_table[li]
                pl = out.location.add(id=len(out.location) + 1, address=loc.address)
                for ln in loc.lines:
                    fn = d.function_table[ln.function_index]
                    if ln.function_index not in funcs:
                        funcs[ln.function_index] = len(out.function) + 1
                        out.function.add(id=funcs[ln.function_index],
                                         name=addstr(s[fn.name_strindex]))
                    pl.line.add(function_id=funcs[ln.function_index])
                locs[li] = pl.id
            ps.location_id.append(locs[li])
    return out, name


def check_otlp(path):
    req = profiles_service_pb2.ExportProfilesServiceRequest()
    with open(path, "rb") as f:
        req.ParseFromString(f.read())
    if not req.HasField("dictionary"):
        errors.append("missing profile metadata dictionary")
        return
    counted = 0
    for ri, rp in enumerate(req.resource_profiles):
        svc = "unknown_service"
        for kv in rp.resource.attributes:
            if kv.key == "process.executable.name" and any_value(kv.value):
                svc += ":" + any_value(kv.value)
        for kv in rp.resource.attributes:
            if kv.key == "service.name" and any_value(kv.value):
                svc = any_value(kv.value)
                break
        for sp in rp.scope_profiles:
            for pi, p in enumerate(sp.profiles):
                what = f"resource {ri} profile {pi}"
                prof, name = otlp_to_pprof(p, req.dictionary, what)
                labels = [("__delta__", "false"), ("__otel__", "true"), ("__name__", name)]
                seen = {"__name__"}
                for kv in list(rp.resource.attributes) + list(sp.scope.attributes):
                    v = any_value(kv.value)
                    if kv.key not in seen and v:
                        labels.append((kv.key, v))
                        seen.add(kv.key)
                labels.append(("service_name", svc))
                validate_profile(prof, prof.ByteSize(), what)
                counted += prof.ByteSize() + label_bytes(labels)
                visit_series(prof, labels, what)
    rate_limit(counted, "request")


def label_bytes(labels):
    return sum(len(n.encode()) + len(v.encode()) for n, v in labels)


def rate_limit(counted, what):
    """distributor.go rateLimit: the request's profiles and series labels, summed, against
    the tenant's burst; a request over it is refused at any rate (429, every time)."""
    if counted > BURST_BYTES:
        errors.append(f"{what}: counts {counted} bytes against the {BURST_BYTES}-byte burst")


DISPLAY = {"samples": "cpu", "goroutine": "goroutines", "contentions": "mutex_count",
           "delay": "mutex_duration"}  # DefaultSampleTypeMapping's display names


def metric_name(prof):
    st = prof.string_table
    types = [st[v.type] for v in prof.sample_type]
    if "wall" in types:
        return "wall"
    name = ""
    for t in types:
        name = DISPLAY.get(t, t)
        if "cpu" in name:
            return "process_cpu"
        if "alloc_" in name or "inuse_" in name or name in ("space", "objects"):
            return "memory"
        if "mutex_" in name:
            return "mutex"
        if "block_" in name:
            return "block"
        if "goroutines" in name:
            return "goroutines"
    return name


SERVICE_RUNES = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def labelset_parse(name):
    """api/model/labelset labelset.go Parse (a state machine over name + "{"), with
    validate.go ValidateServiceName ([A-Za-z0-9_.] plus '-', '.', '/') and ValidateLabelName
    ([A-Za-z0-9_.], __name__ reserved but allowed here). Returns (service, {labels}) or
    raises ValueError with Pyroscope's reason."""
    state, key, value, labels, service = "name", "", "", {}, None
    for r in name + "{":
        if state == "name":
            if r == "{":
                state = "tags"
                service = value.strip()
                if not service:
                    raise ValueError("service name is required")
                for c in service:
                    if c not in SERVICE_RUNES and c not in "-/":
                        raise ValueError(f"invalid service name: {service}: character is "
                                         f"not allowed: {c!r}")
                value = ""
            else:
                value += r
        elif state == "tags":
            if r == "}":
                state = "done"
            elif r == "=":
                state, value = "value", ""
            else:
                key += r
        elif state == "value":
            if r in ",}":
                state = "tags"
                k = key.strip()
                if k != "__name__":
                    if not k:
                        raise ValueError("label name is required")
                    for c in k:
                        if c not in SERVICE_RUNES:
                            raise ValueError(f"invalid label name: {k}: character is not "
                                             f"allowed: {c!r}")
                labels[k] = value.strip()
                key = ""
            else:
                value += r
    return service, labels


def check_ingest(path, app):
    with open(path, "rb") as f:
        raw = f.read()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    prof = profile_pb2.Profile()
    prof.ParseFromString(data)
    try:
        service, extra = labelset_parse(app)
    except ValueError as e:
        errors.append(f"ingest: name={app!r}: {e}")
        return
    labels = [("__name__", metric_name(prof)), ("__delta__", "false"),
              ("pyroscope_spy", "unknown")]
    if "service_name" not in extra:
        labels.append(("service_name", service))
    labels += sorted(extra.items())
    validate_profile(prof, len(data), "ingest")
    rate_limit(prof.ByteSize() + label_bytes(labels), "ingest")
    visit_series(prof, labels, "ingest")


def verdict(prefix=""):
    """Prints the verdict on what was checked since the last one; True when accepted."""
    if errors:
        for e in dict.fromkeys(errors):
            print(f"{prefix}REJECTED ({version}):", e)
        return False
    print(f"{prefix}ok:", ",".join(sorted(type_ids)))
    return True


if mode == "otlp":
    check_otlp(args[2])
elif mode == "ingest":
    check_ingest(args[2], args[3])
elif mode == "batch":
    # One request per stdin line, "otlp FILE" or "ingest FILE NAME", each judged on its own
    # and answered "FILE ok: ..." or "FILE REJECTED ...": one interpreter for a sink's many.
    accepted = True
    for line in sys.stdin:
        what = line.rstrip("\n").split(" ", 2)
        errors.clear()
        type_ids.clear()
        if what[0] == "otlp":
            check_otlp(what[1])
        else:
            check_ingest(what[1], what[2])
        accepted &= verdict(what[1] + " ")
    sys.exit(0 if accepted else 1)
else:
    sys.exit(f"unknown mode {mode}")
sys.exit(0 if verdict() else 1)
