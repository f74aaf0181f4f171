#!/usr/bin/env bash
# One command from a checkout to a running HHC bdev.
#
#   scripts/hhc-quickstart.sh up       build the module if needed, start a target,
#                                      create hhc0 over files, export it over
#                                      NVMe-oF/TCP on 127.0.0.1, run a verified
#                                      write load with flushes, print hhc stats
#                                      and how to reach it; the target stays up
#   scripts/hhc-quickstart.sh status   is it up; its HHC bdevs
#   scripts/hhc-quickstart.sh down     stop the target, remove the images and logs
#
# Environment:
#   SPDK_DIR          SPDK install prefix (default /opt/spdk); scripts/build-spdk.sh makes one
#   HHC_QS_DIR        scratch directory: images, socket, logs (default /tmp/hhc-quickstart)
#   HHC_QS_PORT       NVMe-oF/TCP port on 127.0.0.1 (default 4420)
#   HHC_QS_MEM_MB     target memory without hugepages, MiB (default 2048)
#   HHC_QS_BUILD      auto (default: build when an artifact is missing or older
#                     than the sources), always, never
#   FIO               fio built with SPDK's plugin (default: fio on PATH,
#                     /opt/fio/fio, /opt/src/fio/fio)
#   CARGO_TARGET_DIR  where cargo and spdk-glue/Makefile put the artifacts
#   HHC_QS_SIMULATE   1 (default): where SPDK is not installed at all, `up` says
#                     what to install and runs the built-in simulator instead; 0: it
#                     only says what to install and fails
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
SPDK_DIR=${SPDK_DIR:-/opt/spdk}
QS_DIR=${HHC_QS_DIR:-/tmp/hhc-quickstart}
QS_PORT=${HHC_QS_PORT:-4420}
QS_MEM_MB=${HHC_QS_MEM_MB:-2048}
QS_BUILD=${HHC_QS_BUILD:-auto}
TARGET_DIR=${CARGO_TARGET_DIR:-$REPO/target}
OUT=$TARGET_DIR/spdk
TGT=$OUT/hhc_tgt
HHC=$TARGET_DIR/release/hhc
SOCK=$QS_DIR/rpc.sock
PIDFILE=$QS_DIR/hhc_tgt.pid
TGT_LOG=$QS_DIR/hhc_tgt.log
NQN=nqn.2016-06.io.spdk:hhc0
# shellcheck source=tests/spdk/env.sh
. "$REPO/tests/spdk/env.sh"

say() { echo "hhc-quickstart: $*"; }
die() { echo "hhc-quickstart: $*" >&2; exit 1; }

# What the quickstart needs from the machine; prints each missing piece with
# how to get it and fails if any is missing. Nothing is started or built.
check_prerequisites() {
    local missing=()
    if [ ! -e "$SPDK_DIR/include/spdk/bdev_module.h" ] || ! ls "$SPDK_DIR"/lib/libspdk_bdev.so* >/dev/null 2>&1; then
        missing+=("SPDK v25.09 with shared libraries under SPDK_DIR=$SPDK_DIR (no include/spdk/bdev_module.h or lib/libspdk_bdev.so).
    Build and install it (about 20 minutes on 2 cores; needs root for the build dependencies):
        scripts/build-spdk.sh --prefix $SPDK_DIR                 # clones SPDK v25.09 and fio-3.42
        scripts/build-spdk.sh --prefix $SPDK_DIR --src DIR       # from an SPDK v25.09 source tree you have
    or point SPDK_DIR at an install you have: SPDK_DIR=/path/to/prefix $0 up")
    else
        spdk_find_rpc >/dev/null 2>&1 ||
            missing+=("SPDK's RPC client under $SPDK_DIR (bin/spdk-rpc or scripts/rpc.py): reinstall SPDK with scripts/build-spdk.sh")
        [ -n "${SPDK_PY_DIR:-}" ] ||
            missing+=("SPDK's python package (spdk/rpc/client.py) under $SPDK_DIR: reinstall SPDK with scripts/build-spdk.sh, or set SPDK_PYTHONPATH")
        [ -e "$SPDK_DIR/lib/fio/spdk_bdev" ] ||
            missing+=("SPDK's fio plugin $SPDK_DIR/lib/fio/spdk_bdev: SPDK must be configured --with-fio=<fio source> (scripts/build-spdk.sh does)")
    fi
    spdk_find_fio >/dev/null 2>&1 ||
        missing+=("fio built from the source tree SPDK's plugin was built against (set FIO=/path/to/fio; scripts/build-spdk.sh builds fio-3.42)")
    if [ "$QS_BUILD" != never ] || [ ! -x "$TGT" ]; then
        command -v cargo >/dev/null 2>&1 ||
            missing+=("cargo (Rust): install a toolchain with rustup, or apt-get install cargo")
        ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || [ -n "${LIBCLANG_PATH:-}" ] ||
            missing+=("libclang for bindgen: apt-get install libclang-dev")
        command -v make >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 ||
            missing+=("make and a C compiler: apt-get install build-essential pkg-config")
    fi
    command -v python3 >/dev/null 2>&1 || missing+=("python3: apt-get install python3")
    [ "${#missing[@]}" -eq 0 ] && return 0
    echo "hhc-quickstart: cannot start: missing" >&2
    local m
    for m in "${missing[@]}"; do echo "  - $m" >&2; done
    echo "Nothing was built or started." >&2
    return 1
}

# cargo build --release (for `hhc stats`) and make -C spdk-glue (the module
# and hhc_tgt), when an artifact is missing or a source is newer.
build_if_needed() {
    local stale=
    case $QS_BUILD in
        never) [ -x "$TGT" ] && [ -x "$HHC" ] || die "HHC_QS_BUILD=never but $TGT or $HHC is missing"; return 0 ;;
        always) stale=1 ;;
        *)
            if [ ! -x "$TGT" ] || [ ! -x "$HHC" ] || [ ! -e "$OUT/libspdk_bdev_hhc.so" ] ||
                [ -n "$(find "$REPO/src" "$REPO/spdk-glue" "$REPO/build.rs" "$REPO/Cargo.toml" -newer "$TGT" -type f -print -quit)" ]; then
                stale=1
            fi ;;
    esac
    [ -n "$stale" ] || { say "module up to date: $TGT"; return 0; }
    say "building: cargo build --release, make -C spdk-glue SPDK_DIR=$SPDK_DIR (a first build takes several minutes)"
    (cd "$REPO" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet) || die "cargo build --release failed"
    make -s -C "$REPO/spdk-glue" SPDK_DIR="$SPDK_DIR" CARGO_TARGET_DIR="$TARGET_DIR" >"$QS_DIR/build.log" 2>&1 ||
        { tail -20 "$QS_DIR/build.log" >&2; die "make -C spdk-glue failed (whole log: $QS_DIR/build.log)"; }
}

tgt_pid() { # the running target's pid, if any
    local pid
    [ -f "$PIDFILE" ] || return 1
    pid=$(cat "$PIDFILE")
    [ -n "$pid" ] && [ -e "/proc/$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$SOCK" || return 1
    echo "$pid"
}

rpc() { timeout 60 $SPDK_RPC_CMD -s "$SOCK" -t 50 --plugin hhc_rpc_plugin "$@"; }

# The lines a user types to reach the target.
print_reach() {
    local rpc_line="PYTHONPATH=$REPO/json-rpc:$SPDK_PY_DIR $SPDK_RPC_CMD -s $SOCK --plugin hhc_rpc_plugin"
    cat <<EOF

hhc0 is up: policy hhc, backing $QS_DIR/back.img, cache $QS_DIR/ssd.img,
log mirrors $QS_DIR/hdd0.img and hdd1.img; target pid $(tgt_pid), log $TGT_LOG.

  RPC (with the HHC plugin):
    $rpc_line bdev_hhc_get_bdevs
    $rpc_line bdev_hhc_get_stats -b hhc0
  Stats, like casadm -P (-i 1 refreshes every second):
    $HHC stats --socket $SOCK --name hhc0
  From a Linux host (root; modprobe nvme-tcp first):
    nvme connect -t tcp -a 127.0.0.1 -s $QS_PORT -n $NQN
    nvme disconnect -n $NQN
  Stop everything this started and remove the images:
    $0 down
EOF
}

nvmf_client_json() {
    cat <<EOF
{"subsystems":[{"subsystem":"bdev","config":[
 {"method":"bdev_nvme_set_options","params":{"enable_flush":true}},
 {"method":"bdev_nvme_attach_controller","params":{"name":"qs","trtype":"tcp","adrfam":"ipv4",
  "traddr":"127.0.0.1","trsvcid":"$QS_PORT","subnqn":"$NQN"}},
 {"method":"bdev_wait_for_examine"}]}]}
EOF
}

# fio through SPDK's plugin over NVMe-oF: 16 MiB of 4 KiB random writes, a
# FLUSH every 16 and one at the end, then every block read back and checked.
verified_load() {
    nvmf_client_json >"$QS_DIR/nvmf-client.json"
    say "load: fio randwrite 16 MiB, fsync every 16 writes and at the end, crc32c verify, over NVMe-oF/TCP"
    if ! timeout -k 5 180 env LD_LIBRARY_PATH="$SPDK_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$FIO" \
        --name=quickstart --ioengine="$SPDK_DIR/lib/fio/spdk_bdev" --spdk_json_conf="$QS_DIR/nvmf-client.json" \
        --thread=1 --env_context="--no-huge --legacy-mem" --spdk_mem=1024 --filename=qsn1 --direct=1 \
        --rw=randwrite --bs=4k --iodepth=16 --size=16m --fsync=16 --end_fsync=1 \
        --verify=crc32c --verify_fatal=1 --do_verify=1 >"$QS_DIR/fio.log" 2>&1; then
        tail -20 "$QS_DIR/fio.log" >&2
        return 1
    fi
    grep -E "write: IOPS|read: IOPS|sync .*percentiles" "$QS_DIR/fio.log" | sed 's/^/    /'
    rpc bdev_hhc_get_stats -b hhc0 >"$QS_DIR/stats.json" || return 1
    python3 - "$QS_DIR/stats.json" <<'PY' || return 1
import json, sys
c = json.load(open(sys.argv[1]))["counters"]
assert c["writes"] >= 4096 and c["flushes"] > 0, "hhc0 saw %d writes, %d flushes" % (c["writes"], c["flushes"])
print("    hhc0 counted %d writes and %d flushes" % (c["writes"], c["flushes"]))
PY
    say "load verified: every block read back matched (crc32c)"
}

# Without SPDK at all the main job is the built-in simulator (the README's
# first command): said, then run, unless HHC_QS_SIMULATE=0.
spdk_absent() {
    [ ! -e "$SPDK_DIR/include/spdk/bdev_module.h" ]
}

up() {
    if ! check_prerequisites; then
        if spdk_absent && [ "${HHC_QS_SIMULATE:-1}" != 0 ] && command -v cargo >/dev/null 2>&1; then
            echo "hhc-quickstart: SPDK is not installed here, so no bdev can run: running the built-in simulator instead" >&2
            echo "hhc-quickstart: (cargo run --release -- simulate; HHC_QS_SIMULATE=0 skips it)" >&2
            cd "$REPO" && exec cargo run --release -- simulate
        fi
        exit 1
    fi
    mkdir -p "$QS_DIR"
    if pid=$(tgt_pid); then
        say "already up (pid $pid): $0 status, or $0 down first"
        print_reach
        return 0
    fi
    build_if_needed
    export PYTHONPATH=$REPO/json-rpc${PYTHONPATH:+:$PYTHONPATH}
    spdk_find_rpc
    spdk_find_fio
    # Fresh images, sparse: backing 256 MiB, cache 64 MiB, two log mirrors of 128 MiB.
    rm -f "$QS_DIR"/*.img "$SOCK"
    truncate -s 256M "$QS_DIR/back.img"
    truncate -s 64M "$QS_DIR/ssd.img"
    truncate -s 128M "$QS_DIR/hdd0.img" "$QS_DIR/hdd1.img"
    say "starting $TGT (--no-huge -s $QS_MEM_MB, socket $SOCK)"
    LD_LIBRARY_PATH="$SPDK_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" nohup "$TGT" --no-huge -s "$QS_MEM_MB" -m 0x1 \
        -r "$SOCK" --disable-cpumask-locks </dev/null >"$TGT_LOG" 2>&1 &
    echo $! >"$PIDFILE"
    echo "$QS_PORT" >"$QS_DIR/port"
    local i
    for i in $(seq 300); do
        [ -S "$SOCK" ] && rpc spdk_get_version >/dev/null 2>&1 && break
        kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -20 "$TGT_LOG" >&2; rm -f "$PIDFILE"; die "the target exited"; }
        sleep 0.2
    done
    rpc spdk_get_version >/dev/null 2>&1 || { tail -20 "$TGT_LOG" >&2; down; die "the target did not answer in 60 s"; }
    say "creating hhc0: bdev_aio_create x4, bdev_hhc_create --policy hhc, NVMe-oF/TCP 127.0.0.1:$QS_PORT"
    if ! { rpc bdev_aio_create "$QS_DIR/back.img" back 512 >/dev/null &&
        rpc bdev_aio_create "$QS_DIR/ssd.img" ssd 4096 >/dev/null &&
        rpc bdev_aio_create "$QS_DIR/hdd0.img" hdd0 512 >/dev/null &&
        rpc bdev_aio_create "$QS_DIR/hdd1.img" hdd1 512 >/dev/null &&
        rpc bdev_hhc_create -b hhc0 --backing back --cache ssd --logs hdd0 hdd1 --policy hhc >/dev/null &&
        rpc nvmf_create_transport -t TCP >/dev/null &&
        rpc nvmf_create_subsystem "$NQN" -a -s HHC0 >/dev/null &&
        rpc nvmf_subsystem_add_ns "$NQN" hhc0 >/dev/null &&
        rpc nvmf_subsystem_add_listener "$NQN" -t tcp -a 127.0.0.1 -s "$QS_PORT" >/dev/null; }; then
        tail -20 "$TGT_LOG" >&2
        down
        die "setting up hhc0 failed (above: the target's log)"
    fi
    if ! verified_load; then
        down
        die "the verified load failed (fio's log above)"
    fi
    echo
    "$HHC" stats --socket "$SOCK" --name hhc0 || say "hhc stats failed"
    print_reach
}

status() {
    local pid
    if ! pid=$(tgt_pid); then
        say "not running (no target of $QS_DIR)"
        return 3
    fi
    spdk_find_rpc >/dev/null 2>&1
    export PYTHONPATH=$REPO/json-rpc${PYTHONPATH:+:$PYTHONPATH}
    [ -f "$QS_DIR/port" ] && QS_PORT=$(cat "$QS_DIR/port")
    say "up: pid $pid, socket $SOCK, NVMe-oF/TCP 127.0.0.1:$QS_PORT ($NQN)"
    if [ -x "$HHC" ]; then
        "$HHC" stats --socket "$SOCK"
    else
        rpc bdev_hhc_get_bdevs
    fi
}

down() {
    local pid i
    if pid=$(tgt_pid); then
        say "stopping the target (pid $pid)"
        kill -TERM "$pid" 2>/dev/null
        for i in $(seq 150); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
        if [ -e "/proc/$pid" ]; then
            say "still running after 15 s: kill -9"
            kill -KILL "$pid" 2>/dev/null
            for i in $(seq 50); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
        fi
        rm -f "/dev/shm/hhc_tgt_trace.pid$pid"
    else
        say "no target of $QS_DIR running"
    fi
    [ -n "${pid:-}" ] && [ -e "/proc/$pid" ] && die "pid $pid did not stop"
    # Only what up made: HHC_QS_DIR may name a directory that holds more.
    rm -f "$QS_DIR"/back.img "$QS_DIR"/ssd.img "$QS_DIR"/hdd0.img "$QS_DIR"/hdd1.img "$SOCK" "$SOCK.lock" "$PIDFILE" \
        "$TGT_LOG" "$QS_DIR"/build.log "$QS_DIR"/fio.log "$QS_DIR"/nvmf-client.json "$QS_DIR"/stats.json "$QS_DIR"/port
    rmdir "$QS_DIR" 2>/dev/null
    say "down: nothing left running; the images in $QS_DIR removed"
}

case ${1:-} in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|status|down   (see the top of this file)" >&2; exit 2 ;;
esac
