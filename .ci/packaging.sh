#!/usr/bin/env bash
# CI for the release artefacts (make dist): both binaries need nothing but the C library
# (libc, libm, libpthread, libdl, the dynamic loader) and no GLIBC_ symbol version above
# 2.28; the amd64 .deb installs into a debootstrap'd Debian root, its unit passes
# `systemd-analyze verify`, the binary serves stories260K there as the service user, and
# removing the package leaves only the configuration; the x86_64 .rpm installs into that root
# with its scriptlets (service user, home, config mode; erase undoes them) and into an empty
# folder without them, serves from both and erases to its configuration alone; both MPI
# plugins need only libc and libmpi.so.40, and -tp 2 from the x86-64 tarball equals -tp 1;
# that tarball serves in an Ubuntu 18.04 root (glibc 2.27); the arm64 package's binary runs
# the model tests and serves one request under qemu-aarch64.
#   XINFER_CI_CACHE=/var/cache/xinfer-ci    where the roots and arm64 OpenMPI are kept
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if ! dpkg -s rpm debootstrap libyaml-dev:arm64 gcc-aarch64-linux-gnu qemu-user >/dev/null 2>&1; then
    echo "== installing rpm, debootstrap and the arm64 libyaml (the rest comes with .ci/arm64.sh)"
    $SUDO apt-get install -y -qq --no-install-recommends rpm debootstrap libyaml-dev:arm64 >/dev/null
fi
export XINFER_TEST_DATA="${XINFER_TEST_DATA:-$(cd .. && pwd)/shared/data}"
MODEL="$XINFER_TEST_DATA/models/stories260K"
VERSION=$(sed -n 's/^#define XINFER_VERSION "\(.*\)"/\1/p' include/xinfer.h)
CACHE="${XINFER_CI_CACHE:-/var/cache/xinfer-ci}"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    mountpoint -q "$WORK/deb-root/proc" 2>/dev/null && umount "$WORK/deb-root/proc"
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The release builds reuse the objects of build/ and build-arm64/ (the same compiler flags;
# only build_info.o and the link differ), so `make dist` compiles little.
# The copies' dependency files must name their own objects, or a later header change would
# not rebuild them.
copy_build() { # FROM TO
    [ -d "$1" ] && [ ! -d "$2" ] || return 0
    cp -a "$1" "$2"
    find "$2" -name '*.d' -exec sed -i "s#^$1/#$2/#" {} +
}
copy_build build build-static
copy_build build-arm64 build-static-arm64
# The arm64 MPI plugin is linked against Debian's arm64 OpenMPI, extracted (not installed).
OMPI_ARM64="$CACHE/openmpi-arm64"
if [ ! -s "$OMPI_ARM64/usr/lib/aarch64-linux-gnu/libmpi.so.40" ]; then
    echo "   arm64 OpenMPI for the plugin (once; kept in $OMPI_ARM64)"
    mkdir -p "$WORK/ompi" "$OMPI_ARM64"
    (cd "$WORK/ompi" && apt-get download -qq libopenmpi-dev:arm64 libopenmpi3:arm64 2>&1 | grep -v unsandboxed) || true
    for d in "$WORK"/ompi/*.deb; do dpkg-deb -x "$d" "$OMPI_ARM64"; done
fi
echo "== make dist"
make -j"$(nproc)" dist DIST_DIR=dist MPI_ARM64_SYSROOT="$OMPI_ARM64" >/dev/null
for f in "xinfer_${VERSION}_amd64.deb" "xinfer_${VERSION}_arm64.deb" "xinfer-$VERSION.x86_64.rpm" \
    "xinfer-$VERSION.aarch64.rpm" "xinfer-$VERSION-linux-x86_64.tar.gz" "xinfer-$VERSION-linux-aarch64.tar.gz"; do
    [ -s "dist/$f" ] || fail "make dist did not write dist/$f"
    echo "   dist/$f $(stat -c %s "dist/$f") bytes"
done

# ---- dependencies and glibc symbol versions, both architectures ---------------------------
check_binary() { # BINARY OBJDUMP [ALSO_ALLOWED]
    local needed newest
    needed=$(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
    for lib in $needed; do
        case "$lib" in
        libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | ld-linux-*.so.*) ;;
        "${3:-none}") ;;
        *) fail "$1 needs $lib (only the C library's are allowed)" ;;
        esac
    done
    newest=$("$2" -T "$1" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    [ "$(printf '%s\nGLIBC_2.28\n' "$newest" | sort -V | tail -1)" = GLIBC_2.28 ] ||
        fail "$1 needs $newest: $("$2" -T "$1" | grep "$newest" | sed -n 1,5p)"
    echo "   $1: needs $needed; newest symbol version $newest"
}
echo "== shared libraries and GLIBC_ versions"
for arch in amd64 arm64; do
    mkdir -p "$WORK/x-$arch"
    dpkg-deb -x "dist/xinfer_${VERSION}_$arch.deb" "$WORK/x-$arch"
done
check_binary "$WORK/x-amd64/usr/bin/xinfer" objdump
check_binary "$WORK/x-arm64/usr/bin/xinfer" aarch64-linux-gnu-objdump
# the MPI plugins: the C library and OpenMPI 4's libmpi, nothing else
check_binary "$WORK/x-amd64/usr/lib/xinfer/xinfer-mpi.so" objdump libmpi.so.40
check_binary "$WORK/x-arm64/usr/lib/xinfer/xinfer-mpi.so" aarch64-linux-gnu-objdump libmpi.so.40
readelf -h "$WORK/x-arm64/usr/lib/xinfer/xinfer-mpi.so" | grep -q AArch64 || fail "the arm64 plugin is not aarch64"
for pkg in "xinfer-$VERSION.x86_64.rpm" "xinfer-$VERSION.aarch64.rpm"; do
    listing=$(rpm -qpl "dist/$pkg" 2>/dev/null)
    grep -qx /usr/lib/xinfer/xinfer-mpi.so <<<"$listing" || fail "$pkg has no MPI plugin"
    requires=$(rpm -qpR "dist/$pkg" 2>/dev/null)
    grep -q libmpi <<<"$requires" && fail "$pkg requires OpenMPI: $(grep libmpi <<<"$requires")"
done
for arch in x86_64 aarch64; do
    listing=$(tar -tzf "dist/xinfer-$VERSION-linux-$arch.tar.gz")
    grep -q "/lib/xinfer/xinfer-mpi.so$" <<<"$listing" || fail "the $arch tarball has no MPI plugin"
done

# ---- -tp 2 from the x86-64 tarball: its binary finds its plugin and matches -tp 1 -----------
echo "== -tp 2 from the x86_64 tarball (the packaged plugin over this machine's OpenMPI)"
mkdir -p "$WORK/tar"
tar -C "$WORK/tar" -xzf "dist/xinfer-$VERSION-linux-x86_64.tar.gz"
TB="$WORK/tar/xinfer-$VERSION-linux-x86_64/bin/xinfer"
tp_gen() { XINFER_TP_TIMEOUT=10 "$TB" generate --model "$MODEL" --prompt 'Once upon a time' \
    --max-tokens 32 --threads 1 --temperature 0 "$@" 2>"$WORK/tp.log"; }
one=$(tp_gen -tp 1) || { cat "$WORK/tp.log"; fail "-tp 1 from the tarball"; }
two=$(tp_gen -tp 2) || { cat "$WORK/tp.log"; fail "-tp 2 from the tarball"; }
[ -n "$one" ] && [ "$one" = "$two" ] || fail "-tp 2 from the tarball: \"$two\", -tp 1: \"$one\""
echo "   -tp 2 = -tp 1: $two"

# ask_one PORT [https]: a completion from the server on PORT (waits for it to load first)
ask_one() {
    local port=$1 url="${2:-http}://127.0.0.1:$1" i out
    for i in $(seq 1 100); do
        curl -skf "$url/health" >/dev/null && break
        sleep 0.2
    done
    out=$(curl -skf "$url/v1/completions" -H 'Content-Type: application/json' \
        -d '{"model": "stories", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0}') ||
        fail "no answer from the server on port $port"
    echo "$out" | grep -q '"text"' || fail "unexpected answer: $out"
    curl -skf "$url/version" | grep -q '"commit"' || fail "/version has no commit"
    echo "   answered: $(grep -o '"text":"[^"]*"' <<<"$out" | sed -n 1p)"
}
stop_server() {
    kill "$1" && wait "$1" 2>/dev/null || true
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---- the .deb in a Debian root --------------------------------------------------------------
echo "== amd64 .deb in a debootstrap'd Debian root"
ROOT_TAR="$CACHE/bookworm-minbase.tar"
if [ ! -s "$ROOT_TAR" ]; then
    echo "   debootstrap (once; kept as $ROOT_TAR)"
    mkdir -p "$CACHE"
    $SUDO debootstrap --variant=minbase --include=systemd,passwd bookworm "$WORK/bootstrap" \
        http://deb.debian.org/debian >/dev/null
    tar -C "$WORK/bootstrap" -cf "$ROOT_TAR.tmp" . && mv "$ROOT_TAR.tmp" "$ROOT_TAR"
    rm -rf "$WORK/bootstrap"
fi
R="$WORK/deb-root"
mkdir -p "$R"
tar -C "$R" -xf "$ROOT_TAR"
mount -t proc proc "$R/proc" 2>/dev/null || echo "   (no /proc in the chroot: mount not permitted)"
# the file tree, less what changes on its own (dpkg's database and logs, backups of /etc files)
tree() { (cd "$R" && find . -xdev -path ./proc -prune -o -path ./var/lib/dpkg -prune -o -path ./var/log -prune \
    -o -path ./var/cache -prune -o -path ./tmp -prune -o -path ./run -prune -o ! -name '*-' -print | sort); }
tree >"$WORK/before"
cp "dist/xinfer_${VERSION}_amd64.deb" "$R/tmp/"
chroot "$R" dpkg -i "/tmp/xinfer_${VERSION}_amd64.deb" >/dev/null
chroot "$R" getent passwd xinfer | grep -q ':/var/lib/xinfer:' || fail "no xinfer user"
chroot "$R" systemd-analyze verify /lib/systemd/system/xinfer.service || fail "systemd-analyze verify"
echo "   systemd-analyze verify xinfer.service: ok"
chroot "$R" xinfer --version | grep -q '^linkage:  static libraries, glibc >= 2.28$' || fail "xinfer --version"
# a Debian minbase has no libcurl: pull says which library it needs, and fails cleanly
if ! chroot "$R" sh -c 'ls /usr/lib/*/libcurl.so.4' >/dev/null 2>&1; then
    out=$(chroot "$R" xinfer pull org/name --download-dir /tmp/hub 2>&1) && fail "pull without libcurl: $out"
    echo "$out" | grep -q 'libcurl.so.4 is not installed' || fail "pull without libcurl: $out"
    echo "   without libcurl: $out"
fi
cp -r "$MODEL" "$R/var/lib/xinfer/stories"
chroot "$R" chown -R xinfer:xinfer /var/lib/xinfer/stories
PORT=$(free_port)
printf 'model: /var/lib/xinfer/stories\nserved-model-name: [stories]\nhost: 127.0.0.1\nport: %s\nthreads: 1\n' \
    "$PORT" >"$R/etc/xinfer/xinfer.yaml"
# what the unit runs, as the unit's user
chroot --userspec=xinfer:xinfer "$R" env HF_HOME=/var/lib/xinfer/huggingface \
    /usr/bin/xinfer serve --config /etc/xinfer/xinfer.yaml >"$WORK/deb-serve.log" 2>&1 &
PIDS+=($!)
ask_one "$PORT" || { cat "$WORK/deb-serve.log"; exit 1; }
stop_server "${PIDS[-1]}"
# HTTPS: the release binary opens the root's GnuTLS (libgnutls30 comes with apt) for --ssl-*
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$R/tmp/key.pem" -out "$R/tmp/cert.pem" -days 2 \
    -subj /CN=localhost 2>/dev/null
chmod 0644 "$R/tmp/key.pem"
PORT=$(free_port)
chroot --userspec=xinfer:xinfer "$R" /usr/bin/xinfer serve /var/lib/xinfer/stories --served-model-name stories \
    --host 127.0.0.1 --port "$PORT" --threads 1 --ssl-keyfile /tmp/key.pem --ssl-certfile /tmp/cert.pem \
    >"$WORK/deb-tls.log" 2>&1 &
PIDS+=($!)
ask_one "$PORT" https || { cat "$WORK/deb-tls.log"; exit 1; }
curl -s -m 5 "http://127.0.0.1:$PORT/health" >/dev/null && fail "plain HTTP answered on the HTTPS port"
stop_server "${PIDS[-1]}"
echo "   HTTPS with the root's GnuTLS: ok"
rm -f "$R/tmp/key.pem" "$R/tmp/cert.pem"
rm -rf "$R/var/lib/xinfer/stories"
chroot "$R" dpkg -r xinfer >/dev/null
tree >"$WORK/after"
left=$(comm -13 "$WORK/before" "$WORK/after" | tr '\n' ' ')
gone=$(comm -23 "$WORK/before" "$WORK/after" | tr '\n' ' ')
[ "$left" = "./etc/xinfer ./etc/xinfer/xinfer.yaml " ] || fail "dpkg -r left: $left"
[ -z "$gone" ] || fail "dpkg -r removed files it did not install: $gone"
chroot "$R" getent passwd xinfer >/dev/null && fail "dpkg -r left the xinfer user"
echo "   dpkg -r left only: $left"

# ---- the x86_64 .rpm with its scriptlets, in the same Debian root ---------------------------
# rpm --root runs %pre/%post/%postun chrooted, with the root's sh, useradd and groupadd: the
# service user, its home and the configuration's group are made and undone as on openEuler.
echo "== x86_64 .rpm with its scriptlets in the Debian root (rpm -i --root --nodeps)"
rpm_in_r() { rpm --root "$R" --dbpath /var/lib/rpm --nodeps "$@" 2>&1 | grep -v '^rpm: ' || true; }
rm -rf "$R/etc/xinfer" # what the .deb left
tree >"$WORK/before-rpm"
rpm_in_r -i "dist/xinfer-$VERSION.x86_64.rpm" | grep -v '^xinfer: set the model' || true
chroot "$R" getent passwd xinfer | grep -q ':/var/lib/xinfer:/sbin/nologin$' || fail "rpm %pre made no xinfer user"
[ "$(chroot "$R" stat -c '%U:%G %a' /var/lib/xinfer)" = "xinfer:xinfer 750" ] || fail "rpm %post: /var/lib/xinfer"
[ "$(chroot "$R" stat -c '%G %a' /etc/xinfer/xinfer.yaml)" = "xinfer 640" ] || fail "rpm %post: xinfer.yaml mode"
[ -f "$R/usr/lib/xinfer/xinfer-mpi.so" ] || fail "rpm -i installed no MPI plugin"
cp -r "$MODEL" "$R/var/lib/xinfer/stories"
chroot "$R" chown -R xinfer:xinfer /var/lib/xinfer/stories
PORT=$(free_port)
printf 'model: /var/lib/xinfer/stories\nserved-model-name: [stories]\nhost: 127.0.0.1\nport: %s\nthreads: 1\n' \
    "$PORT" >"$R/etc/xinfer/xinfer.yaml"
chroot --userspec=xinfer:xinfer "$R" /usr/bin/xinfer serve --config /etc/xinfer/xinfer.yaml \
    >"$WORK/rpm-chroot-serve.log" 2>&1 &
PIDS+=($!)
ask_one "$PORT" || { cat "$WORK/rpm-chroot-serve.log"; exit 1; }
stop_server "${PIDS[-1]}"
rm -rf "$R/var/lib/xinfer/stories"
rpm_in_r -e xinfer | grep -v 'saved as' || true
chroot "$R" getent passwd xinfer >/dev/null && fail "rpm -e (%postun) left the xinfer user"
rm -rf "$R/var/lib/rpm" "$R/usr/lib/sysimage"
tree >"$WORK/after-rpm"
left=$(comm -13 "$WORK/before-rpm" "$WORK/after-rpm" | tr '\n' ' ')
gone=$(comm -23 "$WORK/before-rpm" "$WORK/after-rpm" | tr '\n' ' ')
[ "$left" = "./etc/xinfer ./etc/xinfer/xinfer.yaml.rpmsave " ] || fail "rpm -e left: $left"
[ -z "$gone" ] || fail "rpm -e removed files it did not install: $gone"
echo "   scriptlets: user, /var/lib/xinfer and the config's mode made; served as xinfer; rpm -e left only: $left"
umount "$R/proc" 2>/dev/null || true

# (no `| head` under pipefail: a writer that outlives it dies of SIGPIPE and fails the script)
# ---- the x86-64 tarball on an older C library: Ubuntu 18.04's glibc 2.27 ----------------------
# (Debian's archive no longer serves buster's glibc 2.28; Ubuntu's archive still serves bionic.
# Where it cannot be reached this check says it was skipped.)
echo "== x86_64 tarball in an Ubuntu 18.04 root (glibc 2.27)"
OLD_TAR="$CACHE/bionic-minbase.tar"
if [ ! -s "$OLD_TAR" ]; then
    mkdir -p "$CACHE"
    if $SUDO debootstrap --variant=minbase --no-check-gpg bionic "$WORK/bionic" \
        http://archive.ubuntu.com/ubuntu >"$WORK/bionic.log" 2>&1; then
        tar -C "$WORK/bionic" -cf "$OLD_TAR.tmp" . && mv "$OLD_TAR.tmp" "$OLD_TAR"
    fi
    rm -rf "$WORK/bionic"
fi
if [ -s "$OLD_TAR" ]; then
    O="$WORK/old-root"
    mkdir -p "$O/opt"
    tar -C "$O" -xf "$OLD_TAR"
    tar -C "$O/opt" -xzf "dist/xinfer-$VERSION-linux-x86_64.tar.gz"
    glibc=$(chroot "$O" ldd --version | sed -n "1s/.* \([0-9.]*\)$/\1/p")
    cp -r "$MODEL" "$O/opt/stories"
    PORT=$(free_port)
    chroot "$O" "/opt/xinfer-$VERSION-linux-x86_64/bin/xinfer" serve /opt/stories --served-model-name stories \
        --host 127.0.0.1 --port "$PORT" --threads 1 >"$WORK/old-serve.log" 2>&1 &
    PIDS+=($!)
    ask_one "$PORT" || { cat "$WORK/old-serve.log"; exit 1; }
    stop_server "${PIDS[-1]}"
    echo "   served on glibc $glibc"
    # its GnuTLS is 3.5: --ssl-* stops with one line naming the library and the version needed
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$O/opt/key.pem" -out "$O/opt/cert.pem" -days 2 \
        -subj /CN=localhost 2>/dev/null
    out=$(timeout 20 chroot "$O" "/opt/xinfer-$VERSION-linux-x86_64/bin/xinfer" serve /opt/stories --port "$PORT" \
        --ssl-keyfile /opt/key.pem --ssl-certfile /opt/cert.pem 2>&1) && fail "--ssl-* with GnuTLS 3.5 served"
    grep -q 'libgnutls.so.30' <<<"$out" || fail "--ssl-* with GnuTLS 3.5: $out"
    echo "   $out"
else
    echo "   skipped: no Ubuntu 18.04 root (archive.ubuntu.com unreachable: $(tail -1 "$WORK/bionic.log" 2>/dev/null))"
fi

# ---- the .rpm in an empty folder ------------------------------------------------------------
# An empty root has no shell for the scriptlets (user creation): --noscripts. Debian's rpm
# warns that it is not the system's package manager; that line is dropped.
echo "== x86_64 .rpm in an empty folder (rpm -i --root --nodeps --noscripts)"
E="$WORK/rpm-root"
mkdir -p "$E"
rpm_in_e() { rpm --root "$E" --dbpath /var/lib/rpm --nodeps --noscripts "$@" 2>&1 | grep -v '^rpm: ' || true; }
rpm_in_e -i "dist/xinfer-$VERSION.x86_64.rpm"
[ -x "$E/usr/bin/xinfer" ] || fail "rpm -i installed no /usr/bin/xinfer"
PORT=$(free_port)
printf 'model: %s\nserved-model-name: [stories]\nhost: 127.0.0.1\nport: %s\nthreads: 1\n' \
    "$MODEL" "$PORT" >"$E/etc/xinfer/xinfer.yaml"
"$E/usr/bin/xinfer" serve --config "$E/etc/xinfer/xinfer.yaml" >"$WORK/rpm-serve.log" 2>&1 &
PIDS+=($!)
ask_one "$PORT" || { cat "$WORK/rpm-serve.log"; exit 1; }
stop_server "${PIDS[-1]}"
rpm_in_e -e xinfer
left=$(cd "$E" && find . -type f ! -path './var/lib/rpm/*' | sort | tr '\n' ' ')
[ "$left" = "./etc/xinfer/xinfer.yaml.rpmsave " ] || fail "rpm -e left: $left"
echo "   rpm -e left only: $left"

# ---- the arm64 package's binary under qemu ---------------------------------------------------
echo "== arm64 package binary under qemu-aarch64 -cpu cortex-a76: model tests"
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig make -j"$(nproc)" \
    STATIC=1 CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar BUILD=build-static-arm64 \
    build-static-arm64/xinfer_tests >/dev/null
printf '#!/bin/sh\nexec qemu-aarch64 "%s" "$@"\n' "$WORK/x-arm64/usr/bin/xinfer" >"$WORK/xinfer-arm64"
chmod +x "$WORK/xinfer-arm64"
QEMU_LD_PREFIX=/ QEMU_CPU=cortex-a76 XINFER_EXPECT_KERNELS=neon XINFER_BIN="$WORK/xinfer-arm64" \
    qemu-aarch64 build-static-arm64/xinfer_tests stories cli_generate config_file
PORT=$(free_port)
QEMU_LD_PREFIX=/ QEMU_CPU=cortex-a76 "$WORK/xinfer-arm64" serve "$MODEL" --served-model-name stories \
    --host 127.0.0.1 --port "$PORT" --threads 1 >"$WORK/arm64-serve.log" 2>&1 &
PIDS+=($!)
ask_one "$PORT" || { cat "$WORK/arm64-serve.log"; exit 1; }
stop_server "${PIDS[-1]}"
