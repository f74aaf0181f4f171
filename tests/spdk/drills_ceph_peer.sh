#!/usr/bin/env bash
# A takeover over Ceph RBD, fenced with Ceph's own mechanism (docs/ceph.md,
# "A takeover"): the rig with RIG_SERVER=ceph and RIG_PEER=1 (a log mirror
# on the peer over NVMe-oF; hhc0's backing is bdev_rbd on either host), the
# image with `exclusive-lock`, write-back held off so the flushed passes
# are in the host's cache and the logs alone. The host is frozen (SIGSTOP:
# cut off, not dead), the peer takes the volume over and writes a newer
# pass and writes it back; then the host is let go and told to write its
# cache back. With the host fenced first (scripts/ceph-fence.sh), the
# cluster refuses the host's writes and the image alone holds the peer's
# pass; without the fence, the same check fails: the host takes the
# exclusive lock back and writes older passes over the peer's.
# tests/spdk/run.sh runs them as ceph_peer_*; alone (a cluster already
# running in CEPH_DIR is shared, else the rig brings one up and down):
#
#   bash tests/spdk/drills_ceph_peer.sh [drill...]

set -u -o pipefail
export RIG_SERVER=ceph RIG_PEER=1
# shellcheck source=tests/spdk/drills.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/drills.sh"

# The peer exports hhc0 on a port of its own: the frozen host still holds
# RIG_NVMF_PORT.
CEPH_TAKEOVER_PORT=${CEPH_TAKEOVER_PORT:-$((RIG_NVMF_PORT + 30))}
CEPH_TAKEOVER_FEATURES=layering,exclusive-lock

host_freeze() { kill -STOP "$(rig_pid host)"; }
host_thaw() { kill -CONT "$(rig_pid host)"; }

# One takeover: fence = 1 blocklists the host before the peer opens the
# image; locked = 1 has the host write its cache back once after the first
# pass, so that it holds the image's exclusive lock when it is frozen. Sets
# CEPH_HOST_WROTE_BACK (1: the thawed host's flush_all wrote its cache
# back without an error); the caller checks the image.
ceph_takeover() { # fence locked
    local fence=$1 locked=$2 k answer outcome
    local RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'}
    CEPH_IMAGE_FEATURES=$CEPH_TAKEOVER_FEATURES rig_up hhc || return 1
    drill_load_start
    drill_wait_passes 1 || return 1
    if [ "$locked" = 1 ]; then
        ceph_flush_all "$RIG_HOST_SOCK" 60 >/dev/null || { drill_log "the host could not write its cache back"; return 1; }
    fi
    drill_wait_passes 1 || return 1
    sleep "$(awk -v r="$RANDOM" 'BEGIN {printf "%.1f", (r % 26) / 10}')"
    host_freeze
    drill_load_stop
    drill_log "host frozen (SIGSTOP) after pass $(drill_last_pass), its cache and logs holding the passes"
    if [ "$fence" = 1 ]; then
        bash "$RIG_REPO/scripts/ceph-fence.sh" -c "$CEPH_CONF" "$CEPH_POOL/$RIG_CEPH_IMAGE" >"$RIG_WORK/fence.log" 2>&1 ||
            { drill_log "the fence failed:"; cat "$RIG_WORK/fence.log"; return 1; }
        while read -r line; do drill_log "$line"; done <"$RIG_WORK/fence.log"
    fi
    answer=$(RIG_NVMF_PORT=$CEPH_TAKEOVER_PORT peer_take_over) || return 1
    drill_log "the peer took $RIG_HHC over: $answer"
    # From here the client reaches hhc0 on the peer.
    RIG_NVMF_PORT=$CEPH_TAKEOVER_PORT RIG_NVMF_JSON=$RIG_WORK/nvmf-peer.json
    rig_client_json
    drill_verify_hhc || return 1
    k=$(drill_next_pass)
    # shellcheck disable=SC2046
    nvmf_fio --rw=randwrite $(drill_pass_args "$k") --verify=crc32c --do_verify=0 --fsync=32 --end_fsync=1 \
        >>"$RIG_WORK/passes.log" 2>&1 || { drill_log "the peer's pass $k failed"; return 1; }
    echo "$k" >>"$DRILL_PASSES_FILE"
    ceph_flush_all "$RIG_PEER_SOCK" 120 >/dev/null || { drill_log "the peer did not write its cache back"; return 1; }
    drill_log "the peer wrote pass $k and wrote it back to the image"
    host_thaw
    CEPH_HOST_WROTE_BACK=0
    outcome=$(ceph_flush_all "$RIG_HOST_SOCK" 60) && CEPH_HOST_WROTE_BACK=1
    drill_log "host thawed and told to write its cache back: $outcome"
    host_kill
}

# bdev_hhc_flush_all of hhc0 on SOCKET, waited for up to TIMEOUT s; prints
# its outcome and fails unless it completed without errors.
ceph_flush_all() { # socket timeout-s
    local RIG_SOCK=$1 deadline=$((SECONDS + $2)) stats
    rig_call bdev_hhc_flush_all "{\"name\":\"$RIG_HHC\"}" >/dev/null || { echo "flush_all refused"; return 1; }
    while :; do
        stats=$(rig_call bdev_hhc_get_stats "{\"name\":\"$RIG_HHC\"}") || { echo "no stats"; return 1; }
        python3 -c '
import json, sys
s = json.loads(sys.argv[1]); c = s["counters"]
errors = c["flush_all_errors"] + c["backing_errors"]
done = not s["flush_all_in_progress"] and c["flush_alls_completed"] > 0
print("flush_all %s, %d write-back errors, backing errors %d, %d blocks dirty" % (
    "done" if done else "under way", c["flush_all_errors"], c["backing_errors"], s["gauges"]["dirty_blocks"]))
sys.exit(0 if done and errors == 0 else 2 if errors else 1)' "$stats"
        case $? in
            0) return 0 ;;
            2) return 1 ;;
        esac
        [ $SECONDS -lt $deadline ] || return 1
        sleep 1
    done
}

# The host, holding the image's exclusive lock, fenced: the lock broken,
# its write-back refused by the cluster; the image alone holds the peer's
# pass.
drill_ceph_peer_takeover_fenced() {
    ceph_takeover 1 1 || return 1
    grep -q "lock .* broken" "$RIG_WORK/fence.log" || { drill_log "the host held no lock on the image to break"; return 1; }
    [ "$CEPH_HOST_WROTE_BACK" = 0 ] || { drill_log "the fenced host wrote its cache back"; return 1; }
    drill_verify_raid
}

# Without the fence the check must fail: the thawed host's write-back puts
# older passes over the peer's (the exclusive lock alone passes to it on
# request).
drill_ceph_peer_takeover_unfenced_check_can_fail() {
    ceph_takeover 0 0 || return 1
    [ "$CEPH_HOST_WROTE_BACK" = 1 ] || { drill_log "the host, not fenced, could not write its cache back"; return 1; }
    if drill_verify_raid; then
        drill_log "the image verified though the host was not fenced: the check cannot tell"
        return 1
    fi
    drill_log "checked: without the fence the image check fails"
}

CEPH_PEER_DRILLS="drill_ceph_peer_takeover_fenced drill_ceph_peer_takeover_unfenced_check_can_fail"

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    failed=0
    [ $# -gt 0 ] || read -ra drills <<<"$CEPH_PEER_DRILLS"
    for drill in "${@:-${drills[@]}}"; do
        drill_run "$drill" || failed=$((failed + 1))
    done
    [ "$failed" = 0 ]
fi
