# The topology rig's devices and engine settings (tests/spdk/rig_bench.sh):
# the same file sets the device-model bdevs' parameters (bdev_hhc_model_create
# takes each section's keys) and the timed simulator's prediction.
# Everything not given is the simulator's default: the paper's testbed
# (docs/simulate.md).

# The backing RAID5 sits behind the rig's real iSCSI (loopback), so its
# model has no link of its own; the simulation then has none either, and
# the rig's iSCSI software path is a difference between the two.
backing.link_mb_s = 0
backing.request_latency_us = 0
# The paper's RAID5 (the simulator's default), stated here because
# rig_bench.sh gives hhc0 its stripe, (disks - 1) x chunk = 256 KiB, as
# bdev_hhc_create's backing_stripe: bdev_iscsi declares none.
backing.disks = 5
backing.chunk_kib = 64

# What the rig's hhc0 runs with: the module's defaults, 256 KiB segments.
engine.writeback_parallelism = 64
engine.segment_kib = 256
