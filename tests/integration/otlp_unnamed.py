#!/usr/bin/env python3
"""Checks that a file's unnamed frames in an OTLP ExportProfilesServiceRequest keep what a
backend symbolizer needs, reading the file with classes generated from the reference
opentelemetry-proto schema: Locations with an ELF address inside the function nm places
there, whose Mapping names the file and carries its GNU build id, and no Line (--symbolize
none), or with --drawn one Line whose function is the "NAME+0x<address>" placeholder.

Usage: otlp_unnamed.py GEN_DIR FILE NAME BUILD_ID FUNC_ADDR_HEX FUNC_SIZE_HEX [--drawn]
"""
import os
import sys

gen_dir, path, name, build_id, func_addr, func_size = sys.argv[1:7]
drawn = sys.argv[7:8] == ["--drawn"]
sys.path.insert(0, gen_dir)

from opentelemetry.proto.collector.profiles.v1development import (  # noqa: E402
    profiles_service_pb2,
)

req = profiles_service_pb2.ExportProfilesServiceRequest()
with open(path, "rb") as f:
    req.ParseFromString(f.read())
d = req.dictionary
lo, size = int(func_addr, 16), int(func_size, 16)


def attr(indices, key):
    for i in indices:
        kv = d.attribute_table[i]
        if d.string_table[kv.key_strindex] == key:
            return kv.value.string_value
    return None


errors, unnamed, inside = [], 0, 0
mappings = {i for i, m in enumerate(d.mapping_table)
            if i and os.path.basename(d.string_table[m.filename_strindex]) == name}
if not mappings:
    errors.append(f"no mapping of {name}")
for i in mappings:
    bid = attr(d.mapping_table[i].attribute_indices, "process.executable.build_id.gnu")
    if bid != build_id:
        errors.append(f"mapping {i}: build id {bid!r}, expected {build_id}")
def placeholder(loc):
    if len(loc.lines) != 1:
        return None
    fn = d.string_table[d.function_table[loc.lines[0].function_index].name_strindex]
    return fn if fn.startswith(name + "+0x") else None


for loc in d.location_table:
    if loc.mapping_index not in mappings:
        continue
    if drawn and placeholder(loc):
        unnamed += 1
        if int(placeholder(loc).split("+0x")[1], 16) != loc.address:
            errors.append(f"{placeholder(loc)} at address {loc.address:#x}")
    elif not drawn and not loc.lines:
        unnamed += 1
    else:
        continue
    if lo <= loc.address < lo + size:
        inside += 1
if not inside:
    errors.append(f"no unnamed location of {name} inside {lo:#x}+{size:#x} "
                  f"({unnamed} unnamed ones)")
for f in d.function_table if not drawn else []:
    if d.string_table[f.name_strindex].startswith(name + "+0x"):
        errors.append(f"a Function is named by the placeholder {d.string_table[f.name_strindex]}")
for e in errors:
    print(f"FAIL: {e}")
print(f"{'ok' if not errors else 'FAIL'}: {unnamed} unnamed locations of {name}, {inside} in "
      f"the function")
sys.exit(1 if errors else 0)
