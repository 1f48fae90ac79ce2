#!/usr/bin/env python3
"""Summarizes the resources of an OTLP ExportProfilesServiceRequest, parsed with classes
generated from the reference opentelemetry-proto schema: one JSON line per ResourceProfiles
with its string/int attributes, the process ids its samples belong to (process.pid on the
resource or on the samples), its sample count, and the profiles' sample types.

Usage: otlp_resources.py GEN_DIR FILE
"""
import json
import sys

gen_dir, path = sys.argv[1], sys.argv[2]
sys.path.insert(0, gen_dir)

from opentelemetry.proto.collector.profiles.v1development import (  # noqa: E402
    profiles_service_pb2,
)

req = profiles_service_pb2.ExportProfilesServiceRequest()
with open(path, "rb") as f:
    req.ParseFromString(f.read())
d = req.dictionary
strings = d.string_table


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


for rp in req.resource_profiles:
    attrs = {kv.key: value_of(kv.value) for kv in rp.resource.attributes}
    pids, samples, types = set(), 0, set()
    if "process.pid" in attrs:
        pids.add(int(attrs["process.pid"]))
    for sp in rp.scope_profiles:
        for prof in sp.profiles:
            types.add(strings[prof.sample_type.type_strindex] + "/" +
                      strings[prof.sample_type.unit_strindex])
            for s in prof.samples:
                samples += sum(s.values) if len(s.values) else 1
                for ai in s.attribute_indices:
                    kv = d.attribute_table[ai]
                    if strings[kv.key_strindex] == "process.pid":
                        pids.add(int(value_of(kv.value)))
    print(json.dumps({"attrs": attrs, "pids": sorted(pids), "samples": samples,
                      "types": sorted(types)}, sort_keys=True))
