#!/usr/bin/env python3
"""Checks that our .proto files are wire-equal to the reference ones.

Usage: proto_equal.py OURS.pb REFERENCE.pb [OURS.pb REFERENCE.pb ...]
Each argument is a FileDescriptorSet (protoc --descriptor_set_out --include_imports).
For each (ours, reference) pair, every message (by full name, nested included), every field
(number, name, type, type_name, label, oneof) and every enum and value of the reference must
be in ours with the same wire meaning, and ours must add none. Comments, options and file
names may differ. Exit 0 when all pairs are equal, 1 otherwise, 77 without python3-protobuf.
"""
import sys

try:
    from google.protobuf import descriptor_pb2
except ImportError:
    print("skipped: python3-protobuf (google.protobuf) is not installed")
    sys.exit(77)


def load(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    return fds


def collect(fds):
    """Returns ({message full name: {number: field tuple}}, {enum full name: {name: number}})."""
    messages, enums = {}, {}

    def walk_enum(prefix, e):
        enums[prefix + e.name] = {v.name: v.number for v in e.value}

    def walk_msg(prefix, m):
        name = prefix + m.name
        fields = {}
        for f in m.field:
            oneof = m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
            # An explicit packed option changes the bytes on the wire.
            packed = f.options.packed if f.options.HasField("packed") else None
            fields[f.number] = (f.name, f.type, f.type_name, f.label, oneof,
                                f.proto3_optional, "packed=%s" % packed)
        messages[name] = fields
        for n in m.nested_type:
            walk_msg(name + ".", n)
        for e in m.enum_type:
            walk_enum(name + ".", e)

    for fd in fds.file:
        prefix = "." + fd.package + "." if fd.package else "."
        for m in fd.message_type:
            walk_msg(prefix, m)
        for e in fd.enum_type:
            walk_enum(prefix, e)
    return messages, enums


def field_type_name(t):
    return descriptor_pb2.FieldDescriptorProto.Type.Name(t)


def compare(ours_path, ref_path):
    ours_m, ours_e = collect(load(ours_path))
    ref_m, ref_e = collect(load(ref_path))
    errors = []
    for name in sorted(set(ref_m) | set(ours_m)):
        if name not in ours_m:
            errors.append("message %s missing from ours" % name)
            continue
        if name not in ref_m:
            errors.append("message %s not in the reference" % name)
            continue
        of, rf = ours_m[name], ref_m[name]
        for num in sorted(set(of) | set(rf)):
            if num not in of:
                errors.append("%s: field %d (%s) missing from ours" % (name, num, rf[num][0]))
            elif num not in rf:
                errors.append("%s: field %d (%s) not in the reference" % (name, num, of[num][0]))
            elif of[num] != rf[num]:
                o, r = of[num], rf[num]
                errors.append("%s: field %d differs: ours (%s %s %s label=%d oneof=%s opt=%s) "
                              "reference (%s %s %s label=%d oneof=%s opt=%s)" %
                              (name, num, o[0], field_type_name(o[1]), o[2], o[3], o[4], o[5],
                               r[0], field_type_name(r[1]), r[2], r[3], r[4], r[5]))
    for name in sorted(set(ref_e) | set(ours_e)):
        if name not in ours_e:
            errors.append("enum %s missing from ours" % name)
        elif name not in ref_e:
            errors.append("enum %s not in the reference" % name)
        elif ours_e[name] != ref_e[name]:
            errors.append("enum %s values differ: ours %s reference %s" %
                          (name, sorted(ours_e[name].items()), sorted(ref_e[name].items())))
    return errors, len(ref_m), len(ref_e)


def main(argv):
    if len(argv) < 3 or len(argv) % 2 != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    failed = False
    for i in range(1, len(argv), 2):
        errors, nmsg, nenum = compare(argv[i], argv[i + 1])
        if errors:
            failed = True
            print("FAIL %s vs %s:" % (argv[i], argv[i + 1]))
            for e in errors:
                print("  " + e)
        else:
            print("ok   %s vs %s: %d messages, %d enums equal" % (argv[i], argv[i + 1], nmsg,
                                                                   nenum))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
