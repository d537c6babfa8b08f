#!/usr/bin/env bash
# make dist: one architecture's release artefacts from its release binary (STATIC=1 build).
#   packaging/dist.sh VERSION ARCH BINARY OUTDIR        ARCH: x86_64 or aarch64
# writes OUTDIR/xinfer_VERSION_{amd64,arm64}.deb, xinfer-VERSION.ARCH.rpm and
# xinfer-VERSION-linux-ARCH.tar.gz. Needs dpkg-deb and rpmbuild (Debian's rpm package).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 VERSION x86_64|aarch64 BINARY OUTDIR" >&2; exit 2; }
version=$1 arch=$2 bin=$3 out=$4
case "$arch" in
x86_64) deb_arch=amd64 strip=strip ;;
aarch64) deb_arch=arm64 strip=aarch64-linux-gnu-strip ;;
*) echo "$0: ARCH must be x86_64 or aarch64, not $arch" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The MPI plugin for -tp > 1, when it was built beside the binary: /usr/lib/xinfer/, where
# the binary looks (../lib/xinfer from its folder). It needs OpenMPI 4's libmpi.so.40 only
# when loaded, so the packages suggest OpenMPI rather than depend on it.
plugin="$(dirname "$bin")/xinfer-mpi.so"
[ -s "$plugin" ] || { plugin=""; echo "$0: $arch: no MPI plugin beside $bin: packaged without it" >&2; }

# stage ROOT UNIT_DIR: the installed tree (stripped binary and plugin, unit, default config,
# README).
stage() {
    install -D -m 0755 "$bin" "$1/usr/bin/xinfer"
    "$strip" "$1/usr/bin/xinfer"
    if [ -n "$plugin" ]; then
        install -D -m 0644 "$plugin" "$1/usr/lib/xinfer/xinfer-mpi.so"
        "$strip" --strip-unneeded "$1/usr/lib/xinfer/xinfer-mpi.so"
    fi
    install -D -m 0644 "$here/xinfer.service" "$1$2/xinfer.service"
    install -D -m 0644 "$here/xinfer.yaml" "$1/etc/xinfer/xinfer.yaml"
    install -D -m 0644 "$here/../README.md" "$1/usr/share/doc/xinfer/README.md"
}

# ---- .deb (Debian, UOS, Kylin desktop) ----
d="$work/deb"
stage "$d" /lib/systemd/system
mkdir -p "$d/DEBIAN"
install -m 0755 "$here/deb/postinst" "$here/deb/prerm" "$here/deb/postrm" "$d/DEBIAN/"
echo /etc/xinfer/xinfer.yaml >"$d/DEBIAN/conffiles"
cat >"$d/DEBIAN/control" <<CONTROL
Package: xinfer
Version: $version
Architecture: $deb_arch
Maintainer: xinfer developers <xinfer@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$d" | cut -f1)
Depends: libc6 (>= 2.28), passwd
Recommends: libcurl4
Suggests: openmpi-bin
Section: net
Priority: optional
Description: LLM inference server for CPU edge nodes
 xinfer serves Hugging Face models with vLLM's flags and an OpenAI-compatible API
 from one native binary that needs only the C library (glibc 2.28 or later).
 The xinfer service reads /etc/xinfer/xinfer.yaml.
CONTROL
dpkg-deb --root-owner-group -Zxz --build "$d" "$out/xinfer_${version}_${deb_arch}.deb" >/dev/null

# ---- .rpm (openEuler, Kylin and UOS server editions) ----
r="$work/rpm"
stage "$r/stage" /usr/lib/systemd/system
rpmbuild -bb --quiet --target "$arch-linux" --define "_topdir $r/top" \
    --define "xi_version $version" --define "xi_arch $arch" --define "xi_stage $r/stage" \
    --define "xi_mpi ${plugin:+1}" \
    "$here/xinfer.spec"
cp "$r/top/RPMS/$arch/xinfer-$version-1.$arch.rpm" "$out/xinfer-$version.$arch.rpm"

# ---- .tar.gz (any distribution; copy the files where the README says) ----
name="xinfer-$version-linux-$arch"
t="$work/tar/$name"
install -D -m 0755 "$bin" "$t/bin/xinfer"
"$strip" "$t/bin/xinfer"
if [ -n "$plugin" ]; then
    install -D -m 0644 "$plugin" "$t/lib/xinfer/xinfer-mpi.so"
    "$strip" --strip-unneeded "$t/lib/xinfer/xinfer-mpi.so"
fi
install -m 0644 "$here/xinfer.service" "$here/xinfer.yaml" "$here/../README.md" "$t/"
tar -C "$work/tar" --owner=0 --group=0 -czf "$out/$name.tar.gz" "$name"
ls -l "$out/xinfer_${version}_${deb_arch}.deb" "$out/xinfer-$version.$arch.rpm" "$out/$name.tar.gz"
