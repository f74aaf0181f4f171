/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * Base bdevs of an HHC bdev (backing, cache, log mirrors): opened and
 * claimed for module hhc, I/O at byte offsets with -ENOMEM waits, hot-remove
 * events, and a close that waits for the I/O still out. The per-I/O
 * contexts come from one pool per HHC bdev, allocated at creation with as
 * many as the engine can have commands in flight, so the data path never
 * allocates them. A lane (a request thread's own channels to the backing
 * and cache bdevs, with a pool of its own) starts I/O through the same
 * contexts.
 */

#include "hhc_glue_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spdk/bdev.h"
#include "spdk/likely.h"
#include "spdk/log.h"
#include "spdk/string.h"
#include "spdk/thread.h"
#include "spdk/util.h"

/* Most I/Os carry one or two iovecs; more than this take a heap array. */
#define HHC_INLINE_IOVS 8

struct hhc_dev_io {
	struct hhc_glue_io_pool *pool;
	/* Exactly one of base and lane: who started the I/O and hears of it. */
	struct hhc_glue_base *base;
	struct hhc_glue_lane *lane;
	uint32_t lane_slot;
	struct spdk_bdev_desc *desc;
	struct spdk_io_channel *channel;
	struct spdk_bdev *bdev;
	uint32_t block_shift;
	enum hhc_glue_io_kind kind;
	uint64_t offset_bytes;
	uint64_t len_bytes;
	uint64_t tag;
	/* When HHC handed it over (hhc_glue_now_ns): its latency is timed from here. */
	uint64_t start_ns;
	int iovs_count;
	struct iovec *iovs;
	struct iovec inline_iovs[HHC_INLINE_IOVS];
	struct spdk_bdev_io_wait_entry wait;
	/* The pool's free list, or a lane's commands taken but not started. */
	struct hhc_dev_io *next_free;
};

/* Shared by the bases of one HHC bdev; freed when the node and every base
 * that used it have let it go (a closing base may outlive the node's
 * reference while its last I/Os drain). */
struct hhc_glue_io_pool {
	struct hhc_dev_io *ios;
	struct hhc_dev_io *free_ios;
	uint32_t count;
	uint32_t in_use;
	uint32_t references;
};

struct hhc_glue_base {
	struct spdk_bdev_desc *desc;
	struct spdk_bdev *bdev;
	/* log2 of its block size: byte offsets to blocks without a division. */
	uint32_t block_shift;
	struct spdk_io_channel *channel;
	void *rs_base;
	/* I/Os started and not yet completed (including -ENOMEM waiters). */
	uint64_t outstanding;
	bool closing;
	struct hhc_glue_io_pool *pool;
};

struct hhc_glue_io_pool *
hhc_glue_io_pool_create(uint32_t count)
{
	struct hhc_glue_io_pool *pool = calloc(1, sizeof(*pool));
	uint32_t i;

	if (pool == NULL) {
		return NULL;
	}
	pool->ios = calloc(count, sizeof(*pool->ios));
	if (pool->ios == NULL && count > 0) {
		free(pool);
		return NULL;
	}
	for (i = 0; i < count; i++) {
		pool->ios[i].next_free = pool->free_ios;
		pool->free_ios = &pool->ios[i];
	}
	pool->count = count;
	pool->references = 1;
	return pool;
}

void
hhc_glue_io_pool_put(struct hhc_glue_io_pool *pool)
{
	assert(pool->references > 0);
	if (--pool->references == 0) {
		assert(pool->in_use == 0);
		free(pool->ios);
		free(pool);
	}
}

uint32_t
hhc_glue_io_pool_in_use(const struct hhc_glue_io_pool *pool)
{
	return pool->in_use;
}

void
hhc_glue_base_use_pool(struct hhc_glue_base *base, struct hhc_glue_io_pool *pool)
{
	assert(base->pool == NULL && base->outstanding == 0);
	pool->references++;
	base->pool = pool;
}

static void base_finish_close(struct hhc_glue_base *base);

static void
base_event_cb(enum spdk_bdev_event_type type, struct spdk_bdev *bdev, void *event_ctx)
{
	struct hhc_glue_base *base = event_ctx;

	if (type != SPDK_BDEV_EVENT_REMOVE) {
		SPDK_NOTICELOG("hhc: ignoring event %d on bdev %s\n", type, spdk_bdev_get_name(bdev));
		return;
	}
	if (!base->closing) {
		hhc_rs_base_removed(base->rs_base);
	}
}

bool
hhc_glue_bdev_exists(const char *name)
{
	return spdk_bdev_get_by_name(name) != NULL;
}

int
hhc_glue_base_open(const char *name, void *rs_base, struct hhc_glue_base **out)
{
	struct hhc_glue_base *base = calloc(1, sizeof(*base));
	int rc;

	if (base == NULL) {
		return -ENOMEM;
	}
	base->rs_base = rs_base;
	rc = spdk_bdev_open_ext(name, true, base_event_cb, base, &base->desc);
	if (rc != 0) {
		free(base);
		return rc;
	}
	base->bdev = spdk_bdev_desc_get_bdev(base->desc);
	/* A power of two: the Rust side refuses other block sizes. */
	base->block_shift = spdk_u32log2(spdk_bdev_get_block_size(base->bdev));
	rc = spdk_bdev_module_claim_bdev(base->bdev, base->desc, &g_hhc_module);
	if (rc != 0) {
		spdk_bdev_close(base->desc);
		free(base);
		return rc;
	}
	*out = base;
	return 0;
}

void
hhc_glue_base_get_info(const struct hhc_glue_base *base, struct hhc_glue_base_info *info)
{
	info->block_size = spdk_bdev_get_block_size(base->bdev);
	info->blocks_count = spdk_bdev_get_num_blocks(base->bdev);
	info->required_alignment_log2 = spdk_u32log2(spdk_bdev_get_buf_align(base->bdev));
	info->supports_flush = spdk_bdev_io_type_supported(base->bdev, SPDK_BDEV_IO_TYPE_FLUSH);
	info->volatile_write_cache = spdk_bdev_has_write_cache(base->bdev);
	info->optimal_io_boundary = spdk_bdev_get_optimal_io_boundary(base->bdev);
}

int
hhc_glue_base_get_channel(struct hhc_glue_base *base)
{
	base->channel = spdk_bdev_get_io_channel(base->desc);
	return base->channel == NULL ? -ENOMEM : 0;
}

static struct hhc_dev_io *
dev_io_get(struct hhc_glue_io_pool *pool)
{
	struct hhc_dev_io *io = pool->free_ios;

	if (io == NULL) {
		return NULL;
	}
	pool->free_ios = io->next_free;
	pool->in_use++;
	io->pool = pool;
	io->base = NULL;
	io->lane = NULL;
	return io;
}

static void
dev_io_put(struct hhc_dev_io *io)
{
	struct hhc_glue_io_pool *pool = io->pool;

	if (io->iovs != io->inline_iovs) {
		free(io->iovs);
	}
	io->iovs = NULL;
	io->next_free = pool->free_ios;
	pool->free_ios = io;
	pool->in_use--;
}

static void lane_command_done(struct hhc_glue_lane *lane, uint32_t slot);

/* Hands a finished I/O to Rust unless the base is already closed. */
static void
dev_io_finish(struct hhc_dev_io *io, int status)
{
	struct hhc_glue_base *base = io->base;
	struct hhc_glue_lane *lane = io->lane;
	uint32_t slot = io->lane_slot;
	uint64_t tag = io->tag;
	enum hhc_glue_io_kind kind = io->kind;
	uint64_t latency_ns = hhc_glue_now_ns() - io->start_ns;

	dev_io_put(io);
	if (lane != NULL) {
		lane_command_done(lane, slot);
		hhc_rs_lane_io_done(lane->rs_channel, tag, status, kind, latency_ns);
		return;
	}
	base->outstanding--;
	if (!base->closing) {
		hhc_rs_base_io_done(base->rs_base, tag, status, kind, latency_ns);
	} else if (base->outstanding == 0) {
		base_finish_close(base);
	}
}

static void
dev_io_complete_cb(struct spdk_bdev_io *bdev_io, bool success, void *cb_arg)
{
	spdk_bdev_free_io(bdev_io);
	dev_io_finish(cb_arg, success ? 0 : -EIO);
}

/* Byte offsets and lengths as blocks of a bdev with 1 << block_shift
 * byte blocks; false if either is not whole blocks (what SPDK's byte
 * calls refuse with -EINVAL). The block calls skip their division. */
static bool
bytes_to_blocks(uint32_t block_shift, uint64_t offset_bytes, uint64_t len_bytes, uint64_t *offset_blocks,
		uint64_t *blocks_count)
{
	if (spdk_unlikely(((offset_bytes | len_bytes) & ((1ULL << block_shift) - 1)) != 0)) {
		return false;
	}
	*offset_blocks = offset_bytes >> block_shift;
	*blocks_count = len_bytes >> block_shift;
	return true;
}

static int
dev_io_start(struct hhc_dev_io *io)
{
	uint64_t offset_blocks = 0, blocks_count = 0;

	/* A FLUSH covers the whole bdev, whatever its range. */
	if (io->kind != HHC_GLUE_IO_FLUSH &&
	    !bytes_to_blocks(io->block_shift, io->offset_bytes, io->len_bytes, &offset_blocks, &blocks_count)) {
		return -EINVAL;
	}
	switch (io->kind) {
	case HHC_GLUE_IO_READ:
		return spdk_bdev_readv_blocks(io->desc, io->channel, io->iovs, io->iovs_count, offset_blocks,
					      blocks_count, dev_io_complete_cb, io);
	case HHC_GLUE_IO_WRITE:
		return spdk_bdev_writev_blocks(io->desc, io->channel, io->iovs, io->iovs_count, offset_blocks,
					       blocks_count, dev_io_complete_cb, io);
	case HHC_GLUE_IO_FLUSH:
		return spdk_bdev_flush_blocks(io->desc, io->channel, 0, spdk_bdev_get_num_blocks(io->bdev),
					      dev_io_complete_cb, io);
	case HHC_GLUE_IO_RESET:
		/* The engine never resets a base bdev. */
		break;
	}
	return -EINVAL;
}

static void
dev_io_fail_msg(void *arg)
{
	dev_io_finish(arg, -EIO);
}

static void dev_io_retry(void *arg);

static int
dev_io_wait(struct hhc_dev_io *io)
{
	io->wait.bdev = io->bdev;
	io->wait.cb_fn = dev_io_retry;
	io->wait.cb_arg = io;
	return spdk_bdev_queue_io_wait(io->bdev, io->channel, &io->wait);
}

/* Runs from the bdev layer once an spdk_bdev_io is free again. A failure
 * here is reported through a message, so Rust is never re-entered from a
 * call it made itself. */
static void
dev_io_retry(void *arg)
{
	struct hhc_dev_io *io = arg;
	int rc = dev_io_start(io);

	if (rc == -ENOMEM) {
		rc = dev_io_wait(io);
	}
	if (rc != 0) {
		SPDK_ERRLOG("hhc: resubmitting I/O to %s failed: %s\n", spdk_bdev_get_name(io->bdev),
			    spdk_strerror(-rc));
		spdk_thread_send_msg(spdk_get_thread(), dev_io_fail_msg, io);
	}
}

/* Fills `io`; on error it is back in its pool. */
static int
dev_io_fill(struct hhc_dev_io *io, enum hhc_glue_io_kind kind, uint64_t offset_bytes, uint64_t len_bytes,
	    const struct iovec *iovs, int iovs_count, uint64_t tag)
{
	io->kind = kind;
	io->offset_bytes = offset_bytes;
	io->len_bytes = len_bytes;
	io->tag = tag;
	io->start_ns = hhc_glue_now_ns();
	io->iovs_count = iovs_count;
	io->iovs = iovs_count <= HHC_INLINE_IOVS ? io->inline_iovs : calloc(iovs_count, sizeof(*iovs));
	if (io->iovs == NULL) {
		io->iovs = io->inline_iovs;
		dev_io_put(io);
		return -ENOMEM;
	}
	if (iovs_count > 0) {
		memcpy(io->iovs, iovs, iovs_count * sizeof(*iovs));
	}
	return 0;
}

/* Starts a filled `io`, waiting for the bdev layer on -ENOMEM. */
static int
dev_io_start_or_wait(struct hhc_dev_io *io)
{
	int rc = dev_io_start(io);

	if (rc == -ENOMEM) {
		rc = dev_io_wait(io);
	}
	return rc;
}

/* Fills `io` and starts it; on error it is back in its pool. */
static int
dev_io_submit(struct hhc_dev_io *io, enum hhc_glue_io_kind kind, uint64_t offset_bytes, uint64_t len_bytes,
	      const struct iovec *iovs, int iovs_count, uint64_t tag)
{
	int rc = dev_io_fill(io, kind, offset_bytes, len_bytes, iovs, iovs_count, tag);

	if (rc != 0) {
		return rc;
	}
	rc = dev_io_start_or_wait(io);
	if (rc != 0) {
		dev_io_put(io);
	}
	return rc;
}

int
hhc_glue_base_submit(struct hhc_glue_base *base, enum hhc_glue_io_kind kind, uint64_t offset_bytes,
		     uint64_t len_bytes, const struct iovec *iovs, int iovs_count, uint64_t tag)
{
	struct hhc_dev_io *io;
	int rc;

	if (base->closing || base->channel == NULL || base->pool == NULL || iovs_count < 0) {
		return -ENODEV;
	}
	io = dev_io_get(base->pool);
	if (io == NULL) {
		SPDK_ERRLOG("hhc: all %u I/O contexts are in use (%s)\n", base->pool->count,
			    spdk_bdev_get_name(base->bdev));
		return -ENOMEM;
	}
	io->base = base;
	io->desc = base->desc;
	io->channel = base->channel;
	io->bdev = base->bdev;
	io->block_shift = base->block_shift;
	rc = dev_io_submit(io, kind, offset_bytes, len_bytes, iovs, iovs_count, tag);
	if (rc == 0) {
		base->outstanding++;
	}
	return rc;
}

static void
base_finish_close(struct hhc_glue_base *base)
{
	if (base->channel != NULL) {
		spdk_put_io_channel(base->channel);
	}
	spdk_bdev_close(base->desc);
	if (base->pool != NULL) {
		hhc_glue_io_pool_put(base->pool);
	}
	free(base);
}

void
hhc_glue_base_close(struct hhc_glue_base *base)
{
	base->closing = true;
	spdk_bdev_module_release_bdev(base->bdev);
	if (base->outstanding == 0) {
		base_finish_close(base);
	}
}

/* ------------------------------------------------------------------ */
/* lanes: a request thread's own channels to the backing and cache     */
/* ------------------------------------------------------------------ */

static void
lane_put_channel(struct hhc_glue_lane *lane, uint32_t slot)
{
	if (lane->channels[slot] != NULL) {
		spdk_put_io_channel(lane->channels[slot]);
		lane->channels[slot] = NULL;
	}
}

static void
lane_command_done(struct hhc_glue_lane *lane, uint32_t slot)
{
	assert(lane->in_flight[slot] > 0);
	if (--lane->in_flight[slot] == 0 && lane->dropped[slot]) {
		lane_put_channel(lane, slot);
	}
}

void
hhc_glue_lane_drop(struct hhc_glue_lane *lane, uint32_t slot)
{
	if (slot >= HHC_GLUE_LANE_SLOTS) {
		return;
	}
	lane->dropped[slot] = true;
	if (lane->in_flight[slot] == 0) {
		lane_put_channel(lane, slot);
	}
}

struct hhc_glue_lane *
hhc_glue_lane_create(void *rs_channel, uint32_t count)
{
	struct hhc_glue_lane *lane = calloc(1, sizeof(*lane));

	if (lane == NULL) {
		return NULL;
	}
	lane->pool = hhc_glue_io_pool_create(count);
	if (lane->pool == NULL) {
		free(lane);
		return NULL;
	}
	lane->rs_channel = rs_channel;
	lane->pending_tail = &lane->pending;
	return lane;
}

void
hhc_glue_lane_destroy(struct hhc_glue_lane *lane)
{
	uint32_t slot;

	assert(lane->pending == NULL);
	for (slot = 0; slot < HHC_GLUE_LANE_SLOTS; slot++) {
		assert(lane->in_flight[slot] == 0);
		lane_put_channel(lane, slot);
	}
	hhc_glue_io_pool_put(lane->pool);
	free(lane);
}

/* The lane's channel for `slot` of `base`, taken at first use; NULL when
 * SPDK has none to give. */
static struct spdk_io_channel *
lane_channel(struct hhc_glue_lane *lane, uint32_t slot, struct hhc_glue_base *base)
{
	if (lane->dropped[slot]) {
		return NULL;
	}
	if (lane->channels[slot] == NULL) {
		lane->channels[slot] = spdk_bdev_get_io_channel(base->desc);
	}
	return lane->channels[slot];
}

int
hhc_glue_lane_submit(struct hhc_glue_lane *lane, uint32_t slot, struct hhc_glue_base *base,
		     enum hhc_glue_io_kind kind, uint64_t offset_bytes, uint64_t len_bytes,
		     const struct iovec *iovs, int iovs_count, uint64_t tag)
{
	struct hhc_dev_io *io;
	int rc;

	if (slot >= HHC_GLUE_LANE_SLOTS || base->closing || iovs_count < 0 || lane_channel(lane, slot, base) == NULL) {
		return -EAGAIN;
	}
	io = dev_io_get(lane->pool);
	if (io == NULL) {
		return -EAGAIN;
	}
	io->lane = lane;
	io->lane_slot = slot;
	io->desc = base->desc;
	io->channel = lane->channels[slot];
	io->bdev = base->bdev;
	io->block_shift = base->block_shift;
	rc = dev_io_fill(io, kind, offset_bytes, len_bytes, iovs, iovs_count, tag);
	if (rc != 0) {
		return rc;
	}
	lane->in_flight[slot]++;
	io->next_free = NULL;
	*lane->pending_tail = io;
	lane->pending_tail = &io->next_free;
	return 0;
}

void
hhc_glue_lane_start(struct hhc_glue_lane *lane)
{
	struct hhc_dev_io *io = lane->pending;

	lane->pending = NULL;
	lane->pending_tail = &lane->pending;
	while (io != NULL) {
		struct hhc_dev_io *next = io->next_free;
		int rc = dev_io_start_or_wait(io);

		if (rc != 0) {
			/* Its caller has left; it hears of the failure as of a completion. */
			SPDK_ERRLOG("hhc: starting I/O on %s failed: %s\n", spdk_bdev_get_name(io->bdev),
				    spdk_strerror(-rc));
			spdk_thread_send_msg(spdk_get_thread(), dev_io_fail_msg, io);
		}
		io = next;
	}
}

/* The driver context of a bypassed request: what a retry after -ENOMEM
 * needs. */
struct hhc_bypass_ctx {
	struct hhc_glue_lane *lane;
	struct hhc_glue_base *backing;
	struct spdk_io_channel *channel;
	enum hhc_glue_io_kind kind;
	uint64_t offset_bytes;
	uint64_t len_bytes;
	uint64_t start_ns;
	struct spdk_bdev_io_wait_entry wait;
};

static void bypass_retry(void *arg);

static void
bypass_done(struct spdk_bdev_io *base_io, bool success, void *cb_arg)
{
	struct spdk_bdev_io *io = cb_arg;
	struct hhc_bypass_ctx *ctx = (struct hhc_bypass_ctx *)io->driver_ctx;

	spdk_bdev_free_io(base_io);
	lane_command_done(ctx->lane, 0);
	hhc_rs_bypass_done(ctx->lane->rs_channel, (struct hhc_glue_io *)io, ctx->kind, success ? 0 : -EIO,
			   hhc_glue_now_ns() - ctx->start_ns);
}

/* Starts a bypassed request on the backing bdev; -ENOMEM waits for a
 * free spdk_bdev_io (spdk_bdev_queue_io_wait) and tries again. */
static int
bypass_start(struct spdk_bdev_io *io)
{
	struct hhc_bypass_ctx *ctx = (struct hhc_bypass_ctx *)io->driver_ctx;
	struct hhc_glue_base *backing = ctx->backing;
	uint64_t offset_blocks = 0, blocks_count = 0;
	int rc = -EINVAL;

	if (ctx->kind != HHC_GLUE_IO_FLUSH &&
	    !bytes_to_blocks(backing->block_shift, ctx->offset_bytes, ctx->len_bytes, &offset_blocks, &blocks_count)) {
		return -EINVAL;
	}
	switch (ctx->kind) {
	case HHC_GLUE_IO_READ:
		rc = spdk_bdev_readv_blocks(backing->desc, ctx->channel, io->u.bdev.iovs, io->u.bdev.iovcnt,
					    offset_blocks, blocks_count, bypass_done, io);
		break;
	case HHC_GLUE_IO_WRITE:
		rc = spdk_bdev_writev_blocks(backing->desc, ctx->channel, io->u.bdev.iovs, io->u.bdev.iovcnt,
					     offset_blocks, blocks_count, bypass_done, io);
		break;
	case HHC_GLUE_IO_FLUSH:
		rc = spdk_bdev_flush_blocks(backing->desc, ctx->channel, 0, spdk_bdev_get_num_blocks(backing->bdev),
					    bypass_done, io);
		break;
	case HHC_GLUE_IO_RESET:
		break;
	}
	if (rc == -ENOMEM) {
		ctx->wait.bdev = backing->bdev;
		ctx->wait.cb_fn = bypass_retry;
		ctx->wait.cb_arg = io;
		rc = spdk_bdev_queue_io_wait(backing->bdev, ctx->channel, &ctx->wait);
	}
	return rc;
}

static void
bypass_retry(void *arg)
{
	struct spdk_bdev_io *io = arg;
	struct hhc_bypass_ctx *ctx = (struct hhc_bypass_ctx *)io->driver_ctx;
	int rc = bypass_start(io);

	if (rc != 0) {
		SPDK_ERRLOG("hhc: resubmitting a request to %s failed: %s\n", spdk_bdev_get_name(ctx->backing->bdev),
			    spdk_strerror(-rc));
		lane_command_done(ctx->lane, 0);
		hhc_rs_bypass_done(ctx->lane->rs_channel, (struct hhc_glue_io *)io, ctx->kind, rc,
				   hhc_glue_now_ns() - ctx->start_ns);
	}
}

int
hhc_glue_lane_bypass(struct hhc_glue_lane *lane, struct hhc_glue_base *backing, struct hhc_glue_io *hhc_io,
		     enum hhc_glue_io_kind kind, uint64_t offset_bytes, uint64_t len_bytes)
{
	struct spdk_bdev_io *io = (struct spdk_bdev_io *)hhc_io;
	struct hhc_bypass_ctx *ctx = (struct hhc_bypass_ctx *)io->driver_ctx;
	struct spdk_io_channel *ch;
	int rc;

	if (backing->closing || (ch = lane_channel(lane, 0, backing)) == NULL || kind == HHC_GLUE_IO_RESET) {
		return -EAGAIN;
	}
	if (kind == HHC_GLUE_IO_FLUSH && !spdk_bdev_io_type_supported(backing->bdev, SPDK_BDEV_IO_TYPE_FLUSH)) {
		return 1;
	}
	ctx->lane = lane;
	ctx->backing = backing;
	ctx->channel = ch;
	ctx->kind = kind;
	ctx->offset_bytes = offset_bytes;
	ctx->len_bytes = len_bytes;
	ctx->start_ns = hhc_glue_now_ns();
	rc = bypass_start(io);
	if (rc == 0) {
		lane->in_flight[0]++;
	}
	return rc;
}

size_t
hhc_glue_io_ctx_size(void)
{
	return sizeof(struct hhc_bypass_ctx);
}

int
hhc_base_linked(void)
{
	return 0;
}
