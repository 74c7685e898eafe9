#!/bin/sh
# Build the node base image WITHOUT a container registry:
#   debootstrap a minimal Debian (variant=minbase) with the packages in packages.txt
#   from Debian's package mirror into a temporary directory, slim it, and `docker import` it.
#
#   usage: docker/bootstrap-base.sh TAG        (root; needs debootstrap and a docker engine)
#   env:   SUITE (bookworm)  MIRROR (http://deb.debian.org/debian)
#
# About 80-90 s on 2 cores (the download and unpack dominate); the result is ~150 MB.
set -eu

tag=${1:?usage: $0 TAG}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)
packages=$(grep -v '^[[:space:]]*\(#\|$\)' "$here/packages.txt" | paste -sd, -)

[ "$(id -u)" -eq 0 ] || { echo "bootstrap-base.sh: must run as root (debootstrap)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "bootstrap-base.sh: debootstrap not found (apt-get install debootstrap)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/var/tmp}/kraftwerk-rootfs.XXXXXX")
root="$work/rootfs"
cleanup() {
    # debootstrap may leave /proc, /sys or /dev bind mounts behind when it fails: never rm through them
    for m in dev/pts dev proc sys; do
        mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT INT TERM

echo "==> debootstrap $suite (minbase + $packages) from $mirror" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    exit 1
}

# slim: package caches and lists, documentation, per-image ssh host keys (made at container start)
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/etc/ssh/ssh_host_*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' ! -name locale.alias -exec rm -rf {} +

echo "==> docker import $tag" >&2
tar -C "$root" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'LABEL org.kraftwerk.role=base' \
    --change 'CMD ["/bin/bash"]' \
    - "$tag" >/dev/null
echo "$tag"
