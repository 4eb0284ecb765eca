#!/bin/sh
# Set up the tools pyebpf is compared with, on Debian, as root:
#   - bpftrace, and BCC (python3-bpfcc, for Debian's /usr/bin/python3),
#     gcc and systemtap-sdt-dev (sys/sdt.h) to build the traced C program;
#   - kernel headers for BCC: when /lib/modules/$(uname -r)/build is absent,
#     Debian's headers (linux-headers-$(uname -r) if the archive has it, else
#     linux-headers-<arch>), with build/source pointed at them;
#   - tracefs and debugfs mounted (BCC looks for uprobe_events there).
# Each change to the system is announced before it is made; what is already
# in place is left alone.  pyebpf itself needs none of this.
set -eu

say() { echo "setup: $*"; }
changed=0

if [ "$(id -u)" != 0 ]; then
    echo "setup: must run as root (installs packages, mounts tracefs)" >&2
    exit 1
fi

missing=""
for p in bpftrace python3-bpfcc gcc systemtap-sdt-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
apt_updated=0
apt_update() {
    if [ "$apt_updated" = 0 ]; then
        apt-get update -qq
        apt_updated=1
    fi
}
if [ -n "$missing" ]; then
    say "installing Debian packages:$missing (apt-get install)"
    apt_update
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    changed=1
fi

rel=$(uname -r)
mod=${PYEBPF_SETUP_MODULES_DIR:-/lib/modules/$rel}   # (overridable to test this script)
if [ ! -e "$mod/build/include" ]; then
    apt_update
    if apt-cache show "linux-headers-$rel" >/dev/null 2>&1; then
        if ! dpkg -s "linux-headers-$rel" >/dev/null 2>&1; then
            say "installing linux-headers-$rel (kernel headers for BCC)"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "linux-headers-$rel" >/dev/null
            changed=1
        fi
    else
        arch=$(dpkg --print-architecture)
        if ! dpkg -s "linux-headers-$arch" >/dev/null 2>&1; then
            say "no headers package for the running kernel $rel: installing Debian's" \
                "linux-headers-$arch instead (BCC compiles against them)"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "linux-headers-$arch" >/dev/null
            changed=1
        fi
        build=$(ls -d /usr/src/linux-headers-*-"$arch" 2>/dev/null | sort -V | tail -n 1)
        if [ -z "$build" ]; then
            echo "setup: linux-headers-$arch installed no /usr/src/linux-headers-*-$arch" >&2
            exit 1
        fi
        source=${build%-"$arch"}-common
        [ -d "$source" ] || source=$build
        if [ -e "$mod/build" ] && [ ! -L "$mod/build" ]; then
            echo "setup: $mod/build exists but has no include/: leaving it alone (BCC will fail)" >&2
        else
            say "pointing $mod/build at $build"
            mkdir -p "$mod"
            ln -sfn "$build" "$mod/build"
            changed=1
            if [ ! -e "$mod/source" ] || [ -L "$mod/source" ]; then
                if [ "$(readlink "$mod/source" || true)" != "$source" ]; then
                    say "pointing $mod/source at $source"
                    ln -sfn "$source" "$mod/source"
                fi
            fi
        fi
    fi
fi

if ! grep -qs " /sys/kernel/debug debugfs " /proc/mounts; then
    say "mounting debugfs on /sys/kernel/debug"
    mount -t debugfs nodev /sys/kernel/debug
    changed=1
fi
if ! grep -qs " tracefs " /proc/mounts; then
    say "mounting tracefs on /sys/kernel/tracing"
    mount -t tracefs nodev /sys/kernel/tracing
    changed=1
fi

[ "$changed" = 1 ] || say "bpftrace, BCC, kernel headers, tracefs and debugfs already in place: nothing to change"
echo "setup: $(bpftrace --version 2>/dev/null || echo 'bpftrace missing'), BCC $(/usr/bin/python3 -c 'import bcc; print(bcc.__version__)' 2>/dev/null || echo missing), headers $(readlink -f "$mod/build")"
