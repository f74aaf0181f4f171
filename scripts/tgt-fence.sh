#!/usr/bin/env bash
# Fences a lost host off a LUN served by tgt (Debian's userspace iSCSI
# target) before another host takes its HHC volume over (docs/operations.md,
# "The whole host is lost"): the host's initiator name is no longer
# admitted to the target, and each of its sessions is closed, so a host
# that is only cut off (hung, partitioned) and runs on cannot write back
# its stale cache over what the new owner writes.
#
#   scripts/tgt-fence.sh [-C CONTROL_PORT] --tid TID --initiator-name IQN
#
# The target must admit initiators by name alone: tgt lets in an initiator
# that any address ACL matches whatever its name, so a target with an
# address ACL is refused here (unbind it and bind each host's initiator
# name: `tgtadm --lld iscsi --op bind --mode target --tid TID
# --initiator-name IQN`). Prints what it did; fails if the initiator is
# still admitted or still has a session. Run as tgtadm's user (root).

set -u -o pipefail

usage() {
    echo "usage: $0 [-C CONTROL_PORT] --tid TID --initiator-name IQN" >&2
    exit 2
}

control=()
tid=
iqn=
while [ $# -gt 0 ]; do
    case $1 in
        -C | --control-port) [ $# -ge 2 ] || usage; control=(-C "$2"); shift 2 ;;
        --tid) [ $# -ge 2 ] || usage; tid=$2; shift 2 ;;
        --initiator-name) [ $# -ge 2 ] || usage; iqn=$2; shift 2 ;;
        -h | --help) usage ;;
        *) usage ;;
    esac
done
[ -n "$tid" ] && [ -n "$iqn" ] || usage
[[ $tid =~ ^[0-9]+$ ]] || { echo "tgt-fence: --tid $tid: a target id (a number)" >&2; exit 2; }
command -v tgtadm >/dev/null || { echo "tgt-fence: no tgtadm (apt-get install tgt)" >&2; exit 1; }

adm() { timeout 30 tgtadm "${control[@]}" --lld iscsi "$@"; }

# Target TID's section of `--mode target --op show`.
target_show() {
    adm --op show --mode target | awk -v tid="$tid" '
        /^Target [0-9]+:/ { inside = ($2 == tid ":") }
        inside'
}

# The target's ACL entries, one per line.
acl_entries() {
    target_show | awk '
        /^    [A-Z]/ { inside = ($0 ~ /^    ACL information:/); next }
        inside && NF { print $1 }'
}

# "SID CID" of each connection of the initiator's sessions.
sessions_of() {
    target_show | awk -v iqn="$iqn" '
        /I_T nexus: [0-9]+/ { sid = $3; mine = 0 }
        /Initiator: / { mine = ($2 == iqn) }
        /Connection: [0-9]+/ && mine { print sid, $2 }'
}

show=$(target_show) || { echo "tgt-fence: tgtadm could not list the targets (is tgtd running on this control port?)" >&2; exit 1; }
[ -n "$show" ] || { echo "tgt-fence: no target $tid" >&2; exit 1; }
addresses=$(acl_entries | grep -v '^iqn\.\|^eui\.\|^naa\.')
if [ -n "$addresses" ]; then
    echo "tgt-fence: target $tid admits initiators by address ($(echo "$addresses" | paste -sd' ')), whatever their name:" \
        "a fenced host would log in again. Unbind the addresses and bind each host's initiator name instead." >&2
    exit 1
fi
if acl_entries | grep -qxF -- "$iqn"; then
    adm --op unbind --mode target --tid "$tid" --initiator-name "$iqn" ||
        { echo "tgt-fence: unbinding $iqn from target $tid failed" >&2; exit 1; }
    echo "initiator $iqn no longer admitted to target $tid"
else
    echo "initiator $iqn was not admitted to target $tid by name"
fi
if [ -z "$(acl_entries)" ]; then
    # tgt admits nobody then; say it, the takeover's host must be bound.
    echo "target $tid admits no initiator now: bind the new owner's (--op bind --initiator-name)"
fi
closed=0
while read -r sid cid; do
    [ -n "$sid" ] || continue
    adm --op delete --mode conn --tid "$tid" --sid "$sid" --cid "$cid" ||
        { echo "tgt-fence: closing session $sid connection $cid of $iqn failed" >&2; exit 1; }
    closed=$((closed + 1))
done < <(sessions_of)
echo "closed $closed connection(s) of $iqn"
for _ in $(seq 50); do
    [ -z "$(sessions_of)" ] && break
    sleep 0.1
done
if [ -n "$(sessions_of)" ]; then
    echo "tgt-fence: $iqn still has a session on target $tid:" >&2
    sessions_of >&2
    exit 1
fi
if acl_entries | grep -qxF -- "$iqn"; then
    echo "tgt-fence: $iqn is still admitted to target $tid" >&2
    exit 1
fi
echo "fenced: $iqn has no session on target $tid and cannot log in again"
