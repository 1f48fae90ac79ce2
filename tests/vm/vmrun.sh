#!/bin/bash
# Boot a kernel fetched by fetch-kernel.sh under QEMU and run one command in it, on the host's
# own root filesystem: shared read-only over virtiofs with a tmpfs overlay for writes, plus
# SCRATCH (the host directory given, shared writable at the same path). Inside: proc, sysfs,
# devtmpfs, cgroup2, bpffs, tracefs and debugfs mounted, the working directory kept. The
# command's output (stdout and stderr) is printed and its exit status returned; 124 when the
# guest did not finish within the time limit, 125 when it could not boot.
#
# usage: tests/vm/vmrun.sh [-t SECONDS] [-m MEM_MB] [-c CPUS] KERNEL_DIR SCRATCH -- CMD ARGS...
#
# KVM is used when /dev/kvm is backed by kvm_intel or kvm_amd, else TCG (-accel
# tcg,thread=multi: 16-40x slower, boots in seconds): a /dev/kvm from a paging-based nested
# hypervisor (kvm_pvm) cannot run these guests. PP_VM_ACCEL=kvm|tcg forces one.
set -uo pipefail
timeout_s=300
mem=2048
cpus=2
while getopts "t:m:c:" opt; do
	case $opt in
	t) timeout_s=$OPTARG ;;
	m) mem=$OPTARG ;;
	c) cpus=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
kdir=${1:?usage: vmrun.sh [-t S] KERNEL_DIR SCRATCH -- CMD...}
scratch=${2:?usage: vmrun.sh [-t S] KERNEL_DIR SCRATCH -- CMD...}
shift 2
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "vmrun: no command" >&2; exit 2; }
scratch=$(cd "$scratch" && pwd) || exit 2

die() {
	echo "vmrun: $*" >&2
	exit 125
}
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -n1)
[ -f "$vmlinuz" ] || die "no vmlinuz in $kdir/boot"
kver=${vmlinuz##*/vmlinuz-}
moddir=$kdir/lib/modules/$kver
[ -d "$moddir" ] || moddir=$kdir/usr/lib/modules/$kver
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (Debian qemu-system-x86)"
virtiofsd=/usr/lib/qemu/virtiofsd
[ -x "$virtiofsd" ] || die "$virtiofsd missing (Debian qemu-system-x86)"
busybox=$(command -v busybox) || die "busybox missing (Debian busybox-static)"
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' || [ ! -x /usr/bin/file ] ||
	die "$busybox is not static (Debian busybox-static)"

work=$(mktemp -d /tmp/pp-vm.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	umount "$work/ro" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# --- the initramfs: busybox, the modules to reach virtiofs and overlayfs, and /init --------
init=$work/initramfs
mkdir -p "$init"/{bin,dev,proc,sys,host,rw,newroot,lib/modules}
cp "$busybox" "$init/bin/busybox"
for a in sh mount umount mkdir insmod switch_root cat echo sleep; do ln -s busybox "$init/bin/$a"; done
# module NAME: its file, then (first) what it depends on, decompressed, in load order
declare -A loaded
add_module() {
	local f dep
	f=$(find "$moddir/kernel" -name "$1.ko" -o -name "$1.ko.xz" -o -name "$1.ko.zst" | head -n1)
	[ -n "$f" ] || return 0 # built in
	[ -n "${loaded[$1]:-}" ] && return 0
	loaded[$1]=1
	case $f in
	*.xz) xz -dc "$f" >"$init/lib/modules/$1.ko" ;;
	*.zst) zstd -qdc "$f" >"$init/lib/modules/$1.ko" ;;
	*) cp "$f" "$init/lib/modules/$1.ko" ;;
	esac
	# what it needs, from its .modinfo "depends=" (no kmod needed on the host)
	for dep in $(objcopy -O binary --only-section=.modinfo "$init/lib/modules/$1.ko" /dev/stdout |
		tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' '); do
		add_module "$dep"
	done
	echo "$1" >>"$init/modules.order"
}
: >"$init/modules.order"
# deps are appended before their users: load in the order written
for m in virtio_pci fuse virtiofs overlay; do add_module "$m"; done
cat >"$init/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod /lib/modules/$m.ko; done
mount -t virtiofs -o ro hostroot /host || { echo "vm-init: no host root"; echo o >/proc/sysrq-trigger; }
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot
scratch=$(cat /proc/cmdline | sed -n 's/.*pp_scratch=\([^ ]*\).*/\1/p')
mkdir -p /newroot$scratch
mount -t virtiofs scratch /newroot$scratch
umount /proc /sys
exec switch_root /newroot /bin/sh $scratch/.vm-stage2
INIT
chmod +x "$init/init"
(cd "$init" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz" || die "cpio failed"

# --- stage 2, in the host's root: mounts, the command, its status --------------------------
{
	echo '#!/bin/sh'
	echo 'mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev'
	echo 'mount -t tmpfs tmpfs /run' # /tmp stays the overlay's: SCRATCH may be under it
	echo 'mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount -t bpf bpf /sys/fs/bpf'
	echo 'mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null'
	echo 'mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null'
	echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root"
	printf 'cd %q\n' "$PWD"
	printf '%q ' "$@"
	echo "> $scratch/.vm-out 2>&1 < /dev/null"
	echo "echo \$? > $scratch/.vm-status"
	echo 'sync; echo o > /proc/sysrq-trigger; sleep 10'
} >"$scratch/.vm-stage2"
rm -f "$scratch/.vm-out" "$scratch/.vm-status"

# --- virtiofsd for / (read-only bind) and the scratch directory ---------------------------
mkdir -p "$work/ro"
mount --bind / "$work/ro" && mount -o remount,bind,ro "$work/ro" || die "cannot bind / read-only"
"$virtiofsd" --socket-path="$work/root.sock" -o source="$work/ro" -o cache=auto \
	-o sandbox=chroot >"$work/vfs-root.log" 2>&1 &
pids+=($!)
"$virtiofsd" --socket-path="$work/scratch.sock" -o source="$scratch" -o cache=none \
	-o sandbox=chroot >"$work/vfs-scratch.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/root.sock" ] && [ -S "$work/scratch.sock" ] && break; sleep 0.1; done

accel=${PP_VM_ACCEL:-auto}
if [ "$accel" = auto ]; then
	accel=tcg
	[ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; } && accel=kvm
fi
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
*) accel_args=(-accel tcg,thread=multi -cpu max) ;;
esac
# --foreground: qemu stays in this process group, so stopping the group (scripts/test.sh on a
# failure) stops the guest too. no_timer_check: under TCG on a loaded host the kernel's check
# that the 8254 timer reaches the IO-APIC can stall the boot for good (a 6.1 guest in a CI run
# stopped after "MP-BIOS bug: 8254 timer not connected to IO-APIC" and timed out at 900 s)
timeout --foreground "$timeout_s" qemu-system-x86_64 "${accel_args[@]}" -m "$mem" -smp "$cpus" -nographic \
	-no-reboot -nic none -kernel "$vmlinuz" -initrd "$work/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet no_timer_check pp_scratch=$scratch" \
	-object memory-backend-memfd,id=mem,size="${mem}M",share=on -numa node,memdev=mem \
	-chardev socket,id=root,path="$work/root.sock" \
	-device vhost-user-fs-pci,chardev=root,tag=hostroot \
	-chardev socket,id=scr,path="$work/scratch.sock" \
	-device vhost-user-fs-pci,chardev=scr,tag=scratch \
	-serial file:"$scratch/.vm-console" -monitor none -display none >/dev/null 2>&1
qrc=$?
[ -f "$scratch/.vm-out" ] && cat "$scratch/.vm-out"
if [ -s "$scratch/.vm-status" ]; then
	exit "$(cat "$scratch/.vm-status")"
fi
[ $qrc -eq 124 ] && { echo "vmrun: the guest did not finish in $timeout_s s" >&2; exit 124; }
echo "vmrun: the guest ended without a status; its console:" >&2
tail -n 30 "$scratch/.vm-console" >&2
exit 125
