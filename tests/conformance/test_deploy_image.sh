#!/bin/bash
# deploy/Dockerfile without docker: its build stage's RUN (deploy/build-rootfs.sh) on a copy of
# exactly the paths the Dockerfile COPYs, so a source the image build needs but does not copy
# fails here; then the staged runtime tree: nothing but the binary, the libraries the loader
# resolves for it, the loader and the CA bundle, and the binary runs from it alone.
set -u
. "$PP_SOURCE_DIR/tests/deploy/common.sh"
dockerfile="$deploy_dir/Dockerfile"
for t in cmake cc ldd strip; do
	command -v $t >/dev/null || skip "$t not found (scripts/setup.sh installs the build tools)"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The Dockerfile: a build stage FROM debian:12, a runtime stage FROM scratch that only copies.
grep -Eq '^FROM debian:12(\.[0-9]+)?(-[a-z]+)?@sha256:[0-9a-f]{64} AS build$' "$dockerfile" ||
	fail "the build stage is not FROM debian:12 pinned by digest (debian:12.N@sha256:...) AS build"
runtime=$(awk '/^FROM /{n++} n==2' "$dockerfile")
printf '%s\n' "$runtime" | grep -q '^FROM scratch$' || fail "the runtime stage is not FROM scratch"
printf '%s\n' "$runtime" | grep -Eq '^(RUN|ADD) ' && fail "the runtime stage runs or adds something"
printf '%s\n' "$runtime" | grep -Eq '^COPY --from=build /rootfs/ /$' || fail "the runtime stage does not copy /rootfs/"

# deploy/Containerfile (the image from a staged tree, no registry) is the same runtime stage.
containerfile="$deploy_dir/Containerfile"
[ "$(grep -E '^(FROM|ENTRYPOINT|CMD) ' "$containerfile")" = "$(printf '%s\n' "$runtime" | grep -E '^(FROM|ENTRYPOINT|CMD) ')" ] ||
	fail "deploy/Containerfile's FROM, ENTRYPOINT and CMD differ from the Dockerfile's runtime stage"
grep -Eq '^COPY rootfs/ /$' "$containerfile" || fail "deploy/Containerfile does not copy rootfs/"

# The build context as the Dockerfile sees it: only what it COPYs.
mkdir -p "$tmp/src"
copies=$(awk '/^FROM /{n++} n==1 && /^COPY / && !/--from/ { for (i = 2; i < NF; i++) print $i }' "$dockerfile")
[ -n "$copies" ] || fail "no COPY in the build stage"
for p in $copies; do
	p=${p%/}
	[ -e "$PP_SOURCE_DIR/$p" ] || { fail "COPY $p: not in the source tree"; continue; }
	grep -Eqx "!$p/?" "$dockerfile.dockerignore" || fail "COPY $p: not re-included by Dockerfile.dockerignore"
	mkdir -p "$tmp/src/$(dirname "$p")"
	cp -a "$PP_SOURCE_DIR/$p" "$tmp/src/$p"
done
# Build trees inside copied directories would not be in the image's context either.
find "$tmp/src" -name 'build*' -type d -prune -exec rm -rf {} +
run=$(awk '/^FROM /{n++} n==1 && /^RUN /' "$dockerfile" | sed 's/^RUN //')
[ "$(printf '%s\n' "$run" | grep -c .)" = 1 ] || fail "expected one RUN in the build stage: $run"
printf '%s\n' "$run" | grep -q 'deploy/build-rootfs.sh' || fail "the build stage does not RUN deploy/build-rootfs.sh"
# Same arguments, temporary paths. --install-deps installs only missing packages.
run=$(printf '%s\n' "$run" | sed "s| /build | $tmp/build |; s| /rootfs\$| $tmp/stage|")
start=$(date +%s)
if ! (cd "$tmp/src" && eval "$run") >"$tmp/build.log" 2>&1; then
	tail -30 "$tmp/build.log"
	fail "the Dockerfile's build steps failed: $run"
	finish
fi
echo "build steps: $(($(date +%s) - start)) s"
stage="$tmp/stage"

# Nothing but binary, loader, libraries and the CA bundle; no links, no other files.
others=$(cd "$stage" && find . ! -type d ! -type f; find . -type f | sed 's|^\./||' |
	grep -Ev '^(usr/bin/pebsprof|etc/ssl/certs/ca-certificates\.crt|lib64/ld-linux-x86-64\.so\.2|lib/x86_64-linux-gnu/[^/]+\.so(\.[0-9]+)*)$')
[ -z "$others" ] && echo "stage holds only binary, libraries and CA bundle" || fail "unexpected entries in the stage: $others"
grep -q 'BEGIN CERTIFICATE' "$stage/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || fail "no CA certificates in the stage"
loader="$stage/lib64/ld-linux-x86-64.so.2"
[ -x "$loader" ] || { fail "no loader in the stage"; finish; }

# Every library resolves inside the stage, and every staged library is one that resolves.
list=$("$loader" --library-path "$stage/lib/x86_64-linux-gnu" --list "$stage/usr/bin/pebsprof" 2>&1) ||
	fail "the staged loader cannot list the binary: $list"
outside=$(printf '%s\n' "$list" | awk -v s="$stage/" '$2 == "=>" && index($3, s) != 1')
[ -z "$outside" ] || fail "libraries resolved outside the stage: $outside"
# The libraries the agent dlopens, and what they need, count as used: the C++ runtime to
# demangle names, libdebuginfod for --debuginfod, libcapstone for memory events' data types,
# libcurl at the first HTTP request.
lists=$list
for so in libstdc++.so.6 libdebuginfod.so.1 libcapstone.so.4 libcurl.so.4; do
	solist=$("$loader" --library-path "$stage/lib/x86_64-linux-gnu" --list "$stage/lib/x86_64-linux-gnu/$so" 2>&1) ||
		fail "$so (dlopened) is not in the stage or does not resolve: $solist"
	outside=$(printf '%s\n' "$solist" | awk -v s="$stage/" '$2 == "=>" && index($3, s) != 1')
	[ -z "$outside" ] || fail "$so's libraries resolved outside the stage: $outside"
	lists=$(printf '%s\n%s\n\t%s => x/%s\n' "$lists" "$solist" "$so" "$so")
done
used=$(printf '%s\n' "$lists" | awk '$2 == "=>" && $3 !~ /ld-linux/ { print $3 }' | xargs -n1 basename | sort -u)
staged=$(ls "$stage/lib/x86_64-linux-gnu" | sort)
[ "$used" = "$staged" ] || fail "staged libraries differ from the resolved ones: $(diff <(echo "$used") <(echo "$staged") | grep '^[<>]' | tr '\n' ' ')"
echo "libraries: $(printf '%s\n' "$staged" | wc -l), all resolved in the stage"

# It runs from the stage: through the staged loader, and as root inside a chroot of it (what
# the container sees: no host libraries at all).
want="pebsprof $(sed -n 's/^project(pebsprof VERSION \([0-9.]*\).*/\1/p' "$PP_SOURCE_DIR/CMakeLists.txt")"
v=$("$loader" --library-path "$stage/lib/x86_64-linux-gnu" "$stage/usr/bin/pebsprof" --version 2>&1)
[ "$v" = "$want" ] || fail "staged binary --version: '$v', want '$want'"
if [ "$(id -u)" = 0 ] && command -v chroot >/dev/null; then
	v=$(chroot "$stage" /usr/bin/pebsprof --version 2>&1)
	[ "$v" = "$want" ] || fail "chroot --version: '$v', want '$want'"
	out=$(env -i "$(command -v chroot)" "$stage" /usr/bin/pebsprof run --dry-run \
		--endpoint https://pyroscope.example:4040/v1development/profiles 2>&1) ||
		fail "chroot run --dry-run failed: $out"
	printf '%s\n' "$out" | grep -q '^endpoint = https://pyroscope.example' || fail "chroot dry-run: $out"
	echo "runs in a chroot of the stage"
else
	echo "note: not root, the chroot run is left out (the staged-loader run above still checks)"
fi
echo "image size: $(du -sh "$stage" | cut -f1)"
finish
