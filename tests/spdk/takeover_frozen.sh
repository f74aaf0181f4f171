# shellcheck shell=bash
# A takeover of a host that is cut off, not dead (docs/operations.md, "The
# whole host is lost"): under the pass load of drills.sh the host is
# frozen (SIGSTOP), fenced off the backing by the command given, or not;
# the peer (RIG_PEER=1) takes the volume over, exports hhc0 on a port of
# its own (the frozen host still holds RIG_NVMF_PORT), writes a newer pass
# and writes it back; then the host is let go and told to write its cache
# back. Fenced, the backing refuses it and holds the peer's pass; not
# fenced, the host writes older passes over the peer's and the backing
# check fails. Sourced by the drills over Ceph (drills_ceph_peer.sh) and
# over tgt (drills_peer.sh), after drills.sh.

host_freeze() { kill -STOP "$(rig_pid host)"; }
host_thaw() { kill -CONT "$(rig_pid host)"; }

# The takeover, on a rig already up with the load running and write-back
# held off. Sets TAKEOVER_HOST_WROTE_BACK (1: the thawed host's flush_all
# wrote its cache back without an error); the caller checks the backing.
takeover_of_frozen_host() { # [fence-command...]
    local port=$((RIG_NVMF_PORT + 30)) k answer outcome line
    sleep "$(awk -v r="$RANDOM" 'BEGIN {printf "%.1f", (r % 26) / 10}')"
    host_freeze
    drill_load_stop
    drill_log "host frozen (SIGSTOP) after pass $(drill_last_pass), its cache and logs holding the passes"
    if [ $# -gt 0 ]; then
        "$@" >"$RIG_WORK/fence.log" 2>&1 || { drill_log "the fence failed:"; cat "$RIG_WORK/fence.log"; return 1; }
        while read -r line; do drill_log "$line"; done <"$RIG_WORK/fence.log"
    fi
    answer=$(RIG_NVMF_PORT=$port peer_take_over) || return 1
    drill_log "the peer took $RIG_HHC over: $answer"
    # From here the client reaches hhc0 on the peer.
    RIG_NVMF_PORT=$port RIG_NVMF_JSON=$RIG_WORK/nvmf-peer.json
    rig_client_json
    drill_verify_hhc || return 1
    # Not the pass the host was in when frozen: a pass's data is its seed's,
    # and a host frozen at that pass's last flush holds all of it, so its
    # write-back over the peer's could not be told apart (the unfenced
    # check passed so once). This one goes over the last whole pass.
    k=$(($(drill_last_pass) + 2))
    # shellcheck disable=SC2046
    nvmf_fio --rw=randwrite $(drill_pass_args "$k") --verify=crc32c --do_verify=0 --fsync=32 --end_fsync=1 \
        >>"$RIG_WORK/passes.log" 2>&1 || { drill_log "the peer's pass $k failed"; return 1; }
    echo "$k" >>"$DRILL_PASSES_FILE"
    takeover_flush_all "$RIG_PEER_SOCK" 120 >/dev/null || { drill_log "the peer did not write its cache back"; return 1; }
    drill_log "the peer wrote pass $k and wrote it back"
    host_thaw
    TAKEOVER_HOST_WROTE_BACK=0
    outcome=$(takeover_flush_all "$RIG_HOST_SOCK" 60) && TAKEOVER_HOST_WROTE_BACK=1
    drill_log "host thawed and told to write its cache back: $outcome"
    host_kill
}

# After a fenced takeover: the thawed host wrote nothing back, and the
# backing alone holds the peer's pass.
takeover_fenced_holds() {
    [ "$TAKEOVER_HOST_WROTE_BACK" = 0 ] || { drill_log "the fenced host wrote its cache back"; return 1; }
    drill_verify_raid
}

# After a takeover without the fence the check must fail: the thawed
# host's write-back puts older passes over the peer's.
takeover_unfenced_check_fails() {
    [ "$TAKEOVER_HOST_WROTE_BACK" = 1 ] || { drill_log "the host, not fenced, could not write its cache back"; return 1; }
    if drill_verify_raid; then
        drill_log "the backing verified though the host was not fenced: the check cannot tell"
        return 1
    fi
    drill_log "checked: without the fence the backing check fails"
}

# bdev_hhc_flush_all of hhc0 on SOCKET, waited for up to TIMEOUT s; prints
# its outcome and fails unless it completed without errors.
takeover_flush_all() { # socket timeout-s
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
