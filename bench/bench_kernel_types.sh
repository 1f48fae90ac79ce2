#!/bin/bash
# Kernel data types on a real distribution kernel: Debian's vmlinux with DWARF for one kernel
# of the matrix (tests/vm/kernels.list), its linux-image-RELEASE-dbg package fetched with the
# kernel's own apt state (tests/vm/fetch-kernel.sh's) and only the vmlinux kept.
#   1. how many of its memory-accessing instructions get a type and field, and what that
#      costs per new PC against naming the function (tests/pp_bench_data_type);
#   2. booted under QEMU (tests/vm/vmrun.sh), with the image where Debian installs it: that
#      `pebsprof probe` takes it as the running kernel's (build id of /sys/kernel/notes), and
#      that kallsyms' addresses less _stext are the image's (KASLR undone as the session does).
# No PMU samples there (a guest has none): the pipeline itself is tested by test_mem_pipeline.
#
# usage: sudo bench/bench_kernel_types.sh [-b BUILD_DIR] [-k KERNEL] [-n MAX_PCS]
#        (KERNEL a name of kernels.list, default 6.1; MAX_PCS default 200000)
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build
KERNEL=6.1
MAX_PCS=200000
while getopts "b:k:n:h" opt; do
	case $opt in
	b) BUILD=$(cd "$OPTARG" && pwd) || exit 1 ;;
	k) KERNEL=$OPTARG ;;
	n) MAX_PCS=$OPTARG ;;
	*)
		sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
TOOL=$BUILD/tests/pp_bench_data_type
PP=$BUILD/collector/pebsprof
for f in "$TOOL" "$PP"; do
	[ -x "$f" ] || { echo "bench_kernel_types: no $f (build it, or -b BUILD_DIR)" >&2; exit 1; }
done
CACHE=${PP_VM_CACHE:-/var/cache/pebsprof-vm}
kdir=$("$SRC/tests/vm/fetch-kernel.sh" "$KERNEL" "$CACHE") || exit 1
vmlinux=$("$SRC/tests/vm/fetch-kernel.sh" -d "$KERNEL" "$CACHE") || exit 1
release=${vmlinux##*/vmlinux-}
echo "kernel $release: $vmlinux ($(($(stat -c %s "$vmlinux") >> 20)) MiB), build id" \
	"$(readelf -n "$vmlinux" | sed -n 's/.*Build ID: *//p')"

echo
echo "== 1. its memory accesses typed (at most $MAX_PCS instructions, evenly spread)"
# mapped, as the agent reads the host's kernel image (its DWARF page cache, not heap)
echo "\$ PP_BENCH_MAPPED=1 PP_BENCH_MAX_PCS=$MAX_PCS $TOOL $vmlinux"
PP_BENCH_MAPPED=1 PP_BENCH_MAX_PCS=$MAX_PCS "$TOOL" "$vmlinux" || exit 1

echo
echo "== 2. booted: the image taken as the running kernel's, KASLR undone by _stext"
scratch=$(mktemp -d /tmp/pp-ktypes.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
nm "$vmlinux" | awk '$3 == "_stext" || $3 == "tcp_sendmsg" || $3 == "schedule" ||
	$3 == "do_sys_openat2" || $3 == "ext4_file_read_iter" { print $3, $1 }' >"$scratch/nm"
cat >"$scratch/guest.sh" <<SH
mkdir -p /usr/lib/debug/boot
ln -sf "$vmlinux" /usr/lib/debug/boot/vmlinux-$release
"$PP" probe | grep 'kernel types:'
stext=\$(awk '\$3 == "_stext" { print \$1; exit }' /proc/kallsyms)
link_stext=\$(awk '\$1 == "_stext" { print \$2 }' "$scratch/nm")
echo "_stext: kallsyms \$stext, image \$link_stext (slide 0x\$(printf %x \$((0x\$stext - 0x\$link_stext))))"
while read -r name addr; do
	[ "\$name" = _stext ] && continue
	run=\$(awk -v n="\$name" '\$3 == n { print \$1; exit }' /proc/kallsyms)
	[ -n "\$run" ] || continue
	if [ \$((0x\$run - 0x\$stext)) -eq \$((0x\$addr - 0x\$link_stext)) ]; then
		echo "\$name: kallsyms - _stext = image - _stext: ok"
	else
		echo "\$name: kallsyms \$run, image \$addr: MISMATCH"
	fi
done <"$scratch/nm"
SH
"$SRC/tests/vm/vmrun.sh" -t 300 "$kdir" "$scratch" -- bash "$scratch/guest.sh"
