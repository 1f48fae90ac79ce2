#!/bin/bash
# Fetch one kernel of tests/vm/kernels.list from Debian's archive into a cache directory,
# without touching the host's apt configuration or installing anything: a separate source
# list and state directory, `apt-get download` of the suite's newest linux-image-cloud-amd64
# image, `dpkg -x` into CACHE/NAME. Prints CACHE/NAME (vmlinuz-* and lib/modules/* inside).
#
# usage: tests/vm/fetch-kernel.sh NAME [CACHE]   (CACHE default: $PP_VM_CACHE or
#        /var/cache/pebsprof-vm)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: fetch-kernel.sh NAME [CACHE]}
cache=${2:-${PP_VM_CACHE:-/var/cache/pebsprof-vm}}
line=$(awk -v n="$name" '$1 == n { print; exit }' "$here/kernels.list")
[ -n "$line" ] || { echo "fetch-kernel: no kernel $name in kernels.list" >&2; exit 2; }
suites=$(echo "$line" | awk '{ print $2 }')
out="$cache/$name"
if compgen -G "$out/boot/vmlinuz-*" >/dev/null; then
	echo "$out"
	exit 0
fi

apt_dir="$cache/apt-$name"
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
opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir"
	-o Dir::State::status=/dev/null -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
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
echo "$out"
