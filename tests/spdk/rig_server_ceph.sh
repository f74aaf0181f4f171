# shellcheck shell=bash
# The rig's storage server of kind ceph (RIG_SERVER=ceph): the one-node
# Ceph cluster of tests/ceph/cluster.sh in CEPH_DIR, and a new RBD image of
# RIG_RAID_MB MiB for each rig (RIG_CEPH_IMAGE, named when the rig comes
# up); the host's backing is SPDK's bdev_rbd over that image. Sourced by
# rig_lib.sh, which documents the functions every server kind provides.
#
# A cluster already running in CEPH_DIR is shared: the rig only makes and
# removes its image. Otherwise server_start brings one up and server_stop
# (rig_down) brings it down again. server_kill, server_freeze and
# server_thaw act on the OSD (kill -9, SIGSTOP, SIGCONT); server_start
# starts it again.

# shellcheck source=tests/ceph/cluster.sh
. "$RIG_REPO/tests/ceph/cluster.sh"

# shellcheck disable=SC2034 # (rig_lib.sh's)
RIG_BACKING=rbd0
RIG_CEPH_IMAGE=${RIG_CEPH_IMAGE:-}
RIG_CEPH_OWNED=${RIG_CEPH_OWNED:-}
# shellcheck disable=SC2034 # (rig_lib.sh's)
RIG_SERVER_VARS="CEPH_DIR RIG_CEPH_IMAGE RIG_CEPH_OWNED"

# The kind's functions under names of their own too, for the tgt-rbd kind.
server_check_tools() { ceph_rig_check_tools; }
ceph_rig_check_tools() {
    ceph_available || { rig_log "missing $CEPH_MISSING (Debian's ceph-mon ceph-osd ceph-mgr ceph-common)"; return 1; }
    # (not `ldd | grep -q`: under pipefail ldd's SIGPIPE fails it)
    [[ $(ldd "$RIG_TGT" 2>/dev/null) == *libspdk_bdev_rbd* ]] ||
        { rig_log "$RIG_TGT has no bdev_rbd (SPDK built without --with-rbd)"; return 1; }
}

# The rig holds its image (a marker in RIG_WORK) and the OSD runs.
server_running() { [ -e "$RIG_WORK/server.ceph" ] && ceph_running osd.0; }

server_describe() { echo "Ceph RBD: $CEPH_POOL/$RIG_CEPH_IMAGE, mon $CEPH_MON_ADDR, CEPH_DIR=$CEPH_DIR (bdev $RIG_BACKING)"; }

server_start() { ceph_rig_start; }
ceph_rig_start() {
    if ! ceph_running mon.a; then
        ceph_up || return 1
        RIG_CEPH_OWNED=1
        rig_save_env
    fi
    ceph_osd_cont
    if ! ceph_running osd.0; then ceph_osd_start || return 1; fi
    # A rig coming up gets an image no rig had: an image can outlive its
    # rig (`rbd rm` refuses while a killed host's watch lasts, 30 s), and
    # a drill finding an older rig's passes there would pass unearned.
    if [ ! -e "$RIG_WORK/server.ceph" ]; then
        RIG_CEPH_IMAGE=rig-${RIG_WORK##*/}-$(date +%s%N)
        ceph_image "$RIG_CEPH_IMAGE" "${RIG_RAID_MB}M" || { rig_log "server: creating image $RIG_CEPH_IMAGE failed"; return 1; }
        rig_save_env
    fi
    touch "$RIG_WORK/server.ceph"
    rig_log "server: Ceph image $CEPH_POOL/$RIG_CEPH_IMAGE (${RIG_RAID_MB} MiB), mon $CEPH_MON_ADDR, CEPH_DIR=$CEPH_DIR"
}

# The rig lets go: its image removed, the cluster down if the rig made it.
server_stop() { ceph_rig_stop; }
ceph_rig_stop() {
    rm -f "$RIG_WORK/server.ceph"
    ceph_running mon.a || return 0
    ceph_osd_cont
    if ! ceph_running osd.0; then ceph_osd_start || return 1; fi
    if [ -n "$RIG_CEPH_OWNED" ]; then
        ceph_down
    else
        rbd_cmd rm "$CEPH_POOL/$RIG_CEPH_IMAGE" >/dev/null 2>&1 ||
            rig_log "server: image $RIG_CEPH_IMAGE left in place (a killed host's watch on it lasts 30 s)"
    fi
}
server_kill() { ceph_osd_kill; }
server_freeze() { ceph_osd_stop; }
server_thaw() { ceph_osd_cont; }

# bdev_rbd NAME over the rig's image on RIG_SOCK's app, with the cluster
# given in the call itself (ceph_rbd_config_json), so save_config keeps it.
server_backing_create() { # name initiator-iqn (unused)
    rig_call bdev_rbd_create "$(server_rbd_params "$1")" >/dev/null
}
server_rbd_params() { # name
    printf '{"name":"%s","pool_name":"%s","rbd_name":"%s","block_size":512,"user_id":"admin","config":%s}' \
        "$1" "$CEPH_POOL" "$RIG_CEPH_IMAGE" "$(ceph_rbd_config_json)"
}

# fio (spdk_bdev plugin, --no-huge) on the image without the host, through
# a bdev_rbd of its own; defaults and ARGS as nvmf_fio.
server_fio() { ceph_rig_fio "$@"; }
ceph_rig_fio() {
    cat >"$RIG_WORK/rbd.json" <<JSON
{"subsystems":[{"subsystem":"bdev","config":[
 {"method":"bdev_rbd_create","params":$(server_rbd_params check)},
 {"method":"bdev_wait_for_examine"}]}]}
JSON
    timeout -k 5 "$RIG_FIO_TIMEOUT" "$FIO" --name=backing --ioengine="$RIG_FIO_PLUGIN" --spdk_json_conf="$RIG_WORK/rbd.json" \
        --thread=1 --env_context="--no-huge --legacy-mem" --spdk_mem="$RIG_FIO_MEM_MB" --filename=check --direct=1 \
        --bs=4k --iodepth=16 --size=8m "$@"
}
