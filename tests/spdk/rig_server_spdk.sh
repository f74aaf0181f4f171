# shellcheck shell=bash
# The rig's storage server of kind spdk (RIG_SERVER=spdk, the default):
# hhc_tgt --no-huge with an aio file -> make_raid (an HDD RAID5 model), or
# SPDK's raid1 over two HDD models, exported as an iSCSI target node on
# 127.0.0.1:RIG_ISCSI_PORT. Sourced by rig_lib.sh, which documents the
# functions every server kind provides.

RIG_ISCSI_LUN=0

server_check_tools() { [ -e "$RIG_TGT" ] || { rig_log "missing $RIG_TGT (make -C spdk-glue)"; return 1; }; }
server_running() { rig_running server; }
server_describe() { echo "iSCSI: $RIG_ISCSI_URL (hhc_tgt, $RIG_RAID $RIG_RAID_LEVEL; initiator $RIG_INITIATOR_IQN)"; }

# Starts the server and builds its RAID and iSCSI export; the RAID's aio
# file survives restarts and kill -9.
server_start() {
    rig_running server && { rig_log "server already running (pid $(rig_pid server))"; return 0; }
    rm -f "$RIG_SERVER_SOCK"
    # iSCSI options are taken before the subsystems start only.
    local wait_for_rpc=
    [ -z "$RIG_ISCSI_MAX_R2T" ] || wait_for_rpc=--wait-for-rpc
    # shellcheck disable=SC2153 # (RIG_WORK is rig_lib.sh's)
    rig_spawn server "$RIG_SERVER_LOG" "$RIG_WORK" env LD_PRELOAD="$RIG_MODEL_MODULE" "$RIG_TGT" --no-huge -s "$RIG_SERVER_MEM_MB" -m "$RIG_SERVER_MASK" \
        -r "$RIG_SERVER_SOCK" --disable-cpumask-locks $wait_for_rpc
    rig_wait_rpc server "$RIG_SERVER_SOCK" "$RIG_SERVER_LOG" || return 1
    # shellcheck disable=SC2034 # (rig_call's socket)
    local RIG_SOCK=$RIG_SERVER_SOCK
    if [ -n "$wait_for_rpc" ]; then
        rig_call iscsi_set_options "{\"max_r2t_per_connection\":$RIG_ISCSI_MAX_R2T}" framework_start_init '{}' \
                framework_wait_init '{}' >/dev/null || { rig_log "server: iSCSI options or start-up failed"; return 1; }
    fi
    if ! server_make_raid; then
        rig_log "server: the RAID could not be built"
        return 1
    fi
    rig_call iscsi_create_portal_group "{\"tag\":1,\"portals\":[{\"host\":\"127.0.0.1\",\"port\":\"$RIG_ISCSI_PORT\"}]}" \
            iscsi_create_initiator_group '{"tag":2,"initiators":["ANY"],"netmasks":["127.0.0.1/32"]}' \
            iscsi_create_target_node "{\"name\":\"${RIG_TARGET_IQN#iqn.2016-06.io.spdk:}\",\"alias_name\":\"HHC rig RAID\",\"luns\":[{\"bdev_name\":\"$RIG_RAID\",\"lun_id\":$RIG_ISCSI_LUN}],\"pg_ig_maps\":[{\"pg_tag\":1,\"ig_tag\":2}],\"queue_depth\":128,\"disable_chap\":true}" \
            >/dev/null || { rig_log "server: building the RAID and its iSCSI export failed"; return 1; }
    rig_log "server: $RIG_RAID (${RIG_RAID_MB} MiB) exported as $RIG_ISCSI_URL"
}
# The server's RAID (RIG_SOCK is the server's): by default the RAID5
# timing model over one aio file; RIG_RAID_LEVEL=raid1 is SPDK's raid1 over
# two HDD models, each over its own aio file (raid0_m0, raid0_m1), so a
# member can die (drill_raid_member_death; other bdev_raid levels, e.g.
# raid0, show that drill failing). raid1 without a superblock: a
# restart assembles both members again, a dead one's stale file included,
# so a server restart after a member died is not supported.
server_make_raid() {
    local i members='' strip=64
    [ "$RIG_RAID_LEVEL" != raid1 ] || strip=0   # raid1 has no strips
    if [ "$RIG_RAID_LEVEL" = raid5-model ]; then
        rig_aio raid0_base "$RIG_WORK/raid0.img" "$RIG_RAID_MB" 512 && make_raid "$RIG_RAID" raid0_base
        return
    fi
    for i in 0 1; do
        rig_aio "${RIG_RAID}_m${i}_base" "$RIG_WORK/${RIG_RAID}_m$i.img" "$RIG_RAID_MB" 512 &&
            make_hdd "${RIG_RAID}_m$i" "${RIG_RAID}_m${i}_base" || return 1
        members=$members${members:+,}\"${RIG_RAID}_m$i\"
    done
    rig_call bdev_raid_create "{\"name\":\"$RIG_RAID\",\"raid_level\":\"$RIG_RAID_LEVEL\",\"base_bdevs\":[$members],\"strip_size_kb\":$strip}" \
        >/dev/null && echo "$RIG_RAID raid $RIG_RAID_LEVEL $members" >>"$RIG_WORK/devices"
}
server_stop() { rig_stop server TERM; }
server_kill() { rig_stop server KILL; }
# A hung server: the process stops answering, its TCP connections stay up
# (bdev_iscsi then times commands out after 30 s, docs/spdk.md).
server_freeze() { rig_running server && kill -STOP "$(rig_pid server)"; }
server_thaw() { rig_running server && kill -CONT "$(rig_pid server)"; }

server_backing_create() { rig_iscsi_backing_create "$@"; }
# The RAID read back through a fresh iSCSI session of its own.
server_fio() { rig_iscsi_fio "$@"; }
