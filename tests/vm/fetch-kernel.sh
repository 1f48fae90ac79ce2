#!/bin/bash
# Fetch one kernel of tests/vm/kernels.list from Debian's archive into a cache directory,
# without touching the host's apt configuration or installing anything: a separate source
# list and state directory, `apt-get download` of the suite's newest linux-image-cloud-amd64
# image, `dpkg -x` into CACHE/NAME. Prints CACHE/NAME (vmlinuz-* and lib/modules/* inside).
#
# With -d, also the image's vmlinux with DWARF, from the kernel's linux-image-RELEASE-dbg (only
# the vmlinux is kept: CACHE/dbg-RELEASE/usr/lib/debug/boot/vmlinux-RELEASE), printed instead.
#
# usage: tests/vm/fetch-kernel.sh [-d] NAME [CACHE]   (CACHE default: $PP_VM_CACHE or
#        /var/cache/pebsprof-vm)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dbg=0
if [ "${1:-}" = -d ]; then
	dbg=1
	shift
fi
name=${1:?usage: fetch-kernel.sh [-d] NAME [CACHE]}
cache=${2:-${PP_VM_CACHE:-/var/cache/pebsprof-vm}}
line=$(awk -v n="$name" '$1 == n { print; exit }' "$here/kernels.list")
[ -n "$line" ] || { echo "fetch-kernel: no kernel $name in kernels.list" >&2; exit 2; }
suites=$(echo "$line" | awk '{ print $2 }')
out="$cache/$name"
apt_dir="$cache/apt-$name"
opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir"
	-o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root)

# fetch_dbg: the booted image's vmlinux with DWARF (the modules' debug files, a GiB, are left)
fetch_dbg() {
	local release deb vmlinux
	release=$(basename "$(ls "$out"/boot/vmlinuz-* | head -n1)")
	release=${release#vmlinuz-}
	vmlinux="$cache/dbg-$release/usr/lib/debug/boot/vmlinux-$release"
	if [ ! -s "$vmlinux" ]; then
		(cd "$apt_dir/archives" && apt-get "${opts[@]}" -qq download "linux-image-$release-dbg")
		deb=$(ls -t "$apt_dir"/archives/linux-image-"$release"-dbg_*.deb | head -n1)
		mkdir -p "$cache/dbg-$release"
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x -C "$cache/dbg-$release" "./usr/lib/debug/boot/vmlinux-$release"
		rm -f "$deb"
	fi
	echo "$vmlinux"
}

if compgen -G "$out/boot/vmlinuz-*" >/dev/null; then
	if [ "$dbg" = 1 ]; then fetch_dbg; else echo "$out"; fi
	exit 0
fi

mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
: >"$apt_dir/sources.list"
for s in ${suites//,/ }; do
	case $s in
	*-security) uri=http://deb.debian.org/debian-security ;;
	*) uri=http://deb.debian.org/debian ;;
	esac
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $s main" \
		>>"$apt_dir/sources.list"
done
apt-get "${opts[@]}" -qq update
# the metapackage's newest version names the versioned image it depends on
image=$(apt-cache "${opts[@]}" show linux-image-cloud-amd64 2>/dev/null |
	awk '/^Version:/ { v = $2 } /^Depends:/ && v { print v, $0 }' | sort -V | tail -n1 |
	grep -o 'linux-image-[0-9][^ ,]*-cloud-amd64' | head -n1)
[ -n "$image" ] || { echo "fetch-kernel: no linux-image-cloud-amd64 in $suites" >&2; exit 1; }
(cd "$apt_dir/archives" && apt-get "${opts[@]}" -qq download "$image")
mkdir -p "$out"
dpkg -x "$(ls -t "$apt_dir"/archives/"$image"_*.deb | head -n1)" "$out"
compgen -G "$out/boot/vmlinuz-*" >/dev/null || { echo "fetch-kernel: $image has no vmlinuz" >&2; exit 1; }
if [ "$dbg" = 1 ]; then fetch_dbg; else echo "$out"; fi
