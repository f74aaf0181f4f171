"""rpc.py plugin for the HHC bdev module.

Install it as a package (`pip install ./json-rpc`, see json-rpc/pyproject.toml)
and use it with SPDK's rpc.py or the `spdk` package from PyPI:
    rpc.py --plugin hhc_rpc_plugin bdev_hhc_create ...
    spdk-rpc --plugin hhc_rpc_plugin bdev_hhc_get_bdevs
or, without installing it, put this directory on the path:
    PYTHONPATH=json-rpc rpc.py --plugin hhc_rpc_plugin ...

List options (`--logs` of bdev_hhc_create, `--params` of bdev_hhc_model_create)
take their items space-separated, comma-separated or both:
`--logs hdd0 hdd1`, `--logs hdd0,hdd1` and `--logs hdd0,hdd1 hdd2` all work.
"""

import argparse

POLICIES = ["passthrough", "wt", "wb", "wb-flush", "wb-ordered", "hhc"]
SEQ_CUTOFF_POLICIES = ["never", "full", "always"]
# The options bdev_hhc_set_options changes online; bdev_hhc_create takes them too.
OPTIONS = ["dirty_threshold", "writeback_parallelism", "idle_after_ms", "seq_cutoff_threshold", "seq_cutoff_policy"]


def bdev_hhc_create(client, name, backing, cache=None, logs=None, policy=None, block_size=None,
                    segment_size=None, buffer_count=None, dirty_threshold=None, writeback_parallelism=None,
                    idle_after_ms=None, seq_cutoff_threshold=None, seq_cutoff_policy=None, cpumask=None,
                    barrier_gap=None, backing_stripe=None, log_timeout_ms=None, takeover=None):
    """Create an HHC bdev; returns its name. logs: a list of log mirror bdev names (a comma-separated
    string is split), an empty name for a slot without a mirror. takeover: replay the log the log bdevs
    hold (a lost host's) onto the backing bdev first; returns the name and what was replayed."""
    params = {"name": name, "backing": backing}
    if isinstance(logs, str):
        logs = _split_items([logs])
    optional = {"cache": cache, "logs": logs, "policy": policy, "cpumask": cpumask, "block_size": block_size,
                "segment_size": segment_size,
                "buffer_count": buffer_count, "barrier_gap": barrier_gap, "backing_stripe": backing_stripe,
                "log_timeout_ms": log_timeout_ms, "dirty_threshold": dirty_threshold,
                "writeback_parallelism": writeback_parallelism, "idle_after_ms": idle_after_ms,
                "seq_cutoff_threshold": seq_cutoff_threshold, "seq_cutoff_policy": seq_cutoff_policy,
                "takeover": takeover}
    params.update({k: v for k, v in optional.items() if v is not None})
    return client.call("bdev_hhc_create", params)


def bdev_hhc_delete(client, name):
    """Delete an HHC bdev after a clean shutdown of its cache."""
    return client.call("bdev_hhc_delete", {"name": name})


def bdev_hhc_forget(client, cache, force=None):
    """Make an unused cache bdev forget its HHC bdev (wipes its superblock and owner record), so that no
    start assembles it again; refused without force, since dirty blocks in it would be lost."""
    params = {"cache": cache}
    if force:
        params["force"] = True
    return client.call("bdev_hhc_forget", params)


def bdev_hhc_get_bdevs(client, name=None):
    """List HHC bdevs with policy, devices, health and counters."""
    return client.call("bdev_hhc_get_bdevs", {"name": name} if name else None)


def bdev_hhc_get_stats(client, name):
    """Counters since the last reset, gauges, rates since the last get_stats
    or reset, flush latency, device and mirror health of one HHC bdev."""
    return client.call("bdev_hhc_get_stats", {"name": name})


def bdev_hhc_reset_stats(client, name):
    """Start the counters (and flush latency) of an HHC bdev from zero again."""
    return client.call("bdev_hhc_reset_stats", {"name": name})


def bdev_hhc_set_policy(client, name, policy):
    """Switch the write policy online; answers at once (see policy_target)."""
    return client.call("bdev_hhc_set_policy", {"name": name, "policy": policy})


def bdev_hhc_set_options(client, name, dirty_threshold=None, writeback_parallelism=None, idle_after_ms=None,
                         seq_cutoff_threshold=None, seq_cutoff_policy=None):
    """Change an HHC bdev's tunables online, all given or none; answers the options in force."""
    params = {"name": name}
    optional = {"dirty_threshold": dirty_threshold, "writeback_parallelism": writeback_parallelism,
                "idle_after_ms": idle_after_ms, "seq_cutoff_threshold": seq_cutoff_threshold,
                "seq_cutoff_policy": seq_cutoff_policy}
    params.update({k: v for k, v in optional.items() if v is not None})
    return client.call("bdev_hhc_set_options", params)


def bdev_hhc_flush_all(client, name):
    """Write back every dirty block, keeping it cached; answers at once."""
    return client.call("bdev_hhc_flush_all", {"name": name})


def bdev_hhc_attach_log(client, name, log):
    """Attach a log mirror in a slot whose bdev is gone; it re-syncs."""
    return client.call("bdev_hhc_attach_log", {"name": name, "log": log})


def bdev_hhc_detach_log(client, name, log):
    """Stop using a log mirror and release its bdev."""
    return client.call("bdev_hhc_detach_log", {"name": name, "log": log})


def bdev_hhc_recover(client, name, mode, cache=None):
    """After the cache bdev was lost and the log replayed: bring the HHC bdev
    back (mode passthrough, or cache onto a fresh cache bdev), or replay again
    after a failed replay (mode replay)."""
    params = {"name": name, "mode": mode}
    if cache is not None:
        params["cache"] = cache
    return client.call("bdev_hhc_recover", params)


MODELS = ["hdd", "ssd", "raid5"]


def bdev_hhc_model_create(client, name, base_bdev_name, model, params=None):
    """Create a test-only device-model bdev over base_bdev_name: I/O completes when the timed simulator's
    model of an HDD, SSD or RAID5 says so (and not before the base bdev). params: {key: number} overriding
    the profile defaults of that kind (keys of `hhc simulate --print-profile`, section prefix optional)."""
    request = {"name": name, "base_bdev_name": base_bdev_name, "model": model}
    if isinstance(params, (str, list)):
        params = _model_params(params)
    if params:
        request["params"] = params
    return client.call("bdev_hhc_model_create", request)


def bdev_hhc_model_delete(client, name):
    """Delete a device-model bdev (its base bdev stays)."""
    return client.call("bdev_hhc_model_delete", {"name": name})


def bdev_hhc_model_get_stats(client, name):
    """Commands, model busy time, latency and delay added, queue depth of a device-model bdev."""
    return client.call("bdev_hhc_model_get_stats", {"name": name})


def _split_items(values):
    """The items of a list option: every value split at its commas, so that
    ["hdd0", "hdd1"], ["hdd0,hdd1"] and ["hdd0,hdd1", "hdd2"] are lists of
    names alike. An empty item stays (an empty log name keeps a mirror slot
    free); a list that is one empty string is no list at all (`--logs ''`)."""
    items = [item for value in values for item in value.split(",")]
    return [] if items == [""] else items


def _model_params(items):
    """key=value items (or one key=value[,key=value...] string) -> {key: number}."""
    if isinstance(items, str):
        items = [items]
    params = {}
    for item in filter(None, _split_items(items or [])):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError("expected key=value, got '%s'" % item)
        try:
            params[key.strip()] = float(value)
        except ValueError:
            raise ValueError("%s: expected a number, got '%s'" % (key.strip(), value))
    return params


class _ListAction(argparse.Action):
    """A list option (nargs='+'): `--logs hdd0 hdd1`, `--logs hdd0,hdd1` and
    `--logs hdd0,hdd1 hdd2` give the same kind of list; given twice, the
    lists are joined. Stores None for `--logs ''`, as if it was not given."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = (getattr(namespace, self.dest, None) or []) + _split_items(values)
        setattr(namespace, self.dest, items or None)


class _KeyValuesAction(argparse.Action):
    """A list of key=value items with numbers (nargs='+'), space- or
    comma-separated, into {key: number}; a malformed item is a usage error."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            params = _model_params(values)
        except ValueError as error:
            raise argparse.ArgumentError(self, str(error))
        setattr(namespace, self.dest, {**(getattr(namespace, self.dest, None) or {}), **params} or None)


def _print(result):
    import json
    print(json.dumps(result, indent=2))


def _add_options(p, defaults):
    """The tunables, for bdev_hhc_create (with their defaults) and bdev_hhc_set_options."""
    def default(text):
        return " (default %s)" % text if defaults else " (left as it is when not given)"
    p.add_argument("--dirty-threshold", type=int, dest="dirty_threshold",
                   help="background write-back keeps dirty blocks under this percent of the cache, 1..100"
                   + default("30"))
    p.add_argument("--writeback-parallelism", type=int, dest="writeback_parallelism",
                   help="most write-backs in flight, 1..1024; the staging pool is sized for the value given at "
                   "create, which bdev_hhc_set_options may lower and raise again up to" + default("64"))
    p.add_argument("--idle-after-ms", type=int, dest="idle_after_ms",
                   help="the bdev counts as idle (write-back at full parallelism) after this many ms without "
                   "a request, at least 1" + default("50"))
    p.add_argument("--seq-cutoff-threshold", type=int, dest="seq_cutoff_threshold",
                   help="bytes a sequential stream (requests each starting where the last ended) must reach "
                   "before it bypasses the cache, 65536..4294967296" + default("4194304, as bcache"))
    p.add_argument("--seq-cutoff-policy", choices=SEQ_CUTOFF_POLICIES, dest="seq_cutoff_policy",
                   help="when a stream over the threshold bypasses the cache: never, full (only while the cache "
                   "is full, as OCF), always (as bcache); reads then fill nothing, writes go to the backing bdev "
                   "alone unless a block of theirs is dirty or logged" + default("never"))


def _options_of(args):
    return {k: getattr(args, k) for k in OPTIONS}


def spdk_rpc_plugin_initialize(subparsers):
    def create(args):
        _print(bdev_hhc_create(args.client, name=args.name, backing=args.backing, cache=args.cache, logs=args.logs,
                               policy=args.policy, block_size=args.block_size, segment_size=args.segment_size,
                               buffer_count=args.buffer_count, barrier_gap=args.barrier_gap,
                               backing_stripe=args.backing_stripe, log_timeout_ms=args.log_timeout_ms,
                               cpumask=args.cpumask, takeover=args.takeover or None, **_options_of(args)))

    p = subparsers.add_parser("bdev_hhc_create", help="Create an HHC bdev: an SSD write-back cache in front of a "
                              "backing bdev, with dirty blocks mirrored into a log on HDD bdevs")
    p.add_argument("-b", "--name", required=True, help="name of the new HHC bdev")
    p.add_argument("--backing", required=True, help="backing bdev (e.g. the iSCSI RAID); its size is the HHC size")
    p.add_argument("--cache", help="cache bdev (SSD); formatted on first use, reopened warm later; only policy "
                   "passthrough without logs goes without one (requests straight to the backing bdev)")
    p.add_argument("--logs", nargs="+", action=_ListAction, metavar="LOG",
                   help="log mirror bdevs (HDDs), one per mirror slot, space- or comma-separated (--logs hdd0 hdd1, "
                   "--logs hdd0,hdd1); an empty name keeps a slot without a mirror (a detached one's, for "
                   "bdev_hhc_attach_log), e.g. --logs hdd0,,hdd2; policy hhc needs at least one")
    p.add_argument("--policy", choices=POLICIES, help="write policy (default hhc)")
    p.add_argument("--cpumask", help="cores the bdev's owner thread (its engine and base I/O) may run on, e.g. 0x2 "
                   "(default: the thread of the create call, the app thread)")
    p.add_argument("--block-size", type=int, dest="block_size",
                   help="cache block size in bytes = the HHC bdev's block size, power of two 4096..65536 "
                   "(default 4096)")
    p.add_argument("--segment-size", type=int, dest="segment_size",
                   help="log segment size in bytes (default 1 MiB)")
    p.add_argument("--buffer-count", type=int, dest="buffer_count",
                   help="segment buffers in the log pool, at least 2 (default 0: 16, or an eighth of the log's segments if fewer)")
    p.add_argument("--barrier-gap", type=int, dest="barrier_gap",
                   help="log bytes left after a barrier part when that makes the next one faster (a rotating log), "
                   "a multiple of the block size, 0 for never (default 131072)")
    p.add_argument("--backing-stripe", type=int, dest="backing_stripe",
                   help="the backing RAID's full stripe in bytes (data bytes, parity left out), for a backing bdev "
                   "that declares none (bdev_iscsi): write-back runs then fill whole stripes; a multiple of the "
                   "block size, at most 1048576, 0 for none (default: the backing bdev's optimal I/O boundary)")
    p.add_argument("--log-timeout-ms", type=int, dest="log_timeout_ms",
                   help="a log mirror that leaves a command unanswered this many ms counts as failed (a hung disk, "
                   "a frozen peer host); 0 for never (default 10000)")
    p.add_argument("--takeover", action="store_true",
                   help="the log bdevs hold the log of this volume's HHC bdev on a host that is gone: replay it onto "
                   "the backing bdev, then format the cache and the logs and serve (docs/operations.md, \"The whole "
                   "host is lost\"); power the lost host off first")
    _add_options(p, defaults=True)
    p.set_defaults(func=create)

    def delete(args):
        _print(bdev_hhc_delete(args.client, name=args.name))

    p = subparsers.add_parser("bdev_hhc_delete", help="Delete an HHC bdev (clean shutdown; the cache stays warm "
                              "on the cache bdev)")
    p.add_argument("name", help="name of the HHC bdev")
    p.set_defaults(func=delete)

    def forget(args):
        _print(bdev_hhc_forget(args.client, cache=args.cache, force=args.force))

    p = subparsers.add_parser("bdev_hhc_forget", help="Make an unused cache bdev forget its HHC bdev: wipes its "
                              "HHC superblock and owner record, so that no start assembles the HHC bdev again. "
                              "Refused without --force: dirty blocks in the cache would be lost")
    p.add_argument("-c", "--cache", required=True, help="the cache bdev (not in use by an HHC bdev)")
    p.add_argument("--force", action="store_true", help="forget even though dirty blocks in it are lost")
    p.set_defaults(func=forget)

    def get_bdevs(args):
        _print(bdev_hhc_get_bdevs(args.client, name=args.name))

    p = subparsers.add_parser("bdev_hhc_get_bdevs", help="Show HHC bdevs: policy, devices, health, counters")
    p.add_argument("-b", "--name", help="only this HHC bdev")
    p.set_defaults(func=get_bdevs)

    def get_stats(args):
        _print(bdev_hhc_get_stats(args.client, name=args.name))

    p = subparsers.add_parser("bdev_hhc_get_stats", help="Show an HHC bdev's counters (since the last reset), "
                              "gauges, rates (per second since the previous get_stats or reset, over "
                              "rates.window_ms), flush latency p50/p99/max in us, policy switch and flush_all "
                              "progress, device and log mirror health")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    p.set_defaults(func=get_stats)

    def reset_stats(args):
        _print(bdev_hhc_reset_stats(args.client, name=args.name))

    p = subparsers.add_parser("bdev_hhc_reset_stats", help="Start an HHC bdev's counters and flush latency from "
                              "zero (gauges such as dirty_blocks are not reset)")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    p.set_defaults(func=reset_stats)

    def set_policy(args):
        _print(bdev_hhc_set_policy(args.client, name=args.name, policy=args.policy))

    p = subparsers.add_parser("bdev_hhc_set_policy", help="Switch an HHC bdev's write policy while it serves I/O. "
                              "Leaving a write-back policy for wt or passthrough first writes back every dirty "
                              "block: the call answers at once with complete=false and policy_target set; "
                              "bdev_hhc_get_stats shows policy_target until the switch is complete")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    p.add_argument("-p", "--policy", required=True, choices=POLICIES, help="the new write policy")
    p.set_defaults(func=set_policy)

    def set_options(args):
        _print(bdev_hhc_set_options(args.client, name=args.name, **_options_of(args)))

    p = subparsers.add_parser("bdev_hhc_set_options", help="Change an HHC bdev's tunables while it serves I/O: "
                              "the dirty threshold, the write-back depth, the idle time and the sequential "
                              "cutoff. All the options given change, or none (an error names the bad one); "
                              "answers the options in force, which save_config records")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    _add_options(p, defaults=False)
    p.set_defaults(func=set_options)

    def flush_all(args):
        _print(bdev_hhc_flush_all(args.client, name=args.name))

    p = subparsers.add_parser("bdev_hhc_flush_all", help="Write back every block dirty now to the backing bdev, "
                              "keeping it in the cache (clean). Answers at once; bdev_hhc_get_stats shows "
                              "flush_all_in_progress and flush_all_blocks_remaining")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    p.set_defaults(func=flush_all)

    def attach_log(args):
        _print(bdev_hhc_attach_log(args.client, name=args.name, log=args.log))

    p = subparsers.add_parser("bdev_hhc_attach_log", help="Attach a bdev as a log mirror of an HHC bdev, in the "
                              "first slot whose bdev was removed or detached (the number of mirrors is fixed at "
                              "create). It is formatted and re-synced: bdev_hhc_get_stats shows its mirror "
                              "'syncing' and segments_behind until it is 'healthy'")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    p.add_argument("-l", "--log", required=True, help="the log bdev (at least as large as the log)")
    p.set_defaults(func=attach_log)

    def detach_log(args):
        _print(bdev_hhc_detach_log(args.client, name=args.name, log=args.log))

    p = subparsers.add_parser("bdev_hhc_detach_log", help="Stop using a log mirror of an HHC bdev and release "
                              "its bdev; the last healthy mirror under policy hhc is refused (switch the policy "
                              "first)")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    p.add_argument("-l", "--log", required=True, help="the log bdev to detach")
    p.set_defaults(func=detach_log)

    def recover(args):
        _print(bdev_hhc_recover(args.client, name=args.name, mode=args.mode, cache=args.cache))

    p = subparsers.add_parser("bdev_hhc_recover", help="After an HHC bdev lost its cache bdev and its log was "
                              "replayed onto the backing bdev (bdev_hhc_get_stats: state recovered, recovery.stage "
                              "done): bring it back under the same name as a passthrough over the backing bdev "
                              "(-m passthrough), or as a new HHC bdev over the backing bdev, a fresh cache bdev "
                              "(formatted, starting empty) and the surviving log mirrors (formatted) (-m cache "
                              "--cache BDEV); answers once the bdev is registered. After a failed replay "
                              "(recovery_failed), -m replay runs the scan and replay again")
    p.add_argument("-b", "--name", required=True, help="name of the HHC bdev")
    p.add_argument("-m", "--mode", required=True, choices=["passthrough", "cache", "replay"], help="what to do")
    p.add_argument("-c", "--cache", help="the fresh cache bdev (mode cache)")
    p.set_defaults(func=recover)

    def model_create(args):
        _print(bdev_hhc_model_create(args.client, name=args.name, base_bdev_name=args.base_bdev_name,
                                     model=args.model, params=args.params))

    p = subparsers.add_parser("bdev_hhc_model_create", help="TEST ONLY: create a device-model bdev over a base "
                              "bdev. Every I/O is forwarded to the base and completes at the later of the base's "
                              "completion and the completion the timed simulator's model gives it (one head for "
                              "all threads): hdd = one 7200 rpm disk (seek, rotation, transfer, write cache off), "
                              "ssd = a SATA SSD, raid5 = MD RAID5 of such HDDs behind a 1 GbE iSCSI link "
                              "(link_mb_s=0,request_latency_us=0: the disks alone). FLUSH costs what the model "
                              "says. save_config records the call. Needs the target to have loaded "
                              "libspdk_bdev_hhc_model.so (LD_PRELOAD); HHC's own module has no such bdev")
    p.add_argument("-b", "--name", required=True, help="name of the new bdev")
    p.add_argument("--base-bdev", "--base-bdev-name", dest="base_bdev_name", required=True,
                   help="the bdev that stores the data (claimed)")
    p.add_argument("-m", "--model", required=True, choices=MODELS, help="device model")
    p.add_argument("-p", "--params", nargs="+", action=_KeyValuesAction, metavar="KEY=VALUE",
                   help="overrides of the profile defaults, key=value items space- or comma-separated, keys as "
                   "in `hhc simulate --print-profile` without or with their section (hdd: log_hdd.*, ssd: "
                   "ssd.*, raid5: backing.*, its disks disk.*), e.g. rpm=5400 capacity_gb=0.064 or "
                   "rpm=5400,capacity_gb=0.064")
    p.set_defaults(func=model_create)

    def model_delete(args):
        _print(bdev_hhc_model_delete(args.client, name=args.name))

    p = subparsers.add_parser("bdev_hhc_model_delete", help="TEST ONLY: delete a device-model bdev; its base "
                              "bdev stays, released")
    p.add_argument("name", help="name of the device-model bdev")
    p.set_defaults(func=model_delete)

    def model_get_stats(args):
        _print(bdev_hhc_model_get_stats(args.client, name=args.name))

    p = subparsers.add_parser("bdev_hhc_model_get_stats", help="TEST ONLY: a device-model bdev's counters since "
                              "creation: commands (reads, writes, flushes), busy_ns (time the model had a command "
                              "in service), model_latency_avg_us, latency_avg_us (submission to completion), "
                              "delay_added_avg_us / delay_added_max_us (held after the base was done), "
                              "queue_depth (now) and queue_depth_max")
    p.add_argument("-b", "--name", required=True, help="name of the device-model bdev")
    p.set_defaults(func=model_get_stats)
