# shellcheck shell=bash
# The paper's topology on one machine (docs/spdk.md, "Topology rig"), as a
# library: source it, then call rig_up / rig_down or the pieces below.
# tests/spdk/rig.sh is its command line; tests/spdk/run.sh's rig_smoke, the
# fault drills and the benchmarks use it.
#
#   storage server  of kind RIG_SERVER ("the storage server" below): spdk
#                   (default) hhc_tgt --no-huge: aio file -> make_raid (an
#                   HDD RAID5 model) -> iSCSI target node; tgt: Debian's
#                   tgtd with a file-backed LUN; both on
#                   127.0.0.1:RIG_ISCSI_PORT; ceph: an RBD image of the
#                   one-node cluster of tests/ceph/cluster.sh; tgt-rbd:
#                   tgtd with such an image as its LUN
#   host            hhc_tgt (hugepages when it can have them): bdev_iscsi
#                   or bdev_rbd (the backing, server_backing_create), aio -> make_ssd (cache), aio -> make_hdd
#                   (1 or 2 log mirrors), hhc0 = bdev_hhc_create; exported
#                   over NVMe-oF/TCP on 127.0.0.1:RIG_NVMF_PORT and as the
#                   vhost-blk controller RIG_VHOST_SOCK
#   peer            (RIG_PEER=1) hhc_tgt --no-huge: aio -> make_hdd, exported
#                   over NVMe-oF/TCP on 127.0.0.1:RIG_PEER_PORT; the host
#                   attaches it as one more log mirror (rig_peer.sh)
#   clients         nvmf_fio / nvmf_bdevperf (SPDK's NVMe-oF initiator,
#                   --no-huge) and vhost_fio / vhost_bdevperf (virtio-user,
#                   hugepages, single-file segments), one process per call
#
# Everything lives in RIG_WORK (default /dev/shm/hhc-rig, or /tmp/hhc-rig): images, logs, RPC
# sockets, the vhost socket, PID files and rig.env (the settings `up` used,
# read back by later invocations so `status`/`down` find the same rig). Set
# RIG_* before sourcing, or call rig_paths after changing RIG_WORK.
#
# Processes are started in the background and outlive the shell that
# started them; they inherit its open files, so under
# `flock LOCK bash rig.sh up` the lock is held until `rig.sh down` (run
# WITHOUT flock then, or it waits for itself) has stopped them. They are
# only ever stopped by the PID in their PID file.

RIG_REPO=${RIG_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SPDK_DIR=${SPDK_DIR:-/opt/spdk}
# shellcheck source=tests/spdk/env.sh
. "$RIG_REPO/tests/spdk/env.sh"
[ -n "${FIO:-}" ] || spdk_find_fio
export PYTHONPATH=$RIG_REPO/json-rpc${PYTHONPATH:+:$PYTHONPATH}
if [ -z "${SPDK_RPC_CMD:-}" ] || [ -z "${SPDK_PY_DIR:-}" ]; then spdk_find_rpc; fi
case ":${LD_LIBRARY_PATH:-}:" in
    *":$SPDK_DIR/lib:"*) ;;
    *) export LD_LIBRARY_PATH=$SPDK_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
esac

RIG_OUT=${RIG_OUT:-${OUT:-${CARGO_TARGET_DIR:-$RIG_REPO/target}/spdk}}
RIG_TGT=${RIG_TGT:-$RIG_OUT/hhc_tgt}
# The test-only device-model bdevs (make_hdd, make_raid, the SSD model) are a
# module of their own that every rig app preloads (docs/spdk.md).
RIG_MODEL_MODULE=${RIG_MODEL_MODULE:-$RIG_OUT/libspdk_bdev_hhc_model.so}
RIG_BDEVPERF=${RIG_BDEVPERF:-$SPDK_DIR/bin/bdevperf}
RIG_FIO_PLUGIN=${RIG_FIO_PLUGIN:-$SPDK_DIR/lib/fio/spdk_bdev}
# On tmpfs where there is one: the aio files under the device models then
# cost no time of their own (an aio FLUSH of a file on a disk is an fsync),
# and they survive a kill -9 of the targets all the same.
if [ -z "${RIG_WORK:-}" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then RIG_WORK=/dev/shm/hhc-rig; else RIG_WORK=/tmp/hhc-rig; fi
fi

# Names (the drills refer to them).
RIG_HHC=hhc0                                # the HHC bdev on the host
RIG_BACKING=iscsi0                          # its backing: the bdev_iscsi bdev
RIG_CACHE=ssd0                              # its cache: make_ssd over aio ssd0_base
# shellcheck disable=SC2034 # (the server kinds' and the drills')
RIG_RAID=raid0                              # the server's RAID (kind spdk) or LUN (kind tgt)
RIG_TARGET_IQN=iqn.2016-06.io.spdk:raid0    # the server's iSCSI target node
RIG_INITIATOR_IQN=iqn.2016-06.io.spdk:hhc-host
RIG_NQN=nqn.2016-06.io.spdk:hhc
RIG_NVMF_BDEV=remoten1                      # hhc0 as the NVMe-oF client sees it
RIG_VHOST_CTRLR=vhost.0                     # the vhost-blk controller (socket name)
RIG_VHOST_BDEV=vblk0                        # hhc0 as the virtio-user client sees it

# Settings with their defaults; rig.env of a running rig overrides them.
rig_defaults() {
    RIG_SERVER=${RIG_SERVER:-spdk}          # the storage server's kind: spdk, tgt, ceph or tgt-rbd
    RIG_ISCSI_PORT=${RIG_ISCSI_PORT:-3260}
    RIG_NVMF_PORT=${RIG_NVMF_PORT:-4420}
    RIG_POLICY=${RIG_POLICY:-hhc}
    RIG_HDDS=${RIG_HDDS:-1}                 # log mirrors on the host, 1 or 2 (0 with RIG_PEER=1: the peer's alone)
    RIG_PEER=${RIG_PEER:-0}                 # 1: one more mirror, on the peer host (rig_peer.sh)
    RIG_PEER_PORT=${RIG_PEER_PORT:-4421}
    RIG_PEER_MASK=${RIG_PEER_MASK:-0x1}
    RIG_PEER_MEM_MB=${RIG_PEER_MEM_MB:-2048}       # --no-huge (the iSCSI subsystem needs 2048 with OCF built in)
    RIG_PEER_NVME_OPTS=${RIG_PEER_NVME_OPTS:-}     # more bdev_nvme_set_options params of the host, JSON members
    RIG_EXPORTS=${RIG_EXPORTS:-"vhost nvmf"}    # the host's exports of hhc0
    RIG_RAID_MB=${RIG_RAID_MB:-256}         # the server's RAID = hhc0's size
    RIG_RAID_LEVEL=${RIG_RAID_LEVEL:-raid5-model}   # or raid1: SPDK's raid1 over two HDD models (server_make_raid)
    RIG_SSD_MB=${RIG_SSD_MB:-64}
    RIG_HDD_MB=${RIG_HDD_MB:-256}
    RIG_SEGMENT_SIZE=${RIG_SEGMENT_SIZE:-262144}
    RIG_HHC_ARGS=${RIG_HHC_ARGS:-}          # more bdev_hhc_create params, JSON members: "dirty_threshold":50
    # More bdev_nvme_set_options params of the NVMe-oF client, JSON members:
    # "bdev_retry_count":0 lets errors through (the default 3 retries them).
    RIG_NVME_OPTS=${RIG_NVME_OPTS:-}
    # bdev_iscsi's command timeout in s (bdev_iscsi_set_options; empty: SPDK's 30, 0: none).
    RIG_ISCSI_TIMEOUT=${RIG_ISCSI_TIMEOUT:-}
    # The server's iSCSI max_r2t_per_connection (empty: SPDK's 4). A write
    # beyond its immediate data holds an R2T until the RAID completes it,
    # so this caps the write-backs the RAID sees at once; the simulator's
    # RAID takes the engine's whole depth (docs/results.md, "The RAID's
    # queue behind iSCSI").
    RIG_ISCSI_MAX_R2T=${RIG_ISCSI_MAX_R2T:-}
    RIG_SERVER_MASK=${RIG_SERVER_MASK:-0x1}
    RIG_HOST_MASK=${RIG_HOST_MASK:-0x2}
    RIG_CLIENT_MASK=${RIG_CLIENT_MASK:-0x1}
    RIG_SERVER_MEM_MB=${RIG_SERVER_MEM_MB:-2048}   # --no-huge
    RIG_HOST_MEM_MB=${RIG_HOST_MEM_MB:-2048}       # hugepages (or --no-huge without them)
    RIG_CLIENT_MEM_MB=${RIG_CLIENT_MEM_MB:-1024}   # virtio-user client, hugepages: all it will ever use (below: fails)
    RIG_FIO_MEM_MB=${RIG_FIO_MEM_MB:-1024}         # NVMe-oF client, --no-huge
    RIG_HUGEPAGES=${RIG_HUGEPAGES:-2048}           # 2 MiB pages to ask for as root
    RIG_START_TIMEOUT=${RIG_START_TIMEOUT:-60}     # s for an app's RPC socket
    RIG_FIO_TIMEOUT=${RIG_FIO_TIMEOUT:-300}
    # Model profile keys (docs/simulate.md) as JSON objects, for bdev_hhc_model_create.
    RIG_HDD_PARAMS=${RIG_HDD_PARAMS:-"{}"}
    RIG_SSD_PARAMS=${RIG_SSD_PARAMS:-"{}"}
    # The RAID5 model without a link of its own: the rig's iSCSI is real.
    RIG_RAID_PARAMS=${RIG_RAID_PARAMS:-'{"link_mb_s":0,"request_latency_us":0}'}
    # bdev_delay stand-ins when the model is missing: "avg_read p99_read
    # avg_write p99_write" in us.
    RIG_DELAY_HDD=${RIG_DELAY_HDD:-"8000 15000 1000 4000"}
    RIG_DELAY_SSD=${RIG_DELAY_SSD:-"80 200 50 150"}
    RIG_DELAY_RAID=${RIG_DELAY_RAID:-"8500 15000 17000 30000"}
}

# Paths in RIG_WORK; rig.env (if any) first.
rig_paths() {
    RIG_ENV=$RIG_WORK/rig.env
    # The settings of a rig that is up (a PID file) win over the caller's.
    if [ -f "$RIG_ENV" ] && { [ -e "$RIG_WORK/server.pid" ] || [ -e "$RIG_WORK/host.pid" ]; }; then
        # shellcheck disable=SC1090
        . "$RIG_ENV"
    fi
    rig_defaults
    RIG_SERVER_SOCK=$RIG_WORK/server.sock
    RIG_HOST_SOCK=$RIG_WORK/host.sock
    RIG_CLIENT_SOCK=$RIG_WORK/client.sock   # bdevperf clients' RPC socket
    # shellcheck disable=SC2034 # (the server kinds')
    RIG_SERVER_LOG=$RIG_WORK/server.log
    RIG_HOST_LOG=$RIG_WORK/host.log
    RIG_PEER_SOCK=$RIG_WORK/peer.sock
    RIG_PEER_LOG=$RIG_WORK/peer.log
    RIG_VHOST_SOCK=$RIG_WORK/$RIG_VHOST_CTRLR
    RIG_NVMF_JSON=$RIG_WORK/nvmf.json
    RIG_VHOST_JSON=$RIG_WORK/vhost.json
    rig_server_load
    RIG_ISCSI_URL=iscsi://127.0.0.1:$RIG_ISCSI_PORT/$RIG_TARGET_IQN/$RIG_ISCSI_LUN
}

rig_log() { echo "[rig] $*" >&2; }
rig_loud() {
    local line
    echo "############################################################" >&2
    for line in "$@"; do echo "### $line" >&2; done
    echo "############################################################" >&2
}

# The rpc.py command line (with the HHC plugin) for one of the apps, for
# people and drills: rig_rpc host bdev_hhc_get_stats -b hhc0.
rig_rpc() { # server|host|SOCKET args...
    local sock=$1
    shift
    case $sock in server) sock=$RIG_SERVER_SOCK ;; host) sock=$RIG_HOST_SOCK ;; esac
    # shellcheck disable=SC2086
    timeout 60 $SPDK_RPC_CMD -s "$sock" -t 50 --plugin hhc_rpc_plugin "$@"
}

# Raw JSON-RPC calls over one connection to RIG_SOCK (which server_start and
# host_start set while they build their app): method params-json ...
rig_call() {
    timeout $((${RIG_CALL_TIMEOUT_S:-50} + 10)) python3 "$RIG_REPO/tests/spdk/rig_call.py" "${RIG_SOCK:?rig_call: RIG_SOCK unset}" "$@"
}

# ---- devices: the HHC model bdev module, or bdev_delay stand-ins ----

# Whether RIG_SOCK's app has bdev_hhc_model_create (asked once per socket).
rig_has_model() {
    local key=${RIG_SOCK//[^A-Za-z0-9]/_}
    local var=RIG_MODEL_$key
    if [ -z "${!var:-}" ]; then
        if rig_call rpc_get_methods '{}' 2>/dev/null | grep -q '"bdev_hhc_model_create"'; then
            printf -v "$var" yes
        else
            printf -v "$var" no
            rig_loud "bdev_hhc_model_create is not in rpc_get_methods of $RIG_SOCK:" \
                "FALLING BACK to bdev_delay stand-ins (unlimited parallelism, FLUSH not delayed)"
        fi
    fi
    [ "${!var}" = yes ]
}

rig_make_dev() { # model name base delay-latencies params-json
    local model=$1 name=$2 base=$3 params=$5 r rp w wp
    sed -i "/^$name /d" "$RIG_WORK/devices" 2>/dev/null
    if rig_has_model; then
        rig_call bdev_hhc_model_create "{\"name\":\"$name\",\"base_bdev_name\":\"$base\",\"model\":\"$model\",\"params\":$params}" >/dev/null &&
            echo "$name model $model $params" >>"$RIG_WORK/devices"
    else
        read -r r rp w wp <<<"$4"
        rig_log "$name: bdev_delay stand-in for model $model over $base (read $r/$rp us, write $w/$wp us avg/p99)"
        rig_call bdev_delay_create "{\"name\":\"$name\",\"base_bdev_name\":\"$base\",\"avg_read_latency\":$r,\"p99_read_latency\":$rp,\"avg_write_latency\":$w,\"p99_write_latency\":$wp}" >/dev/null &&
            echo "$name delay $model $4" >>"$RIG_WORK/devices"
    fi
}

make_hdd() { rig_make_dev hdd "$1" "$2" "$RIG_DELAY_HDD" "$RIG_HDD_PARAMS"; }
make_ssd() { rig_make_dev ssd "$1" "$2" "$RIG_DELAY_SSD" "$RIG_SSD_PARAMS"; }
make_raid() { rig_make_dev raid5 "$1" "$2" "$RIG_DELAY_RAID" "$RIG_RAID_PARAMS"; }

rig_aio() { # name file size-mb block-size: the file is made once, kept across restarts
    [ -e "$2" ] || truncate -s "$3M" "$2" || return 1
    rig_call bdev_aio_create "{\"name\":\"$1\",\"filename\":\"$2\",\"block_size\":$4}" >/dev/null
}

# ---- hugepages ----

# RIG_HUGE=1 when the host and the virtio-user client can have hugepages:
# as root, asks for RIG_HUGEPAGES pages and mounts hugetlbfs if needed.
rig_hugepages() {
    local need free
    need=$(((RIG_HOST_MEM_MB + RIG_CLIENT_MEM_MB) / 2 + 64))
    if [ -n "${RIG_NO_HUGE:-}" ]; then
        RIG_HUGE=0
        rig_loud "RIG_NO_HUGE is set: the host runs --no-huge and the vhost export and its client are SKIPPED"
        return 0
    fi
    if [ "$(id -u)" -eq 0 ]; then
        [ "$(cat /proc/sys/vm/nr_hugepages)" -ge "$RIG_HUGEPAGES" ] || echo "$RIG_HUGEPAGES" >/proc/sys/vm/nr_hugepages
        if ! grep -q '^[^ ]* /dev/hugepages hugetlbfs' /proc/mounts; then
            mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages
        fi
    fi
    free=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
    if [ "${free:-0}" -ge "$need" ] && grep -q ' hugetlbfs ' /proc/mounts && [ -w /dev/hugepages ]; then
        RIG_HUGE=1
        rig_log "hugepages: $free free of 2 MiB, need $need; the host runs on hugepages, vhost is on"
    else
        RIG_HUGE=0
        rig_loud "no hugepages (free ${free:-0}, need $need; $( [ "$(id -u)" -eq 0 ] || echo 'not root, ')see docs/spdk.md):" \
            "the host runs --no-huge and the vhost export and its client are SKIPPED"
    fi
}

# Hugepage files of an app that did not exit cleanly (kill -9) keep their
# pages; DPDK names them after the PID (spdk_pid<PID>...).
rig_huge_cleanup() { # pid
    local mnt
    while read -r mnt; do
        rm -f "$mnt"/spdk_pid"$1"map_* 2>/dev/null
    done < <(awk '$3 == "hugetlbfs" {print $2}' /proc/mounts)
}

# ---- processes ----

rig_pid() { cat "$RIG_WORK/$1.pid" 2>/dev/null; }

rig_running() { # name [program]: its PID is alive (not a zombie) and runs program (hhc_tgt)
    local pid state
    pid=$(rig_pid "$1") && [ -n "$pid" ] && [ -e "/proc/$pid" ] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
    [ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "${2:-hhc_tgt}"
}

rig_spawn() { # name log dir command...: in the background, PID in RIG_WORK/name.pid
    local name=$1 logf=$2 dir=$3
    shift 3
    echo "=== $(date -u +%FT%TZ) $*" >>"$logf"
    (cd "$dir" && exec "$@") </dev/null >>"$logf" 2>&1 &
    echo "$!" >"$RIG_WORK/$name.pid"
}

rig_wait_rpc() { # name socket log
    local t0 ms
    t0=$(date +%s%N)
    while [ $(($(date +%s%N) - t0)) -lt $((RIG_START_TIMEOUT * 1000000000)) ]; do
        if [ -S "$2" ] && RIG_SOCK=$2 timeout 10 python3 "$RIG_REPO/tests/spdk/rig_call.py" "$2" spdk_get_version '{}' >/dev/null 2>&1; then
            ms=$((($(date +%s%N) - t0) / 1000000))
            rig_log "$1 up after $((ms / 1000)).$((ms % 1000 / 100)) s (pid $(rig_pid "$1"))"
            return 0
        fi
        rig_running "$1" || { rig_log "$1 exited at start-up"; tail -20 "$3" >&2; return 1; }
        sleep 0.1
    done
    rig_log "$1: no RPC socket after $RIG_START_TIMEOUT s"
    tail -20 "$3" >&2
    return 1
}

rig_stop() { # name [signal] [program]: TERM waits up to 30 s for a clean exit, then KILL
    local name=$1 sig=${2:-TERM} prog=${3:-hhc_tgt} pid
    pid=$(rig_pid "$name")
    if [ -z "$pid" ] || ! rig_running "$name" "$prog"; then
        rm -f "$RIG_WORK/$name.pid"
        return 0
    fi
    kill -"$sig" "$pid" 2>/dev/null
    for _ in $(seq 300); do rig_running "$name" "$prog" || break; sleep 0.1; done
    if rig_running "$name" "$prog"; then
        rig_log "$name (pid $pid) still running after SIG$sig, 30 s: KILL"
        kill -KILL "$pid" 2>/dev/null
        for _ in $(seq 100); do rig_running "$name" "$prog" || break; sleep 0.1; done
    fi
    wait "$pid" 2>/dev/null
    rig_huge_cleanup "$pid"
    rm -f "$RIG_WORK/$name.pid"
    rig_log "$name (pid $pid) stopped (SIG$sig)"
}

# ---- the storage server ----

# RIG_SERVER picks the storage server's kind; tests/spdk/rig_server_KIND.sh
# (sourced by rig_paths) provides, for the rest of the rig and the drills:
#   server_check_tools     the kind's programs are there (else says what is missing, returns 1)
#   server_start           starts the server (if not running) and exports a
#                          backing of RIG_RAID_MB MiB; its data survives
#                          server_stop, server_kill and a new server_start
#   server_stop, server_kill      SIGTERM (clean), SIGKILL, by the PID file
#   server_freeze, server_thaw    SIGSTOP / SIGCONT: a hung server
#   server_running         whether the server's process is alive
#   server_describe        one line for rig_status: what the host connects to
#   server_backing_create NAME INITIATOR
#                          on the SPDK app of RIG_SOCK (the host), creates the
#                          bdev NAME over the server's export (the spdk, tgt
#                          and tgt-rbd kinds: rig_iscsi_backing_create,
#                          bdev_iscsi; ceph: bdev_rbd)
#   server_fio ARGS        fio on the backing's blocks without the host (the
#                          drills' verification; the host is down by then);
#                          ARGS as nvmf_fio's
# and may provide server_writes (the writes the server's backing has
# completed, for drill_server_hang; tgt, tgt-rbd) and set RIG_ISCSI_LUN (the LUN of RIG_ISCSI_URL), RIG_BACKING (the
# backing's bdev name) and RIG_SERVER_VARS (its settings, saved in rig.env).
RIG_SERVER_KINDS="spdk tgt ceph tgt-rbd"
rig_server_load() {
    [ "${RIG_SERVER_LOADED:-}" != "$RIG_SERVER" ] || return 0
    local f=$RIG_REPO/tests/spdk/rig_server_$RIG_SERVER.sh
    [ -f "$f" ] || { echo "[rig] RIG_SERVER=$RIG_SERVER: no $f (kinds: $RIG_SERVER_KINDS)" >&2; return 1; }
    RIG_ISCSI_LUN=0
    RIG_BACKING=iscsi0
    RIG_SERVER_VARS=
    # shellcheck source=/dev/null
    . "$f"
    RIG_SERVER_LOADED=$RIG_SERVER
}

# ---- an iSCSI backing (the host's side, for the spdk and tgt kinds) ----

# bdev_iscsi NAME over RIG_ISCSI_URL on RIG_SOCK's app.
rig_iscsi_backing_create() { # name initiator-iqn
    if [ -n "$RIG_ISCSI_TIMEOUT" ]; then
        rig_call bdev_iscsi_set_options "{\"timeout_sec\":$RIG_ISCSI_TIMEOUT}" >/dev/null || return 1
    fi
    rig_call bdev_iscsi_create "{\"name\":\"$1\",\"url\":\"$RIG_ISCSI_URL\",\"initiator_iqn\":\"$2\"}" >/dev/null
}

# fio (spdk_bdev plugin, --no-huge) through an iSCSI session of its own;
# defaults and ARGS as nvmf_fio.
rig_iscsi_fio() {
    cat >"$RIG_WORK/iscsi.json" <<JSON
{"subsystems":[{"subsystem":"bdev","config":[
 {"method":"bdev_iscsi_create","params":{"name":"check","url":"$RIG_ISCSI_URL","initiator_iqn":"$RIG_INITIATOR_IQN-check"}},
 {"method":"bdev_wait_for_examine"}]}]}
JSON
    timeout -k 5 "$RIG_FIO_TIMEOUT" "$FIO" --name=backing --ioengine="$RIG_FIO_PLUGIN" --spdk_json_conf="$RIG_WORK/iscsi.json" \
        --thread=1 --env_context="--no-huge --legacy-mem" --spdk_mem="$RIG_FIO_MEM_MB" --filename=check \
        --direct=1 --bs=4k --iodepth=16 --size=8m "$@"
}

# ---- the host ----

# Starts the host and (re-)creates its bdevs over the same files, so a
# restart after host_kill or host_stop finds hhc0 warm; examine may
# assemble hhc0 from the cache superblock as soon as its devices are all
# there, and the bdev_hhc_create that follows then only confirms it (and
# switches the policy if it differs). The server must be up.
host_start() { # [policy]
    local policy=${1:-$RIG_POLICY} logs i
    rig_running host && { rig_log "host already running (pid $(rig_pid host))"; return 0; }
    RIG_POLICY=$policy
    host_spawn || return 1
    local RIG_SOCK=$RIG_HOST_SOCK
    local mark
    mark=$(wc -l <"$RIG_HOST_LOG")
    # The cache first, then the logs, the backing last: examine of ssd0_base
    # (the aio file under the model) also finds the superblock; it must not
    # assemble hhc0 over ssd0_base before make_ssd has claimed that.
    rig_aio ssd0_base "$RIG_WORK/ssd0.img" "$RIG_SSD_MB" 4096 && make_ssd "$RIG_CACHE" ssd0_base || return 1
    logs=
    for i in $(seq 0 $((RIG_HDDS - 1))); do
        rig_aio "hdd${i}_base" "$RIG_WORK/hdd$i.img" "$RIG_HDD_MB" 512 && make_hdd "hdd$i" "hdd${i}_base" || return 1
        logs=$logs${logs:+,}\"hdd$i\"
    done
    if [ "$RIG_PEER" = 1 ]; then
        peer_nvme_options && peer_attach || return 1
        logs=$logs${logs:+,}\"$RIG_PEER_BDEV\"
    fi
    server_backing_create "$RIG_BACKING" "$RIG_INITIATOR_IQN" ||
        { rig_log "host: the backing $RIG_BACKING could not be created: $(server_describe) (is the server up?)"; return 1; }
    rig_call bdev_hhc_create "$(rig_hhc_params "$RIG_CACHE" "$logs" "$policy")" >/dev/null ||
        { rig_log "host: bdev_hhc_create failed"; return 1; }
    if tail -n +"$mark" "$RIG_HOST_LOG" | grep -q "examine: assembling HHC bdev '$RIG_HHC'"; then
        rig_log "host: $RIG_HHC assembled by examine from its cache superblock, confirmed by bdev_hhc_create"
    fi
    if tail -n +"$mark" "$RIG_HOST_LOG" | grep -q "warm start from cache bdev $RIG_CACHE"; then
        rig_log "host: $RIG_HHC warm (cache $RIG_CACHE), policy $policy"
    else
        rig_log "host: $RIG_HHC created (cache $RIG_CACHE formatted), policy $policy"
    fi
    host_export
}

# bdev_hhc_create's params for hhc0 over RIG_BACKING: LOGS is a JSON list's
# inside ("hdd0","peern1"); MORE, more keys ("takeover":true).
rig_hhc_params() { # cache logs policy [more]
    echo "{\"name\":\"$RIG_HHC\",\"backing\":\"$RIG_BACKING\",\"cache\":\"$1\",\"logs\":[$2],\"policy\":\"$3\",\"segment_size\":$RIG_SEGMENT_SIZE${4:+,$4}${RIG_HHC_ARGS:+,$RIG_HHC_ARGS}}"
}

# The host's hhc_tgt, no bdevs yet, its RPC socket up; rig.env saved.
host_spawn() {
    local mem
    rig_save_env
    if [ "${RIG_HUGE:-0}" = 1 ]; then mem=(-s "$RIG_HOST_MEM_MB"); else mem=(--no-huge -s "$RIG_HOST_MEM_MB"); fi
    rm -f "$RIG_HOST_SOCK" "$RIG_VHOST_SOCK"
    # In RIG_WORK: hhc_tgt puts vhost sockets in its working directory.
    rig_spawn host "$RIG_HOST_LOG" "$RIG_WORK" env LD_PRELOAD="$RIG_MODEL_MODULE" "$RIG_TGT" "${mem[@]}" -m "$RIG_HOST_MASK" -r "$RIG_HOST_SOCK" \
        --disable-cpumask-locks
    rig_wait_rpc host "$RIG_HOST_SOCK" "$RIG_HOST_LOG"
}

# vhost-blk when the host has hugepages, then NVMe-oF/TCP. In that order:
# the NVMe-oF target claims its namespace's bdev (exclusive_write), after
# which no one else can open hhc0 for writing; vhost-blk opens it without
# a claim, so it must be first. Both are then writers of hhc0: clients of
# the two exports at once must keep to disjoint LBA ranges.
host_export() {
    local RIG_SOCK=$RIG_HOST_SOCK
    if [[ " $RIG_EXPORTS " != *" vhost "* ]]; then
        rig_log "host: no vhost export (RIG_EXPORTS=$RIG_EXPORTS)"
    elif [ "${RIG_HUGE:-0}" = 1 ]; then
        rig_call vhost_create_blk_controller "{\"ctrlr\":\"$RIG_VHOST_CTRLR\",\"dev_name\":\"$RIG_HHC\",\"cpumask\":\"$RIG_HOST_MASK\"}" \
            >/dev/null || { rig_log "host: vhost export failed"; return 1; }
        rig_log "host: $RIG_HHC as vhost-blk $RIG_VHOST_SOCK"
    else
        rig_loud "vhost export of $RIG_HHC SKIPPED: no hugepages"
    fi
    [[ " $RIG_EXPORTS " == *" nvmf "* ]] || { rig_log "host: no NVMe-oF export (RIG_EXPORTS=$RIG_EXPORTS)"; return 0; }
    rig_nvmf_export "$RIG_NQN" "$RIG_HHC" "$RIG_NVMF_PORT" HHC0 "HHC rig" || { rig_log "host: NVMe-oF export failed"; return 1; }
    rig_log "host: $RIG_HHC on NVMe-oF/TCP 127.0.0.1:$RIG_NVMF_PORT $RIG_NQN"
}

# On the app of RIG_SOCK: bdev BDEV as the namespace of subsystem NQN over
# NVMe-oF/TCP on 127.0.0.1:PORT.
rig_nvmf_export() { # nqn bdev port serial model
    rig_call nvmf_create_transport '{"trtype":"TCP"}' >/dev/null && rig_nvmf_subsystem "$@"
}

# The same on an app whose TCP transport exists.
rig_nvmf_subsystem() { # nqn bdev port serial model
    rig_call nvmf_create_subsystem "{\"nqn\":\"$1\",\"allow_any_host\":true,\"serial_number\":\"$4\",\"model_number\":\"$5\"}" \
        nvmf_subsystem_add_ns "{\"nqn\":\"$1\",\"namespace\":{\"bdev_name\":\"$2\"}}" \
        nvmf_subsystem_add_listener "{\"nqn\":\"$1\",\"listen_address\":{\"trtype\":\"tcp\",\"adrfam\":\"ipv4\",\"traddr\":\"127.0.0.1\",\"trsvcid\":\"$3\"}}" \
        >/dev/null
}
host_stop() { rig_stop host TERM; }
host_kill() { rig_stop host KILL; }

# ---- clients ----

rig_client_json() {
    cat >"$RIG_NVMF_JSON" <<EOF
{"subsystems":[{"subsystem":"bdev","config":[
 {"method":"bdev_nvme_set_options","params":{"enable_flush":true${RIG_NVME_OPTS:+,$RIG_NVME_OPTS}}},
 {"method":"bdev_nvme_attach_controller","params":{"name":"remote","trtype":"tcp","adrfam":"ipv4",
  "traddr":"127.0.0.1","trsvcid":"$RIG_NVMF_PORT","subnqn":"$RIG_NQN"}},
 {"method":"bdev_wait_for_examine"}]}]}
EOF
    cat >"$RIG_VHOST_JSON" <<EOF
{"subsystems":[{"subsystem":"bdev","config":[
 {"method":"bdev_virtio_attach_controller","params":{"name":"$RIG_VHOST_BDEV","trtype":"user","dev_type":"blk",
  "traddr":"$RIG_VHOST_SOCK"}},
 {"method":"bdev_wait_for_examine"}]}]}
EOF
}

# fio (spdk_bdev plugin) over NVMe-oF, with enable_flush so fsync reaches
# hhc0. Defaults --direct=1 --bs=4k --iodepth=16 --size=8m; ARGS are more
# options of the same job (later ones win): --rw=randwrite --fsync=16 ...
nvmf_fio() {
    [ -e "$RIG_NVMF_JSON" ] || rig_client_json
    timeout -k 5 "$RIG_FIO_TIMEOUT" "$FIO" --name=rig --ioengine="$RIG_FIO_PLUGIN" --spdk_json_conf="$RIG_NVMF_JSON" \
        --thread=1 --env_context="--no-huge --legacy-mem" --spdk_mem="$RIG_FIO_MEM_MB" --filename="$RIG_NVMF_BDEV" \
        --direct=1 --bs=4k --iodepth=16 --size=8m "$@"
}

# bdevperf over NVMe-oF: ARGS are bdevperf's (-q 16 -o 4096 -w verify -t 5).
nvmf_bdevperf() {
    [ -e "$RIG_NVMF_JSON" ] || rig_client_json
    timeout -k 5 "$RIG_FIO_TIMEOUT" "$RIG_BDEVPERF" --no-huge -s "$RIG_FIO_MEM_MB" -m "$RIG_CLIENT_MASK" \
        --disable-cpumask-locks -r "$RIG_CLIENT_SOCK" --json "$RIG_NVMF_JSON" -T "$RIG_NVMF_BDEV" "$@"
}

rig_vhost_ok() {
    [ "${RIG_HUGE:-0}" = 1 ] && [ -S "$RIG_VHOST_SOCK" ] && return 0
    rig_loud "vhost client SKIPPED: ${RIG_VHOST_SOCK} is not there (no hugepages: RIG_HUGE=${RIG_HUGE:-0})"
    return 2
}

# fio through a virtio-user client of the vhost export: hugepages,
# single-file segments. Defaults and ARGS as nvmf_fio. Returns 2 (after
# saying so) when there is no vhost export.
vhost_fio() {
    rig_vhost_ok || return
    [ -e "$RIG_VHOST_JSON" ] || rig_client_json
    timeout -k 5 "$RIG_FIO_TIMEOUT" "$FIO" --name=rig --ioengine="$RIG_FIO_PLUGIN" --spdk_json_conf="$RIG_VHOST_JSON" \
        --thread=1 --spdk_mem="$RIG_CLIENT_MEM_MB" --spdk_single_seg=1 --filename="$RIG_VHOST_BDEV" \
        --direct=1 --bs=4k --iodepth=16 --size=8m "$@"
    local rc=$?
    rig_huge_leftovers
    return $rc
}

# bdevperf through a virtio-user client (-g); ARGS are bdevperf's.
vhost_bdevperf() {
    rig_vhost_ok || return
    [ -e "$RIG_VHOST_JSON" ] || rig_client_json
    timeout -k 5 "$RIG_FIO_TIMEOUT" "$RIG_BDEVPERF" -g -s "$RIG_CLIENT_MEM_MB" -m "$RIG_CLIENT_MASK" \
        --disable-cpumask-locks -r "$RIG_CLIENT_SOCK" --json "$RIG_VHOST_JSON" -T "$RIG_VHOST_BDEV" "$@"
    local rc=$?
    rig_huge_leftovers
    return $rc
}

# Hugepage files of clients that are gone (a client killed by its timeout).
rig_huge_leftovers() {
    local mnt
    while read -r mnt; do
        spdk_remove_if_gone /spdk_pid "$mnt"/spdk_pid*map_*
    done < <(awk '$3 == "hugetlbfs" {print $2}' /proc/mounts)
}

# ---- the whole rig ----

rig_save_env() {
    mkdir -p "$RIG_WORK"
    {
        local v
        for v in RIG_SERVER $RIG_SERVER_VARS RIG_ISCSI_PORT RIG_NVMF_PORT RIG_POLICY RIG_HDDS RIG_PEER RIG_PEER_PORT RIG_PEER_MASK \
            RIG_PEER_MEM_MB RIG_PEER_NVME_OPTS RIG_EXPORTS RIG_RAID_MB RIG_RAID_LEVEL RIG_SSD_MB RIG_HDD_MB RIG_SEGMENT_SIZE \
            RIG_HHC_ARGS RIG_NVME_OPTS RIG_ISCSI_TIMEOUT RIG_ISCSI_MAX_R2T RIG_SERVER_MASK RIG_HOST_MASK RIG_CLIENT_MASK RIG_SERVER_MEM_MB RIG_HOST_MEM_MB \
            RIG_CLIENT_MEM_MB RIG_FIO_MEM_MB RIG_HUGE; do
            printf '%s=%q\n' "$v" "${!v:-}"
        done
    } >"$RIG_ENV"
}

rig_check_tools() {
    local f
    for f in "$RIG_TGT" "$RIG_MODEL_MODULE" "$RIG_FIO_PLUGIN" "$RIG_BDEVPERF" "$FIO"; do
        if [ -z "$f" ] || [ ! -e "$f" ]; then rig_log "missing ${f:-fio} (make -C spdk-glue; SPDK_DIR; FIO)"; return 1; fi
    done
    [ -n "${SPDK_PY_DIR:-}" ] || { rig_log "missing SPDK's python spdk package under $SPDK_DIR"; return 1; }
    declare -F server_start >/dev/null || { rig_log "no storage server of kind RIG_SERVER=$RIG_SERVER"; return 1; }
    server_check_tools
}

# One command up: the server, then the host with its exports. The host is
# brought up by RIG_HOST_START (default host_start) with the policy.
RIG_HOST_START=${RIG_HOST_START:-host_start}
rig_up() { # [policy]
    rig_check_tools || return 1
    if server_running || rig_running host || rig_running peer; then
        rig_log "a rig is running in $RIG_WORK already (rig_down first)"
        return 1
    fi
    mkdir -p "$RIG_WORK" || return 1
    : >"$RIG_WORK/devices"
    RIG_POLICY=${1:-$RIG_POLICY}
    rig_hugepages
    rig_save_env
    rig_client_json
    local t0=$SECONDS
    if ! server_start || { [ "$RIG_PEER" = 1 ] && ! peer_start; } || ! "$RIG_HOST_START" "$RIG_POLICY"; then rig_log "rig up FAILED; logs in $RIG_WORK"; return 1; fi
    rig_log "rig up in $((SECONDS - t0)) s: RIG_WORK=$RIG_WORK"
}

# One command down: host (clean HHC shutdown), then server; removes
# RIG_WORK unless KEEP is set.
rig_down() {
    host_stop
    peer_stop
    server_stop
    rig_huge_leftovers
    spdk_trace_leftovers
    if [ -n "${KEEP:-}" ]; then
        rig_log "rig down; kept $RIG_WORK"
    elif [ -d "$RIG_WORK" ]; then
        rm -rf "$RIG_WORK"
        rig_log "rig down; removed $RIG_WORK"
    fi
}

rig_status() {
    local name rc=0 pid
    echo "RIG_WORK=$RIG_WORK"
    # (the ceph kind has no PID file: server_describe says what runs)
    pid=$(rig_pid server)
    if server_running; then echo "server ($RIG_SERVER): running${pid:+, pid $pid}"; else echo "server ($RIG_SERVER): not running"; rc=1; fi
    if rig_running host; then echo "host: running, pid $(rig_pid host)"; else echo "host: not running"; rc=1; fi
    if [ "$RIG_PEER" = 1 ]; then
        if peer_running; then echo "peer: running, pid $(rig_pid peer); its mirror on NVMe-oF/TCP 127.0.0.1:$RIG_PEER_PORT"; else echo "peer: not running"; rc=1; fi
    fi
    server_describe
    echo "NVMe-oF: tcp 127.0.0.1:$RIG_NVMF_PORT $RIG_NQN (client bdev $RIG_NVMF_BDEV)"
    if [ "${RIG_HUGE:-0}" = 1 ]; then echo "vhost-blk: $RIG_VHOST_SOCK (client bdev $RIG_VHOST_BDEV)"; else echo "vhost-blk: none (no hugepages)"; fi
    echo "policy: $RIG_POLICY; log mirrors: $RIG_HDDS local$([ "$RIG_PEER" = 1 ] && echo ", 1 on the peer")"
    [ -s "$RIG_WORK/devices" ] && sed 's/^/device: /' "$RIG_WORK/devices"
    if rig_running host; then
        RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_hhc_get_bdevs "{\"name\":\"$RIG_HHC\"}" | python3 -c '
import json, sys
b = json.loads(sys.stdin.readline())[0]
s = b["stats"]
dev = lambda d: "%s (%s)" % (d["name"], d["health"]) if isinstance(d, dict) else str(d)
print("%s: state %s, policy %s, backing %s, cache %s, logs %s" % (b["name"], b["state"], b["policy"], dev(b["backing"]),
      dev(b["cache"]), ", ".join(dev(l) for l in b["logs"])))
print("  " + ", ".join("%s %s" % (k, s[k]) for k in ("reads", "writes", "flushes", "dirty_blocks") if k in s))' || rc=1
    fi
    return $rc
}

# The settings as shell assignments (eval "$(rig.sh env)").
rig_env() {
    local v
    for v in RIG_SERVER RIG_WORK RIG_TGT RIG_SERVER_SOCK RIG_HOST_SOCK RIG_CLIENT_SOCK RIG_SERVER_LOG RIG_HOST_LOG RIG_VHOST_SOCK \
        RIG_NVMF_JSON RIG_VHOST_JSON RIG_ISCSI_URL RIG_ISCSI_PORT RIG_NVMF_PORT RIG_NQN RIG_TARGET_IQN RIG_INITIATOR_IQN \
        RIG_HHC RIG_BACKING RIG_CACHE RIG_RAID RIG_NVMF_BDEV RIG_VHOST_BDEV RIG_POLICY RIG_HDDS RIG_HUGE; do
        printf '%s=%q\n' "$v" "${!v:-}"
    done
}

# shellcheck source=tests/spdk/rig_peer.sh
. "$RIG_REPO/tests/spdk/rig_peer.sh"

# The paths and settings, once every function (the server kinds too) is defined.
rig_paths
