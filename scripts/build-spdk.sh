#!/usr/bin/env bash
# Builds and installs SPDK v25.09 (and fio-3.42 for SPDK's fio plugin) the
# way the HHC module needs it: shared libraries, the system's DPDK, the
# iSCSI initiator, OCF (the benchmark's comparison), the fio plugin, and
# bdevperf and rpc.py installed. For a user's machine, by hand: CI never
# runs it (it takes about 20 minutes on 2 cores and needs the network or
# source trees). Then: SPDK_DIR=PREFIX scripts/hhc-quickstart.sh up.
#
#   scripts/build-spdk.sh [--prefix DIR] [--src SPDK_TREE] [--fio-src FIO_TREE]
#                         [--work DIR] [--jobs N] [--with-rbd] [--no-deps] [--dry-run]
#
#   --prefix DIR      where to install (default /opt/spdk)
#   --src DIR         an SPDK v25.09 source tree with its ocf, isa-l and
#                     isa-l-crypto submodules filled in; without it, the tree is
#                     cloned with git into WORK/spdk
#   --fio-src DIR     a fio-3.42 source tree (built in place); without it,
#                     cloned into WORK/fio
#   --work DIR        where clones go (default /opt/src: tests/spdk/env.sh finds
#                     /opt/src/fio/fio there)
#   --jobs N          make -j (default: the number of CPUs)
#   --with-rbd        also build bdev_rbd (needs librbd-dev, librados-dev)
#   --no-deps         do not apt-get install the build dependencies
#   --dry-run         print the steps, run nothing
#
# The steps past SPDK's own configure/make/install are those a Debian 12
# build needed (the project's build notes): SPDK v25.09 accepts DPDK 22.11
# only up to 22.11.4 while Debian 12 ships 22.11.11 (the minor-version check
# in lib/env_dpdk/pci_dpdk.c is raised to the installed minor); configure
# turns CONFIG_IPSEC_MB on because Debian's libdpdk.pc names IPSec_MB, and it
# is turned off again (crypto is not built); make install leaves out
# libspdk_ocfenv.a and its pkg-config file, which libspdk_bdev_ocf.so and the
# libspdk.so linker script need, and bdevperf; SPDK's python package lands
# where python does not search it, so bin/spdk-rpc is a wrapper that sets
# PYTHONPATH; every installed binary and library gets RUNPATH=PREFIX/lib.
set -euo pipefail

PREFIX=/opt/spdk
SRC=
FIO_SRC=
WORK=/opt/src
JOBS=$(nproc 2>/dev/null || echo 2)
RBD=
DEPS=1
DRY=
SPDK_TAG=v25.09
FIO_TAG=fio-3.42
SPDK_GIT=https://github.com/spdk/spdk.git
FIO_GIT=https://github.com/axboe/fio.git

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
        --prefix) PREFIX=$2; shift 2 ;;
        --src) SRC=$2; shift 2 ;;
        --fio-src) FIO_SRC=$2; shift 2 ;;
        --work) WORK=$2; shift 2 ;;
        --jobs) JOBS=$2; shift 2 ;;
        --with-rbd) RBD=1; shift ;;
        --no-deps) DEPS=; shift ;;
        --dry-run) DRY=1; shift ;;
        -h | --help) usage; exit 0 ;;
        *) echo "build-spdk: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done

if [ -n "${CI:-}" ] && [ -z "$DRY" ]; then
    echo "build-spdk: not for CI (CI=$CI): it builds SPDK for a user's machine" >&2
    exit 2
fi

step() { echo "=== build-spdk: $*"; }
run() { # command...: printed, then run unless --dry-run
    echo "+ $*"
    [ -n "$DRY" ] || "$@"
}

SRC=${SRC:-$WORK/spdk}
FIO_SRC=${FIO_SRC:-$WORK/fio}

# ---- build dependencies (Debian/Ubuntu) ----
if [ -n "$DEPS" ]; then
    step "build dependencies (apt-get)"
    pkgs=(build-essential pkg-config git python3 python3-pip python3-venv python3-dev meson ninja-build nasm autoconf
        automake libtool patchelf libdpdk-dev libnuma-dev libssl-dev uuid-dev libaio-dev libiscsi-dev libncurses-dev
        libcunit1-dev libjson-c-dev libfuse3-dev libkeyutils-dev libcmocka-dev zlib1g-dev libclang-dev)
    [ -z "$RBD" ] || pkgs+=(librbd-dev librados-dev)
    if [ "$(id -u)" -ne 0 ]; then
        echo "build-spdk: not root: install these first, or run as root, or pass --no-deps:" >&2
        echo "  apt-get install ${pkgs[*]}" >&2
        [ -n "$DRY" ] || exit 1
    fi
    run apt-get update
    run apt-get install -y --no-install-recommends "${pkgs[@]}"
fi

# ---- sources ----
step "SPDK source: $SRC"
if [ ! -e "$SRC/configure" ]; then
    run mkdir -p "$(dirname "$SRC")"
    run git clone --depth 1 --branch "$SPDK_TAG" "$SPDK_GIT" "$SRC"
    # DPDK comes from the system; intel-ipsec-mb, libvfio-user and xnvme are
    # not built.
    run git -C "$SRC" submodule update --init --depth 1 ocf isa-l-crypto
    # isa-l's pinned commit is missing from some mirrors: its tag v2.31.1 works.
    if [ -z "$DRY" ] && ! git -C "$SRC" submodule update --init --depth 1 isa-l; then
        run git -C "$SRC" submodule update --init --no-fetch isa-l || true
        run git -C "$SRC/isa-l" fetch --depth 1 origin tag v2.31.1
        run git -C "$SRC/isa-l" checkout v2.31.1
    elif [ -n "$DRY" ]; then
        echo "+ git -C $SRC submodule update --init --depth 1 isa-l   (else: isa-l at tag v2.31.1)"
    fi
fi
if [ -z "$DRY" ]; then
    for sub in ocf isa-l isa-l-crypto; do
        [ -n "$(ls -A "$SRC/$sub" 2>/dev/null)" ] ||
            { echo "build-spdk: $SRC/$sub is empty: fill the submodule (git submodule update --init $sub)" >&2; exit 1; }
    done
fi
if [ -f "$SRC/VERSION" ] && ! grep -q "25.09" "$SRC/VERSION" 2>/dev/null; then
    echo "build-spdk: warning: $SRC/VERSION says $(head -1 "$SRC/VERSION"), not 25.09: the module is tested with v25.09" >&2
fi

step "fio source: $FIO_SRC"
if [ ! -e "$FIO_SRC/configure" ]; then
    run git clone --depth 1 --branch "$FIO_TAG" "$FIO_GIT" "$FIO_SRC"
fi
run sh -c "cd '$FIO_SRC' && ./configure && make -j$JOBS"

# ---- SPDK ----
step "DPDK version check (lib/env_dpdk/pci_dpdk.c)"
dpdk=$(pkg-config --modversion libdpdk 2>/dev/null || echo unknown)
echo "system DPDK: $dpdk"
case $dpdk in
    22.11.*)
        minor=${dpdk#22.11.}
        minor=${minor%%[!0-9]*}
        if [ -n "$minor" ] && [ "$minor" -gt 4 ]; then
            # SPDK v25.09 takes 22.11 minor releases up to .4 only; the private
            # ABI it uses did not change in later 22.11 LTS releases.
            run sed -i "s/if (minor > 4) {/if (minor > $minor) {/" "$SRC/lib/env_dpdk/pci_dpdk.c"
        fi ;;
esac

step "configure"
conf=(--prefix="$PREFIX" --with-shared --with-dpdk --with-fio="$FIO_SRC" --with-iscsi-initiator --with-ocf
    --disable-tests --disable-unit-tests)
[ -z "$RBD" ] || conf+=(--with-rbd)
run sh -c "cd '$SRC' && ./configure ${conf[*]}"
# configure turns IPSEC_MB on from Debian's libdpdk.pc; crypto is off.
run sed -i 's/^CONFIG_IPSEC_MB?=y/CONFIG_IPSEC_MB?=n/' "$SRC/mk/config.mk"

step "make -j$JOBS && make install"
run make -C "$SRC" -j"$JOBS"
run make -C "$SRC" install

# ---- what make install leaves out ----
step "post-install fixups under $PREFIX"
if [ -z "$DRY" ]; then
    ocfenv=$(find "$SRC/build/lib" -name libspdk_ocfenv.a | head -1)
    [ -n "$ocfenv" ] || { echo "build-spdk: no libspdk_ocfenv.a under $SRC/build/lib" >&2; exit 1; }
    install -m 644 "$ocfenv" "$PREFIX/lib/"
    if [ ! -e "$PREFIX/lib/pkgconfig/spdk_ocfenv.pc" ]; then
        cat >"$PREFIX/lib/pkgconfig/spdk_ocfenv.pc" <<EOF
Description: SPDK ocfenv library
Name: spdk_ocfenv
Version: 25.09
Libs: -L$PREFIX/lib -lspdk_ocfenv
Requires: spdk_log spdk_util
Libs.private:
Cflags: -I$PREFIX/include
EOF
    fi
    # The libspdk.so linker script: libspdk_bdev_ocf.so needs libspdk_ocfenv.a
    # (and a --with-rbd build libspdk_bdev_rbd.so).
    for f in "$PREFIX"/lib/libspdk.so*; do
        [ -f "$f" ] && [ ! -L "$f" ] && grep -q '^GROUP' "$f" || continue
        grep -q libspdk_ocfenv.a "$f" || sed -i 's/libspdk_bdev_ocf.so /libspdk_bdev_ocf.so libspdk_ocfenv.a /' "$f"
        if [ -n "$RBD" ] && ! grep -q libspdk_bdev_rbd.so "$f"; then
            sed -i 's/libspdk_bdev_raid.so /libspdk_bdev_raid.so libspdk_bdev_rbd.so /' "$f"
        fi
    done
    install -m 755 "$SRC/build/examples/bdevperf" "$PREFIX/bin/bdevperf"
    ln -sf bdevperf "$PREFIX/bin/spdk_bdevperf"
    # rpc.py and the python package where tests/spdk/env.sh looks too.
    rm -rf "$PREFIX/python" && cp -r "$SRC/python" "$PREFIX/python"
    mkdir -p "$PREFIX/scripts" && install -m 755 "$SRC/scripts/rpc.py" "$SRC/scripts/spdkcli.py" "$PREFIX/scripts/"
    pydir=$(ls -d "$PREFIX"/lib/python3*/site-packages 2>/dev/null | head -1)
    cat >"$PREFIX/bin/spdk-rpc" <<EOF
#!/bin/sh
# Wrapper: SPDK's python package is installed where python does not search.
PYTHONPATH="${pydir:+$pydir:}$PREFIX/python\${PYTHONPATH:+:\$PYTHONPATH}"
export PYTHONPATH
exec python3 -c 'import sys; sys.argv[0] = "spdk-rpc"; from spdk.spdk_rpc import main; sys.exit(main())' "\$@"
EOF
    chmod 755 "$PREFIX/bin/spdk-rpc"
    for f in "$PREFIX"/bin/* "$PREFIX"/lib/fio/* "$PREFIX"/lib/lib*.so.*; do
        [ -f "$f" ] && [ ! -L "$f" ] && head -c 4 "$f" | grep -q ELF || continue
        patchelf --set-rpath "$PREFIX/lib" "$f"
    done
    if [ "$(id -u)" -eq 0 ] && [ -d /etc/ld.so.conf.d ]; then
        echo "$PREFIX/lib" >/etc/ld.so.conf.d/spdk.conf
        ldconfig
    fi
else
    echo "+ install libspdk_ocfenv.a and spdk_ocfenv.pc, add it to the libspdk.so linker script"
    echo "+ install build/examples/bdevperf, python/, scripts/rpc.py, a bin/spdk-rpc wrapper"
    echo "+ patchelf --set-rpath $PREFIX/lib on bin/*, lib/fio/*, lib/lib*.so.*; ld.so.conf.d entry; ldconfig"
fi

step "done"
cat <<EOF
SPDK $SPDK_TAG is in $PREFIX, fio in $FIO_SRC/fio (the plugin needs this very fio).
Next:
  SPDK_DIR=$PREFIX FIO=$FIO_SRC/fio scripts/hhc-quickstart.sh up
  SPDK_DIR=$PREFIX FIO=$FIO_SRC/fio bash tests/spdk/run.sh --list
EOF
