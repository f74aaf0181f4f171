#!/usr/bin/env bash
# A one-node Ceph cluster (Debian's ceph-mon, ceph-osd, ceph-mgr,
# ceph-common) in a directory of its own, for HHC's tests and benchmarks
# over SPDK's bdev_rbd (docs/ceph.md). Command line or library (source it
# and call the ceph_* functions):
#
#   cluster.sh up [DIR]          mon, mgr, one BlueStore OSD, pool `hhc`; prints how long it took
#   cluster.sh down [DIR]        stops every daemon by PID, removes DIR (KEEP=1 keeps it)
#   cluster.sh status [DIR]      daemons and `ceph -s`
#   cluster.sh env [DIR]         the paths and addresses as shell assignments
#   cluster.sh image NAME SIZE   creates (or re-creates) image hhc/NAME, SIZE as `rbd create --size` (256M)
#   cluster.sh osd-kill | osd-start | osd-restart | osd-stop | osd-cont | mon-restart
#
# DIR is CEPH_DIR (default /tmp/hhc-ceph): ceph.conf, keyrings, PID files,
# logs, the mon's and the OSD's data; the OSD's block device is a sparse
# file beside its data directory (CEPH_OSD_BLOCK_GB, 4). Not on tmpfs:
# BlueStore opens its block file with O_DIRECT. Nothing goes to /etc/ceph.
# Ports: the mon on 127.0.0.1:CEPH_MON_PORT (6790, msgr v1), the OSD and
# the mgr in CEPH_PORT_MIN..CEPH_PORT_MAX (6900..6999).
#
# Daemons fork into the background without the open files of the shell
# that started them: `flock LOCK cluster.sh up` releases LOCK when `up`
# returns, the cluster running on.
set -u -o pipefail

CEPH_DIR=${CEPH_DIR:-/tmp/hhc-ceph}
CEPH_MON_PORT=${CEPH_MON_PORT:-6790}
CEPH_PORT_MIN=${CEPH_PORT_MIN:-6900}
CEPH_PORT_MAX=${CEPH_PORT_MAX:-6999}
CEPH_POOL=${CEPH_POOL:-hhc}
CEPH_OSD_BLOCK_GB=${CEPH_OSD_BLOCK_GB:-4}
# librados/librbd client timeouts (s) written into client.conf, for SPDK's
# bdev_rbd: an OSD that stops answering fails its I/O after this, not never.
CEPH_CLIENT_OP_TIMEOUT=${CEPH_CLIENT_OP_TIMEOUT:-5}
CEPH_START_TIMEOUT=${CEPH_START_TIMEOUT:-60}
# Images with layering only: with exclusive-lock a second client (a check
# reading the image, a host restarted after kill -9) must first take the
# lock from the old owner.
CEPH_IMAGE_FEATURES=${CEPH_IMAGE_FEATURES:-layering}

ceph_paths() {
    CEPH_CONF=$CEPH_DIR/ceph.conf
    CEPH_CLIENT_CONF=$CEPH_DIR/client.conf
    CEPH_KEYRING=$CEPH_DIR/client.admin.keyring
    CEPH_MON_ADDR=127.0.0.1:$CEPH_MON_PORT
    CEPH_OSD_BLOCK=$CEPH_DIR/osd.0.block
}
ceph_paths

ceph_log() { echo "[ceph] $*" >&2; }
ceph_loud() {
    local line
    echo "############################################################" >&2
    for line in "$@"; do echo "### $line" >&2; done
    echo "############################################################" >&2
}

# What the cluster needs: the daemons and tools of Debian's packages.
ceph_available() {
    local b
    for b in ceph-mon ceph-osd ceph-mgr ceph ceph-authtool monmaptool rbd uuidgen; do
        command -v "$b" >/dev/null 2>&1 || { CEPH_MISSING=$b; return 1; }
    done
}

# The ceph CLI against this cluster; it is Python and loads the rados
# bindings only under the system python3 (its shebang), so PATH's python3
# does not matter. Bounded: a command never waits for a mon forever.
ceph_cmd() { timeout 60 ceph -c "$CEPH_CONF" --connect-timeout 20 "$@"; }
rbd_cmd() { timeout 120 rbd -c "$CEPH_CONF" "$@"; }

ceph_write_conf() {
    cat >"$CEPH_CONF" <<EOF
[global]
fsid = $1
mon host = [v1:$CEPH_MON_ADDR]
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr2 = false
ms bind port min = $CEPH_PORT_MIN
ms bind port max = $CEPH_PORT_MAX
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
run dir = $CEPH_DIR/run
pid file = $CEPH_DIR/run/\$name.pid
admin socket = $CEPH_DIR/run/\$name.asok
log file = $CEPH_DIR/log/\$name.log
crash dir = $CEPH_DIR/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
paxos propose interval = 0.05
paxos min wait = 0.01
# A PG's read lease is 0.8 x this grace (16 s by default). On a one-OSD
# pool a PG whose lease runs out while the OSD is stopped stays laggy, its
# client ops parked, until the OSD's next interval (Ceph 16; see
# ceph/ceph-container#1682): a drill's 15 s SIGSTOP sometimes wedged it.
# With one OSD no peer acts on the grace.
osd heartbeat grace = 60

[mon]
mon data = $CEPH_DIR/mon.a
keyring = $CEPH_DIR/mon.keyring

[mgr]
mgr data = $CEPH_DIR/mgr.x
keyring = $CEPH_DIR/mgr.x/keyring

[osd]
osd data = $CEPH_DIR/osd.\$id
keyring = $CEPH_DIR/osd.\$id/keyring
osd objectstore = bluestore
bluestore block path = $CEPH_OSD_BLOCK
bluestore fsck on mkfs = false
bluestore fsck on mount = false
osd op num shards = 2
bdev aio poll ms = 50
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728

[client]
keyring = $CEPH_KEYRING
EOF
    # For clients that must not wait forever (SPDK's bdev_rbd): ceph.conf's
    # cluster with the op timeouts.
    {
        sed -n '/^\[global\]/,/^$/p' "$CEPH_CONF"
        echo "[client]"
        echo "keyring = $CEPH_KEYRING"
        echo "rados osd op timeout = $CEPH_CLIENT_OP_TIMEOUT"
        echo "rados mon op timeout = $CEPH_CLIENT_OP_TIMEOUT"
        echo "client mount timeout = $((CEPH_CLIENT_OP_TIMEOUT * 3))"
        echo "log file = $CEPH_DIR/log/\$name.\$pid.log"
        echo "admin socket ="
    } >"$CEPH_CLIENT_CONF"
}

ceph_pid() { cat "$CEPH_DIR/run/$1.pid" 2>/dev/null; }

# Running and not a zombie.
ceph_running() { # daemon (mon.a, mgr.x, osd.0)
    local pid state
    pid=$(ceph_pid "$1") && [ -n "$pid" ] && [ -e "/proc/$pid" ] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
    [ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "ceph-"
}

# Starts a daemon (it forks; the PID file is its own) and waits for its
# PID file.
ceph_spawn() { # daemon binary id
    rm -f "$CEPH_DIR/run/$1.pid"
    # Without the files this shell has open beyond stdio: a daemon that
    # kept the descriptor of `flock LOCK cluster.sh up` would hold LOCK
    # for as long as the cluster runs.
    if ! (
        for fd in /proc/"$BASHPID"/fd/*; do
            fd=${fd##*/}
            [ "$fd" -le 2 ] || eval "exec $fd>&-"
        done
        exec "$2" -c "$CEPH_CONF" -i "$3" </dev/null >>"$CEPH_DIR/log/$1.out" 2>&1
    ); then
        ceph_log "$2 -i $3 failed"
        tail -5 "$CEPH_DIR/log/$1.out" >&2
        return 1
    fi
    for _ in $(seq 100); do ceph_running "$1" && return 0; sleep 0.1; done
    ceph_log "$1: no running process after 10 s"
    tail -5 "$CEPH_DIR/log/$1.log" >&2
    return 1
}

ceph_stop_daemon() { # daemon [signal]: TERM waits 30 s, then KILL
    local pid sig=${2:-TERM}
    pid=$(ceph_pid "$1")
    if [ -z "$pid" ] || ! ceph_running "$1"; then rm -f "$CEPH_DIR/run/$1.pid"; return 0; fi
    kill -CONT "$pid" 2>/dev/null
    kill -"$sig" "$pid" 2>/dev/null
    for _ in $(seq 300); do ceph_running "$1" || break; sleep 0.1; done
    if ceph_running "$1"; then
        ceph_log "$1 (pid $pid) still running 30 s after SIG$sig: KILL"
        kill -KILL "$pid" 2>/dev/null
        for _ in $(seq 100); do ceph_running "$1" || break; sleep 0.1; done
    fi
    rm -f "$CEPH_DIR/run/$1.pid"
}

# Waits until a Python expression over `s` (ceph -s -f json) is true.
ceph_wait_status() { # expression timeout-s what
    local deadline=$((SECONDS + $2))
    while [ $SECONDS -lt $deadline ]; do
        if ceph_cmd -s -f json 2>/dev/null | /usr/bin/python3 -c "import json, sys
s = json.load(sys.stdin)
sys.exit(0 if ($1) else 1)" 2>/dev/null; then
            return 0
        fi
        sleep 0.2
    done
    ceph_log "timed out after $2 s waiting for $3"
    ceph_cmd -s >&2
    return 1
}

ceph_wait_osd_up() { # timeout-s
    ceph_wait_status 's["osdmap"]["num_up_osds"] == 1 and s["osdmap"]["num_in_osds"] == 1' "$1" "osd.0 up"
}

# Every PG active+clean (I/O to the pool goes through).
ceph_wait_clean() { # timeout-s
    ceph_wait_status 's["pgmap"]["num_pgs"] > 0 and sum(x["count"] for x in s["pgmap"].get("pgs_by_state", []) if x["state_name"] == "active+clean") == s["pgmap"]["num_pgs"]' \
        "$1" "every PG active+clean"
}

# The cluster serves: every PG active+clean (not laggy: a PG whose read
# lease ran out parks every op) and an object written and read back, each
# within the timeout (a stopped OSD still shows its PGs active+clean).
ceph_serving() { # timeout-s
    local probe=$CEPH_DIR/run/probe
    ceph_wait_clean "$1" || return 1
    date +%s%N >"$probe"
    timeout "$1" rados -c "$CEPH_CONF" -p "$CEPH_POOL" put hhc-probe "$probe" &&
        timeout "$1" rados -c "$CEPH_CONF" -p "$CEPH_POOL" get hhc-probe "$probe.back" && cmp -s "$probe" "$probe.back" ||
        { ceph_log "pool $CEPH_POOL: an object could not be written and read back within $1 s"; return 1; }
}

ceph_up() {
    local t0 fsid osd_uuid osd_key id
    ceph_available || { ceph_log "missing $CEPH_MISSING (apt-get install ceph-mon ceph-osd ceph-mgr ceph-common)"; return 1; }
    if ceph_running mon.a || ceph_running osd.0 || ceph_running mgr.x; then
        ceph_log "a cluster is running in $CEPH_DIR already (down first)"
        return 1
    fi
    t0=$(date +%s%N)
    rm -rf "$CEPH_DIR"
    mkdir -p "$CEPH_DIR"/{run,log,crash,mon.a,mgr.x,osd.0} || return 1
    fsid=$(uuidgen)
    ceph_write_conf "$fsid"
    # Keys: mon., client.admin (imported into the mon's keyring), mgr.x.
    if ! { ceph-authtool --create-keyring "$CEPH_DIR/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null &&
        ceph-authtool --create-keyring "$CEPH_KEYRING" --gen-key -n client.admin --cap mon 'allow *' \
            --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null &&
        ceph-authtool --create-keyring "$CEPH_DIR/mgr.x/keyring" --gen-key -n mgr.x --cap mon 'allow profile mgr' \
            --cap osd 'allow *' --cap mds 'allow *' >/dev/null &&
        ceph-authtool "$CEPH_DIR/mon.keyring" --import-keyring "$CEPH_KEYRING" >/dev/null &&
        ceph-authtool "$CEPH_DIR/mon.keyring" --import-keyring "$CEPH_DIR/mgr.x/keyring" >/dev/null &&
        monmaptool --create --fsid "$fsid" --addv a "[v1:$CEPH_MON_ADDR]" "$CEPH_DIR/monmap" >/dev/null &&
        ceph-mon -c "$CEPH_CONF" --mkfs -i a --monmap "$CEPH_DIR/monmap" --keyring "$CEPH_DIR/mon.keyring" \
            >>"$CEPH_DIR/log/mon.a.out" 2>&1; }; then
        ceph_log "creating the mon failed"
        tail -5 "$CEPH_DIR/log/mon.a.out" >&2
        return 1
    fi
    ceph_spawn mon.a ceph-mon a && ceph_spawn mgr.x ceph-mgr x || return 1
    # The OSD: its key given to `osd new`, BlueStore on a sparse file
    # outside its data directory.
    osd_uuid=$(uuidgen)
    osd_key=$(ceph-authtool --gen-print-key)
    truncate -s "${CEPH_OSD_BLOCK_GB}G" "$CEPH_OSD_BLOCK" || return 1
    id=$(echo "{\"cephx_secret\": \"$osd_key\"}" | ceph_cmd osd new "$osd_uuid" -i -)
    if [ "$id" != 0 ]; then ceph_log "ceph osd new failed: ${id:-no answer}"; return 1; fi
    if ! ceph-osd -c "$CEPH_CONF" -i 0 --mkfs --key "$osd_key" --osd-uuid "$osd_uuid" >>"$CEPH_DIR/log/osd.0.out" 2>&1; then
        ceph_log "ceph-osd --mkfs failed"
        tail -5 "$CEPH_DIR/log/osd.0.out" >&2
        return 1
    fi
    printf '[osd.0]\n\tkey = %s\n' "$osd_key" >"$CEPH_DIR/osd.0/keyring"
    ceph_spawn osd.0 ceph-osd 0 && ceph_wait_osd_up "$CEPH_START_TIMEOUT" || return 1
    if ! { ceph_cmd osd pool create "$CEPH_POOL" 8 8 >/dev/null 2>&1 &&
        ceph_cmd osd pool application enable "$CEPH_POOL" rbd >/dev/null 2>&1 && rbd_cmd pool init "$CEPH_POOL"; }; then
        ceph_log "creating pool $CEPH_POOL failed"
        return 1
    fi
    ceph_wait_clean "$CEPH_START_TIMEOUT" && ceph_wait_status 's["health"]["status"] == "HEALTH_OK"' "$CEPH_START_TIMEOUT" HEALTH_OK || return 1
    CEPH_UP_MS=$((($(date +%s%N) - t0) / 1000000))
    ceph_log "cluster up in $((CEPH_UP_MS / 1000)).$((CEPH_UP_MS % 1000 / 100)) s: HEALTH_OK, pool $CEPH_POOL, mon $CEPH_MON_ADDR, CEPH_DIR=$CEPH_DIR"
}

ceph_down() {
    local d
    for d in osd.0 mgr.x mon.a; do ceph_stop_daemon "$d"; done
    if [ -n "${KEEP:-}" ]; then
        ceph_log "cluster down; kept $CEPH_DIR"
    elif [ -d "$CEPH_DIR" ]; then
        rm -rf "$CEPH_DIR"
        ceph_log "cluster down; removed $CEPH_DIR"
    fi
}

ceph_status() {
    local d rc=0
    echo "CEPH_DIR=$CEPH_DIR"
    for d in mon.a mgr.x osd.0; do
        if ceph_running "$d"; then echo "$d: running, pid $(ceph_pid "$d")"; else echo "$d: not running"; rc=1; fi
    done
    ceph_running mon.a && ceph_cmd -s
    return $rc
}

ceph_env() {
    local v
    for v in CEPH_DIR CEPH_CONF CEPH_CLIENT_CONF CEPH_KEYRING CEPH_MON_ADDR CEPH_POOL CEPH_OSD_BLOCK; do
        printf '%s=%q\n' "$v" "${!v}"
    done
}

# The `config` of a bdev_rbd_create (rados_conf_set keys and values) that
# reaches this cluster as client.admin with the client op timeouts: a
# bdev made so comes back from save_config (one made over
# bdev_rbd_register_cluster does not: SPDK saves neither the cluster nor
# the bdev's cluster_name).
ceph_rbd_config_json() {
    printf '{"mon_host":"v1:%s","keyring":"%s","rados_osd_op_timeout":"%s","rados_mon_op_timeout":"%s","client_mount_timeout":"%s"}' \
        "$CEPH_MON_ADDR" "$CEPH_KEYRING" "$CEPH_CLIENT_OP_TIMEOUT" "$CEPH_CLIENT_OP_TIMEOUT" $((CEPH_CLIENT_OP_TIMEOUT * 3))
}

ceph_image() { # name size
    rbd_cmd rm "$CEPH_POOL/$1" >/dev/null 2>&1
    rbd_cmd create "$CEPH_POOL/$1" --size "$2" --image-feature "$CEPH_IMAGE_FEATURES"
}

# ---- faults, for drills ----

ceph_osd_kill() { ceph_stop_daemon osd.0 KILL; }
ceph_osd_start() { ceph_spawn osd.0 ceph-osd 0 && ceph_wait_osd_up "$CEPH_START_TIMEOUT" && ceph_wait_clean "$CEPH_START_TIMEOUT"; }
ceph_osd_restart() { ceph_osd_kill && ceph_osd_start; }
ceph_osd_stop() { local p; p=$(ceph_pid osd.0) && [ -n "$p" ] && kill -STOP "$p"; }
ceph_osd_cont() { local p; p=$(ceph_pid osd.0) && [ -n "$p" ] && kill -CONT "$p"; }
ceph_mon_restart() {
    ceph_stop_daemon mon.a && ceph_spawn mon.a ceph-mon a && ceph_wait_osd_up "$CEPH_START_TIMEOUT" && ceph_wait_clean "$CEPH_START_TIMEOUT"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    cmd=${1:-}
    [ $# -gt 0 ] && shift
    case $cmd in
        up | down | status | env)
            [ $# -eq 0 ] || { CEPH_DIR=$1; ceph_paths; } ;;
    esac
    case $cmd in
        up) ceph_up || { KEEP=1 ceph_down; ceph_log "(the failed cluster's files are kept in $CEPH_DIR)"; exit 1; } ;;
        down) ceph_down ;;
        status) ceph_status ;;
        env) ceph_env ;;
        image) [ $# -eq 2 ] || { echo "usage: cluster.sh image NAME SIZE" >&2; exit 2; }; ceph_image "$1" "$2" ;;
        osd-kill) ceph_osd_kill ;;
        osd-start) ceph_osd_start ;;
        osd-restart) ceph_osd_restart ;;
        osd-stop) ceph_osd_stop ;;
        osd-cont) ceph_osd_cont ;;
        mon-restart) ceph_mon_restart ;;
        *)
            sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
            [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ]
            ;;
    esac
fi
