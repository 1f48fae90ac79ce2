#!/usr/bin/env bash
# The build steps of deploy/Dockerfile, as a script so CI runs exactly what the image build
# runs: build pebsprof from source, then stage the runtime tree, that is the binary, the shared
# libraries the dynamic loader resolves for it (nothing more), and the CA bundle libcurl needs
# for HTTPS export. The image's runtime stage copies the staged tree and nothing else.
#
#   deploy/build-rootfs.sh --stage DIR [--src DIR] [--build DIR | --prebuilt BIN] [--install-deps] [-j N]
#
# --install-deps installs the Debian build packages (only those missing, so it needs no
# network where they are all present); the Dockerfile passes it, CI does not need to.
# --prebuilt stages BIN, a pebsprof built as below (scripts/setup.sh's build/ is), instead of
# building one: the image test stages the binary the other tests ran, and
# tests/conformance/test_deploy_image.sh runs the build itself, as the Dockerfile does.
set -euo pipefail

usage() {
	sed -n '7p' "$0" | sed 's/^#   /usage: /' >&2
	exit 2
}

src=$(cd "$(dirname "$0")/.." && pwd)
build=
prebuilt=
stage=
install_deps=0
jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
	case "$1" in
	--src) src=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--prebuilt) prebuilt=$2; shift 2 ;;
	--stage) stage=$2; shift 2 ;;
	--install-deps) install_deps=1; shift ;;
	-j) jobs=$2; shift 2 ;;
	-h | --help) usage ;;
	*) echo "build-rootfs: unknown argument $1" >&2; usage ;;
	esac
done
[ -n "$stage" ] || usage
[ -n "$build" ] || build="$src/build-image"

# The build section of scripts/setup.sh, plus the CA bundle the runtime stage ships.
packages=(build-essential cmake pkg-config clang llvm bpftool libbpf-dev libelf-dev libdw-dev libcapstone-dev zlib1g-dev
	protobuf-c-compiler libprotobuf-c-dev libcurl4-openssl-dev libiberty-dev libzstd-dev
	ca-certificates libdebuginfod1)
if [ "$install_deps" = 1 ]; then
	missing=()
	for p in "${packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "build-rootfs: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi

if [ -n "$prebuilt" ]; then
	bin=$prebuilt
	[ -x "$bin" ] || { echo "build-rootfs: --prebuilt $bin is not an executable" >&2; exit 1; }
	echo "build-rootfs: staging the prebuilt $bin"
else
	echo "build-rootfs: building $src into $build"
	# Tests off: the image needs the agent only. RelWithDebInfo (-O2) as scripts/setup.sh:
	# the configuration the tests cover (strip drops the debug info below).
	cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPP_WERROR=ON \
		-DPP_BUILD_TESTS=OFF >/dev/null
	cmake --build "$build" --target pebsprof -j"$jobs"
	bin="$build/collector/pebsprof"
	[ -x "$bin" ] || { echo "build-rootfs: $bin was not built" >&2; exit 1; }
fi

if [ -e "$stage" ] && [ -n "$(ls -A "$stage")" ]; then
	echo "build-rootfs: $stage is not empty; the staged tree must hold only what the agent needs" >&2
	exit 1
fi
mkdir -p "$stage/usr/bin"
install -m 0755 "$bin" "$stage/usr/bin/pebsprof"
# Symbols are for debugging the agent, not for running it; the BPF object lives in .rodata.
strip --strip-unneeded "$stage/usr/bin/pebsprof"

# Every library at the path the loader found it (e.g. /lib/x86_64-linux-gnu/libc.so.6), the
# file itself rather than its symlink chain, so the runtime stage needs no ld.so.cache: the
# Debian loader searches /lib/<multiarch> by default. The interpreter (PT_INTERP) comes too.
# Readers below take all of their input: one that stopped early (grep -q, awk's exit) could
# leave the writer to die of SIGPIPE, which pipefail turns into a failure now and then.
if ldd "$bin" | grep 'not found' >/dev/null; then
	echo "build-rootfs: unresolved libraries:" >&2
	ldd "$bin" | grep 'not found' >&2
	exit 1
fi
# The C++ runtime is loaded with dlopen, only to demangle C++ symbol names (demangle.c): it
# comes too, with what it needs, or C++ services' profiles would show mangled names.
cxxrt=$(ldconfig -p | awk '$1 == "libstdc++.so.6" && $NF ~ /x86-64|^\// && !found { found = $NF }
	END { if (found) print found }')
[ -n "$cxxrt" ] || cxxrt=$(gcc -print-file-name=libstdc++.so.6 2>/dev/null)
[ -f "$cxxrt" ] || { echo "build-rootfs: libstdc++.so.6 not found (Debian libstdc++6)" >&2; exit 1; }
# libdebuginfod is loaded with dlopen too, only for --debuginfod (debuginfod_fetch.c).
dbgd=$(ldconfig -p | awk '$1 == "libdebuginfod.so.1" && $NF ~ /x86-64|^\// && !found { found = $NF }
	END { if (found) print found }')
[ -f "$dbgd" ] || { echo "build-rootfs: libdebuginfod.so.1 not found (Debian libdebuginfod1)" >&2; exit 1; }
# and libcapstone, only when a memory event's data types are asked for (data_type.c).
cs=$(ldconfig -p | awk '$1 == "libcapstone.so.4" && $NF ~ /x86-64|^\// && !found { found = $NF }
	END { if (found) print found }')
[ -f "$cs" ] || { echo "build-rootfs: libcapstone.so.4 not found (Debian libcapstone4)" >&2; exit 1; }
# and libcurl, at the first HTTP request: exports, the kubelet, debuginfod (libcurl_loader.c).
curl=$(ldconfig -p | awk '$1 == "libcurl.so.4" && $NF ~ /x86-64|^\// && !found { found = $NF }
	END { if (found) print found }')
[ -f "$curl" ] || { echo "build-rootfs: libcurl.so.4 not found (Debian libcurl4)" >&2; exit 1; }
libs=$( (ldd "$bin"; echo "	$(basename "$cxxrt") => $cxxrt (0)"; ldd "$cxxrt"
	echo "	$(basename "$dbgd") => $dbgd (0)"; ldd "$dbgd"
	echo "	$(basename "$cs") => $cs (0)"; ldd "$cs"
	echo "	$(basename "$curl") => $curl (0)"; ldd "$curl") |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
[ -n "$libs" ] || { echo "build-rootfs: ldd found no libraries for $bin" >&2; exit 1; }
for lib in $libs; do
	mkdir -p "$stage$(dirname "$lib")"
	cp -L "$lib" "$stage$lib"
done

# libcurl verifies HTTPS peers against this bundle (Debian's compiled-in default path).
ca=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca" ] || { echo "build-rootfs: $ca missing (Debian package ca-certificates)" >&2; exit 1; }
install -D -m 0644 "$ca" "$stage$ca"

# The staged loader must resolve every library inside the stage, or the image will not start.
interp=$(ldd "$bin" | awk '$1 ~ /^\/.*ld-linux/ { print $1 }')
libdirs=$(printf '%s\n' $libs | xargs -n1 dirname | sort -u | sed "s|^|$stage|" | paste -sd:)
resolved=$("$stage$interp" --library-path "$libdirs" --list "$stage/usr/bin/pebsprof")
outside=$(printf '%s\n' "$resolved" | awk '$2 == "=>" && index($3, "'"$stage"'") != 1 { print }')
if [ -n "$outside" ]; then
	printf 'build-rootfs: resolved outside the stage:\n%s\n' "$outside" >&2
	exit 1
fi
"$stage$interp" --library-path "$libdirs" "$stage/usr/bin/pebsprof" --version
echo "build-rootfs: staged $(printf '%s\n' $libs | wc -l) libraries and the binary in $stage"
