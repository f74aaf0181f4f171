# shellcheck shell=bash
# The rig's storage server of kind tgt (RIG_SERVER=tgt): Debian's userspace
# iSCSI target (package tgt: tgtd, tgtadm), a target RIG_TARGET_IQN with
# LUN 1 backed by the file RIG_WORK/tgt-lun1.img (backing store rdwr: pread/pwrite
# on the file), portal 127.0.0.1:RIG_ISCSI_PORT, initiators from 127.0.0.1
# only (RIG_TGT_ACL=address) or those of the host, its checks and the peer
# by name alone (RIG_TGT_ACL=names: what scripts/tgt-fence.sh needs to
# keep one host out). tgtd runs in the foreground (-f) under its own control port, so it
# neither daemonizes nor meets another tgtd. Sourced by rig_lib.sh, which
# documents the functions every server kind provides.
#
# Write cache: RIG_TGT_WRITE_CACHE=on (tgt's default) acknowledges a write
# once pwrite has put it in the page cache, and a SYNCHRONIZE CACHE (the
# host's FLUSH) is an fdatasync of the file; off sets WCE=0 in the caching
# mode page and tgt fdatasyncs after every write. The page cache outlives
# a kill -9 of tgtd, so in either mode what the target acknowledged is in
# the file; on is the mode of a disk with a volatile cache, where only a
# FLUSH makes writes durable. RIG_RAID_LEVEL does not apply.

RIG_ISCSI_LUN=1   # tgt's LUN 0 is the target's controller
RIG_TGT_WRITE_CACHE=${RIG_TGT_WRITE_CACHE:-on}
RIG_TGT_ACL=${RIG_TGT_ACL:-address}
# The control port only names tgtd's socket (/var/run/tgtd/socket.PORT);
# empty: the portal's port, unique on the machine.
RIG_TGT_CONTROL_PORT=${RIG_TGT_CONTROL_PORT:-}
# shellcheck disable=SC2034 # (saved in rig.env by rig_save_env)
RIG_SERVER_VARS="RIG_TGT_WRITE_CACHE RIG_TGT_ACL RIG_TGT_CONTROL_PORT"

# The LUN's file (RIG_WORK may change after this file is sourced).
tgt_img() { echo "$RIG_WORK/tgt-lun1.img"; }

# The kind's functions under names of their own too, for the tgt-rbd kind.
server_check_tools() { tgt_rig_check_tools; }
tgt_rig_check_tools() {
    if ! command -v tgtd >/dev/null || ! command -v tgtadm >/dev/null; then
        rig_log "missing tgtd or tgtadm (apt-get install tgt)"
        return 1
    fi
}
server_running() { rig_running server tgtd; }
server_describe() {
    echo "iSCSI: $RIG_ISCSI_URL (tgtd, $(tgt_lun_describe), write cache $RIG_TGT_WRITE_CACHE; initiator $RIG_INITIATOR_IQN)"
}
tgt_lun_describe() { echo "rdwr LUN over $(tgt_img)"; }

tgt_port() { echo "${RIG_TGT_CONTROL_PORT:-$RIG_ISCSI_PORT}"; }
tgt_adm() { timeout 30 tgtadm -C "$(tgt_port)" "$@"; }

# Starts tgtd and (re-)creates the target over the same file, which
# survives restarts and kill -9.
server_start() { tgt_rig_start; }
tgt_rig_start() {
    local t0=$SECONDS
    server_running && { rig_log "server already running (pid $(rig_pid server))"; return 0; }
    mkdir -p /var/run/tgtd || return 1
    # shellcheck disable=SC2153 # (RIG_WORK is rig_lib.sh's)
    rig_spawn server "$RIG_SERVER_LOG" "$RIG_WORK" tgtd -f -C "$(tgt_port)" \
        --iscsi portal="127.0.0.1:$RIG_ISCSI_PORT"
    until tgt_adm --op show --mode sys >/dev/null 2>&1; do
        server_running || { rig_log "tgtd exited at start-up"; tail -20 "$RIG_SERVER_LOG" >&2; return 1; }
        [ $((SECONDS - t0)) -lt "$RIG_START_TIMEOUT" ] || { rig_log "tgtd: no control socket after $RIG_START_TIMEOUT s"; return 1; }
        sleep 0.1
    done
    if ! { tgt_adm --lld iscsi --op new --mode target --tid 1 -T "$RIG_TARGET_IQN" &&
        tgt_lun_new &&
        tgt_write_cache && tgt_acl; }; then
        rig_log "server: tgtadm could not build the target"
        tail -5 "$RIG_SERVER_LOG" >&2
        return 1
    fi
    rig_log "server: tgtd (pid $(rig_pid server)) exports $(tgt_lun_describe) (${RIG_RAID_MB} MiB, write cache" \
        "$RIG_TGT_WRITE_CACHE) as $RIG_ISCSI_URL"
}
# LUN 1 of target 1 over the file (made the first time).
tgt_lun_new() {
    local img
    img=$(tgt_img)
    [ -e "$img" ] || truncate -s "${RIG_RAID_MB}M" "$img" || return 1
    tgt_adm --lld iscsi --op new --mode logicalunit --tid 1 --lun "$RIG_ISCSI_LUN" -b "$img" --bstype rdwr
}
# Who may log in: every initiator from 127.0.0.1, or by name the host's,
# rig_iscsi_fio's and the peer's.
tgt_acl() {
    local iqn
    case $RIG_TGT_ACL in
        address) tgt_adm --lld iscsi --op bind --mode target --tid 1 -I 127.0.0.1 ;;
        names)
            for iqn in "$RIG_INITIATOR_IQN" "$RIG_INITIATOR_IQN-check" "$RIG_PEER_INITIATOR_IQN"; do
                tgt_adm --lld iscsi --op bind --mode target --tid 1 --initiator-name "$iqn" || return 1
            done ;;
        *) rig_log "RIG_TGT_ACL=$RIG_TGT_ACL: address or names"; return 1 ;;
    esac
}
# The caching mode page (8) as tgt-admin's write-cache=off sets it: WCE=0.
tgt_write_cache() {
    case $RIG_TGT_WRITE_CACHE in
        on) ;;
        off) tgt_adm --lld iscsi --op update --mode logicalunit --tid 1 --lun "$RIG_ISCSI_LUN" \
                 --params mode_page=8:0:18:0x10:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0 ;;
        *) rig_log "RIG_TGT_WRITE_CACHE=$RIG_TGT_WRITE_CACHE: on or off"; return 1 ;;
    esac
}
# tgtd ignores SIGTERM: it leaves once its targets are gone and the
# system is deleted (what Debian's tgt service does); rig_stop waits for
# that, and kills it after 30 s.
server_stop() { tgt_rig_stop; }
tgt_rig_stop() {
    if server_running; then
        tgt_adm --op update --mode sys --name State -v offline >/dev/null 2>&1
        tgt_adm --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1
        tgt_adm --op delete --mode system >/dev/null 2>&1
    fi
    rig_stop server TERM tgtd
}
server_kill() { rig_stop server KILL tgtd; }
# Writes the LUN has completed (tgtadm's wr_done cmds, every session's).
server_writes() {
    tgt_adm --op stat --mode logicalunit --tid 1 --lun "$RIG_ISCSI_LUN" | awk 'NR > 1 {n += $11} END {print n + 0}'
}
server_freeze() { server_running && kill -STOP "$(rig_pid server)"; }
server_thaw() { server_running && kill -CONT "$(rig_pid server)"; }

server_backing_create() { rig_iscsi_backing_create "$@"; }
# The LUN's file read directly, through the page cache, which holds every
# write tgtd acknowledged (O_DIRECT would also be coherent with it, but
# tmpfs, RIG_WORK's usual home, may refuse it).
server_fio() {
    timeout -k 5 "$RIG_FIO_TIMEOUT" "$FIO" --name=backing --ioengine=psync --filename="$(tgt_img)" \
        --direct=0 --fallocate=none --bs=4k --size=8m "$@"
}
