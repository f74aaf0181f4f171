/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * Module "hhc_model": a test-only passthrough vbdev whose timing follows
 * one of the timed simulator's device models (src/models/: one HDD head,
 * an SSD, a RAID5 of HDDs). Structured after SPDK's vbdev_delay: the base
 * bdev is opened and claimed, the vbdev has its block size and count, each
 * thread's channel holds a base channel and a poller, and every I/O goes to
 * the base bdev. The model is asked at submission when the command would be
 * done (hhc_rs_model_submit; one model state per bdev, shared by all
 * channels, src/ffi/model/), and the I/O completes at
 * max(base completion, model completion): held I/Os wait in a per-channel
 * queue ordered by model completion, which the poller drains. FLUSH costs
 * what the model says and is forwarded when the base supports it; RESET is
 * forwarded (no model time); WRITE_ZEROES and UNMAP are not offered (the
 * bdev layer emulates WRITE_ZEROES with writes, which are modelled).
 * A RAID5 model takes contiguous writes that arrive within PLUG_NS of the
 * first, or until they fill a stripe, as one command (a plug): SPDK's iSCSI
 * target passes a write on in pieces of at most 64 KiB, which an MD RAID5
 * would gather in its stripe cache into one full-stripe write, and the
 * model must not charge each piece a read-modify-write of its own. Pieces
 * of concurrent writes may interleave, so a channel keeps a few plugs open
 * at once.
 * Created by RPC (bdev_hhc_model_create) or from a saved config only.
 * Built as a module of its own, libspdk_bdev_hhc_model.so, which the tests
 * preload next to HHC's: none of it is in libspdk_bdev_hhc.so or hhc_tgt.
 * docs/spdk.md, "Device models (test only)".
 */

#include "hhc_glue_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spdk/bdev.h"
#include "spdk/json.h"
#include "spdk/jsonrpc.h"
#include "spdk/log.h"
#include "spdk/queue.h"
#include "spdk/rpc.h"
#include "spdk/string.h"
#include "spdk/thread.h"
#include "spdk/util.h"
#include "spdk/uuid.h"

/* Namespace of the vbdevs' UUIDs (derived from the base bdev's). */
#define HHC_MODEL_NAMESPACE_UUID "5d3c2f5e-8a0b-4c55-9d1e-2b7f3f6a9c41"

/* How long a RAID5 model's plug stays open for the next contiguous piece
 * (with 100 us the pieces of the rig's 256 KiB writes were gathered 2.3 at
 * a time, with 1 ms all four; a piece alone costs a read-modify-write of
 * 15-30 ms), the most it gathers (BACKING_STRIPE_BYTES_MAX, the largest
 * run HHC writes back), and the plugs a channel keeps open (the oldest
 * closes first). */
#define PLUG_NS 1000000ULL
#define PLUG_BYTES_MAX (1ULL << 20)
#define PLUGS_OPEN_MAX 8
/* The iSCSI target's piece (SPDK_ISCSI_MAX_RECV_DATA_SEGMENT_LENGTH): a
 * shorter write is a whole command or its last piece, and nothing that
 * continues it is on its way, so its plug goes to the model at once (a
 * small synchronous write waits for no window). */
#define PLUG_PIECE_BYTES (64ULL << 10)
/* model_done_ns of a write still in the plug. */
#define MODEL_DONE_PENDING UINT64_MAX

struct hhc_model_node {
	struct spdk_bdev bdev;
	struct spdk_bdev *base_bdev;
	struct spdk_bdev_desc *base_desc;
	/* Where the base was opened (and is closed). */
	struct spdk_thread *thread;
	void *rs_model;
	bool base_flush;
	/* Writes go through the channel's plugs when this is not 0 (a RAID5
	 * model's data bytes per stripe). */
	uint64_t stripe_bytes;
	/* The create call, for save_config. */
	char *kind;
	size_t params_count;
	char *keys[HHC_GLUE_MODEL_MAX_PARAMS];
	double values[HHC_GLUE_MODEL_MAX_PARAMS];
	TAILQ_ENTRY(hhc_model_node) link;
};

static TAILQ_HEAD(, hhc_model_node) g_model_nodes = TAILQ_HEAD_INITIALIZER(g_model_nodes);

/* The driver context of each bdev I/O: nothing is allocated per I/O. */
struct hhc_model_io {
	uint64_t submit_ns;
	uint64_t model_done_ns;
	uint64_t base_done_ns;
	enum spdk_bdev_io_status status;
	struct spdk_io_channel *ch;
	struct spdk_bdev_io_wait_entry wait;
	/* In the held queue (done on the base, waiting for the model). */
	bool held;
	TAILQ_ENTRY(hhc_model_io) link;
	TAILQ_ENTRY(hhc_model_io) plug_link;
};

/* Contiguous writes [offset, end) not yet given to the model, the first
 * at opened_ns; closed when `ios` is empty. */
struct hhc_model_plug {
	TAILQ_HEAD(, hhc_model_io) ios;
	uint64_t offset;
	uint64_t end;
	uint64_t opened_ns;
};

struct hhc_model_channel {
	struct spdk_io_channel *base_ch;
	struct spdk_poller *poller;
	/* Done on the base, waiting for the model: by model_done_ns. */
	TAILQ_HEAD(hhc_model_held, hhc_model_io) held;
	struct hhc_model_plug plugs[PLUGS_OPEN_MAX];
	uint32_t plugs_open;
};

static int hhc_model_init(void);
static void hhc_model_fini(void);
static int hhc_model_get_ctx_size(void);

static struct spdk_bdev_module g_hhc_model_module = {
	.name = "hhc_model",
	.module_init = hhc_model_init,
	.module_fini = hhc_model_fini,
	.get_ctx_size = hhc_model_get_ctx_size,
};

SPDK_BDEV_MODULE_REGISTER(hhc_model, &g_hhc_model_module)

static int
hhc_model_init(void)
{
	return 0;
}

static void
hhc_model_fini(void)
{
}

static int
hhc_model_get_ctx_size(void)
{
	return sizeof(struct hhc_model_io);
}

static void
node_free(struct hhc_model_node *node)
{
	size_t i;

	hhc_rs_model_free(node->rs_model);
	for (i = 0; i < node->params_count; i++) {
		free(node->keys[i]);
	}
	free(node->kind);
	free(node->bdev.name);
	free(node);
}

/* ---- completion ---- */

static void
io_finish(struct hhc_model_node *node, struct hhc_model_io *io, uint64_t now)
{
	struct spdk_bdev_io *bdev_io = spdk_bdev_io_from_ctx(io);
	uint64_t submit_ns = io->submit_ns, base_done_ns = io->base_done_ns;

	bool modelled = bdev_io->type != SPDK_BDEV_IO_TYPE_RESET;

	spdk_bdev_io_complete(bdev_io, io->status);
	if (modelled) {
		hhc_rs_model_complete(node->rs_model, submit_ns, base_done_ns, now);
	}
}

/* Queues `io` by its model completion (a write still in the plug last). */
static void
hold(struct hhc_model_channel *ch, struct hhc_model_io *io)
{
	struct hhc_model_io *before;

	/* Model completions mostly come in order: search from the tail. */
	before = TAILQ_LAST(&ch->held, hhc_model_held);
	while (before != NULL && before->model_done_ns > io->model_done_ns) {
		before = TAILQ_PREV(before, hhc_model_held, link);
	}
	if (before == NULL) {
		TAILQ_INSERT_HEAD(&ch->held, io, link);
	} else {
		TAILQ_INSERT_AFTER(&ch->held, before, io, link);
	}
	io->held = true;
}

/* Plug `index`'s writes go to the model as one command; each gets its
 * completion time (and those the base is done with, their place in the
 * held queue). The open plugs stay in the order they were opened. */
static void
plug_close(struct hhc_model_node *node, struct hhc_model_channel *ch, uint32_t index)
{
	struct hhc_model_plug *plug = &ch->plugs[index];
	struct hhc_model_io *io;
	uint64_t submit_ns, done_ns;
	uint32_t pieces = 0;

	done_ns = hhc_rs_model_submit(node->rs_model, HHC_GLUE_IO_WRITE, plug->offset,
				      plug->end - plug->offset, &submit_ns);
	while ((io = TAILQ_FIRST(&plug->ios)) != NULL) {
		TAILQ_REMOVE(&plug->ios, io, plug_link);
		io->model_done_ns = done_ns;
		if (io->held) {
			TAILQ_REMOVE(&ch->held, io, link);
			hold(ch, io);
		}
		pieces++;
	}
	hhc_rs_model_gathered(node->rs_model, pieces - 1);
	for (; index + 1 < ch->plugs_open; index++) {
		TAILQ_SWAP(&ch->plugs[index].ios, &ch->plugs[index + 1].ios, hhc_model_io, plug_link);
		ch->plugs[index].offset = ch->plugs[index + 1].offset;
		ch->plugs[index].end = ch->plugs[index + 1].end;
		ch->plugs[index].opened_ns = ch->plugs[index + 1].opened_ns;
	}
	ch->plugs_open--;
}

/* A write joins the open plug it continues, else opens one (closing the
 * oldest when PLUGS_OPEN_MAX are open). */
static void
plug_add(struct hhc_model_node *node, struct hhc_model_channel *ch, struct hhc_model_io *io,
	 uint64_t offset, uint64_t len)
{
	struct hhc_model_plug *plug = NULL;
	uint32_t i;

	for (i = 0; i < ch->plugs_open; i++) {
		if (ch->plugs[i].end == offset && ch->plugs[i].end + len - ch->plugs[i].offset <= PLUG_BYTES_MAX) {
			plug = &ch->plugs[i];
			break;
		}
	}
	if (plug == NULL) {
		if (ch->plugs_open == PLUGS_OPEN_MAX) {
			plug_close(node, ch, 0);
		}
		plug = &ch->plugs[ch->plugs_open++];
		plug->offset = offset;
		plug->end = offset;
		plug->opened_ns = hhc_glue_now_ns();
	}
	plug->end += len;
	io->submit_ns = hhc_glue_now_ns();
	io->model_done_ns = MODEL_DONE_PENDING;
	TAILQ_INSERT_TAIL(&plug->ios, io, plug_link);
	/* A stripe filled (MD starts its full-stripe write at once), or the
	 * command ended. */
	if ((plug->end % node->stripe_bytes == 0 && plug->end - plug->offset >= node->stripe_bytes) ||
	    len < PLUG_PIECE_BYTES) {
		plug_close(node, ch, (uint32_t)(plug - ch->plugs));
	}
}

/* The base is done with `io` (or never saw it): complete it, or hold it
 * until the model's completion time. */
static void
io_base_done(struct spdk_bdev_io *orig, enum spdk_bdev_io_status status)
{
	struct hhc_model_node *node = SPDK_CONTAINEROF(orig->bdev, struct hhc_model_node, bdev);
	struct hhc_model_io *io = (struct hhc_model_io *)orig->driver_ctx;
	struct hhc_model_channel *ch = spdk_io_channel_get_ctx(io->ch);
	uint64_t now = hhc_glue_now_ns();

	io->status = status;
	io->base_done_ns = now;
	if (io->model_done_ns <= now) {
		io_finish(node, io, now);
		return;
	}
	hold(ch, io);
}

static void
base_io_done(struct spdk_bdev_io *base_io, bool success, void *cb_arg)
{
	struct spdk_bdev_io *orig = cb_arg;
	enum spdk_bdev_io_status status = spdk_bdev_io_set_base_io_status(orig, base_io);

	spdk_bdev_free_io(base_io);
	io_base_done(orig, status);
}

static int
channel_poll(void *arg)
{
	struct hhc_model_channel *ch = arg;
	struct hhc_model_io *io;
	uint64_t now;
	int completed = 0;

	if (TAILQ_EMPTY(&ch->held) && ch->plugs_open == 0) {
		return SPDK_POLLER_IDLE;
	}
	now = hhc_glue_now_ns();
	/* Opened in order: the oldest first. */
	while (ch->plugs_open > 0 && now - ch->plugs[0].opened_ns >= PLUG_NS) {
		io = TAILQ_FIRST(&ch->plugs[0].ios);
		plug_close(SPDK_CONTAINEROF(spdk_bdev_io_from_ctx(io)->bdev, struct hhc_model_node, bdev), ch, 0);
		completed++;
	}
	while ((io = TAILQ_FIRST(&ch->held)) != NULL && io->model_done_ns <= now) {
		TAILQ_REMOVE(&ch->held, io, link);
		io->held = false;
		io_finish(SPDK_CONTAINEROF(spdk_bdev_io_from_ctx(io)->bdev, struct hhc_model_node, bdev), io,
			  now);
		completed++;
	}
	return completed > 0 ? SPDK_POLLER_BUSY : SPDK_POLLER_IDLE;
}

/* ---- submission ---- */

static void forward(struct spdk_bdev_io *bdev_io);

static void
resubmit(void *arg)
{
	forward(arg);
}

static void
forward_result(struct spdk_bdev_io *bdev_io, int rc)
{
	struct hhc_model_io *io = (struct hhc_model_io *)bdev_io->driver_ctx;
	struct hhc_model_channel *ch = spdk_io_channel_get_ctx(io->ch);

	if (rc == 0) {
		return;
	}
	if (rc == -ENOMEM) {
		io->wait.bdev = bdev_io->bdev;
		io->wait.cb_fn = resubmit;
		io->wait.cb_arg = bdev_io;
		rc = spdk_bdev_queue_io_wait(bdev_io->bdev, ch->base_ch, &io->wait);
		if (rc == 0) {
			return;
		}
	}
	SPDK_ERRLOG("hhc_model: base I/O submission failed: %s\n", spdk_strerror(-rc));
	io_base_done(bdev_io, SPDK_BDEV_IO_STATUS_FAILED);
}

static void
read_get_buf_cb(struct spdk_io_channel *_ch, struct spdk_bdev_io *bdev_io, bool success)
{
	struct hhc_model_node *node = SPDK_CONTAINEROF(bdev_io->bdev, struct hhc_model_node, bdev);
	struct hhc_model_channel *ch = spdk_io_channel_get_ctx(_ch);

	if (!success) {
		io_base_done(bdev_io, SPDK_BDEV_IO_STATUS_FAILED);
		return;
	}
	forward_result(bdev_io, spdk_bdev_readv_blocks(node->base_desc, ch->base_ch, bdev_io->u.bdev.iovs,
			bdev_io->u.bdev.iovcnt, bdev_io->u.bdev.offset_blocks,
			bdev_io->u.bdev.num_blocks, base_io_done, bdev_io));
}

/* Sends `bdev_io` to the base (the model was asked already). */
static void
forward(struct spdk_bdev_io *bdev_io)
{
	struct hhc_model_node *node = SPDK_CONTAINEROF(bdev_io->bdev, struct hhc_model_node, bdev);
	struct hhc_model_io *io = (struct hhc_model_io *)bdev_io->driver_ctx;
	struct hhc_model_channel *ch = spdk_io_channel_get_ctx(io->ch);
	int rc;

	switch (bdev_io->type) {
	case SPDK_BDEV_IO_TYPE_READ:
		spdk_bdev_io_get_buf(bdev_io, read_get_buf_cb, bdev_io->u.bdev.num_blocks * bdev_io->bdev->blocklen);
		return;
	case SPDK_BDEV_IO_TYPE_WRITE:
		rc = spdk_bdev_writev_blocks(node->base_desc, ch->base_ch, bdev_io->u.bdev.iovs,
					     bdev_io->u.bdev.iovcnt, bdev_io->u.bdev.offset_blocks,
					     bdev_io->u.bdev.num_blocks, base_io_done, bdev_io);
		break;
	case SPDK_BDEV_IO_TYPE_FLUSH:
		if (!node->base_flush) {
			io_base_done(bdev_io, SPDK_BDEV_IO_STATUS_SUCCESS);
			return;
		}
		rc = spdk_bdev_flush_blocks(node->base_desc, ch->base_ch, bdev_io->u.bdev.offset_blocks,
					    bdev_io->u.bdev.num_blocks, base_io_done, bdev_io);
		break;
	case SPDK_BDEV_IO_TYPE_RESET:
		rc = spdk_bdev_reset(node->base_desc, ch->base_ch, base_io_done, bdev_io);
		break;
	default:
		rc = -ENOTSUP;
		break;
	}
	forward_result(bdev_io, rc);
}

static void
hhc_model_submit_request(struct spdk_io_channel *_ch, struct spdk_bdev_io *bdev_io)
{
	struct hhc_model_node *node = SPDK_CONTAINEROF(bdev_io->bdev, struct hhc_model_node, bdev);
	struct hhc_model_io *io = (struct hhc_model_io *)bdev_io->driver_ctx;
	uint64_t block_size = bdev_io->bdev->blocklen;
	uint64_t offset = bdev_io->u.bdev.offset_blocks * block_size;
	uint64_t len = bdev_io->u.bdev.num_blocks * block_size;
	struct hhc_model_channel *ch = spdk_io_channel_get_ctx(_ch);
	enum hhc_glue_io_kind kind;

	io->ch = _ch;
	io->held = false;
	if (node->stripe_bytes != 0 && bdev_io->type == SPDK_BDEV_IO_TYPE_WRITE) {
		plug_add(node, ch, io, offset, len);
		forward(bdev_io);
		return;
	}
	switch (bdev_io->type) {
	case SPDK_BDEV_IO_TYPE_READ:
		kind = HHC_GLUE_IO_READ;
		break;
	case SPDK_BDEV_IO_TYPE_WRITE:
		kind = HHC_GLUE_IO_WRITE;
		break;
	case SPDK_BDEV_IO_TYPE_FLUSH:
		kind = HHC_GLUE_IO_FLUSH;
		break;
	case SPDK_BDEV_IO_TYPE_RESET:
		/* Not a command of the device model; stays out of its stats. */
		io->model_done_ns = 0;
		io->submit_ns = hhc_glue_now_ns();
		forward(bdev_io);
		return;
	default:
		spdk_bdev_io_complete(bdev_io, SPDK_BDEV_IO_STATUS_FAILED);
		return;
	}
	io->model_done_ns = hhc_rs_model_submit(node->rs_model, kind, offset, len, &io->submit_ns);
	forward(bdev_io);
}

static bool
hhc_model_io_type_supported(void *ctx, enum spdk_bdev_io_type type)
{
	struct hhc_model_node *node = ctx;

	switch (type) {
	case SPDK_BDEV_IO_TYPE_READ:
	case SPDK_BDEV_IO_TYPE_WRITE:
	case SPDK_BDEV_IO_TYPE_FLUSH:
		return true;
	case SPDK_BDEV_IO_TYPE_RESET:
		return spdk_bdev_io_type_supported(node->base_bdev, type);
	default:
		return false;
	}
}

/* ---- channels, registration, destruct ---- */

static int
channel_create(void *io_device, void *ctx_buf)
{
	struct hhc_model_node *node = io_device;
	struct hhc_model_channel *ch = ctx_buf;
	uint32_t i;

	TAILQ_INIT(&ch->held);
	for (i = 0; i < PLUGS_OPEN_MAX; i++) {
		TAILQ_INIT(&ch->plugs[i].ios);
	}
	ch->plugs_open = 0;
	ch->base_ch = spdk_bdev_get_io_channel(node->base_desc);
	if (ch->base_ch == NULL) {
		return -ENOMEM;
	}
	ch->poller = SPDK_POLLER_REGISTER(channel_poll, ch, 0);
	return 0;
}

static void
channel_destroy(void *io_device, void *ctx_buf)
{
	struct hhc_model_channel *ch = ctx_buf;

	spdk_poller_unregister(&ch->poller);
	spdk_put_io_channel(ch->base_ch);
}

static struct spdk_io_channel *
hhc_model_get_io_channel(void *ctx)
{
	return spdk_get_io_channel(ctx);
}

static void
io_device_unregistered(void *io_device)
{
	node_free(io_device);
}

static void
close_base(void *ctx)
{
	spdk_bdev_close(ctx);
}

static int
hhc_model_destruct(void *ctx)
{
	struct hhc_model_node *node = ctx;

	TAILQ_REMOVE(&g_model_nodes, node, link);
	spdk_bdev_module_release_bdev(node->base_bdev);
	if (node->thread != NULL && node->thread != spdk_get_thread()) {
		spdk_thread_send_msg(node->thread, close_base, node->base_desc);
	} else {
		spdk_bdev_close(node->base_desc);
	}
	spdk_io_device_unregister(node, io_device_unregistered);
	return 0;
}

static void
write_create_params(struct hhc_model_node *node, struct spdk_json_write_ctx *w)
{
	size_t i;

	spdk_json_write_named_string(w, "name", node->bdev.name);
	spdk_json_write_named_string(w, "base_bdev_name", spdk_bdev_get_name(node->base_bdev));
	spdk_json_write_named_string(w, "model", node->kind);
	spdk_json_write_named_object_begin(w, "params");
	for (i = 0; i < node->params_count; i++) {
		spdk_json_write_named_double(w, node->keys[i], node->values[i]);
	}
	spdk_json_write_object_end(w);
}

static int
hhc_model_dump_info_json(void *ctx, struct spdk_json_write_ctx *w)
{
	spdk_json_write_named_object_begin(w, "hhc_model");
	write_create_params(ctx, w);
	spdk_json_write_object_end(w);
	return 0;
}

/* Per bdev, so save_config writes it after its base bdev's own create call. */
static void
hhc_model_write_config_json(struct spdk_bdev *bdev, struct spdk_json_write_ctx *w)
{
	spdk_json_write_object_begin(w);
	spdk_json_write_named_string(w, "method", "bdev_hhc_model_create");
	spdk_json_write_named_object_begin(w, "params");
	write_create_params(bdev->ctxt, w);
	spdk_json_write_object_end(w);
	spdk_json_write_object_end(w);
}

static const struct spdk_bdev_fn_table g_hhc_model_fn_table = {
	.destruct = hhc_model_destruct,
	.submit_request = hhc_model_submit_request,
	.io_type_supported = hhc_model_io_type_supported,
	.get_io_channel = hhc_model_get_io_channel,
	.dump_info_json = hhc_model_dump_info_json,
	.write_config_json = hhc_model_write_config_json,
};

static void
base_event_cb(enum spdk_bdev_event_type type, struct spdk_bdev *bdev, void *event_ctx)
{
	struct hhc_model_node *node, *tmp;

	if (type != SPDK_BDEV_EVENT_REMOVE) {
		return;
	}
	TAILQ_FOREACH_SAFE(node, &g_model_nodes, link, tmp) {
		if (node->base_bdev == bdev) {
			spdk_bdev_unregister(&node->bdev, NULL, NULL);
		}
	}
}

/* Creates and registers the vbdev; 0, or a negative errno with a message
 * in `error`. Nothing is left behind on failure. */
static int
model_create(const char *name, const char *base_name, const char *kind, char *const *keys,
	     const double *values, size_t count, char *error, size_t error_len)
{
	struct hhc_model_node *node;
	struct spdk_bdev *base;
	struct spdk_uuid ns_uuid;
	size_t i;
	int rc;

	if (spdk_bdev_get_by_name(name) != NULL) {
		snprintf(error, error_len, "a bdev named '%s' exists already", name);
		return -EEXIST;
	}
	node = calloc(1, sizeof(*node));
	if (node == NULL) {
		snprintf(error, error_len, "out of memory");
		return -ENOMEM;
	}
	node->rs_model = hhc_rs_model_new(kind, (const char *const *)keys, values, count, error, error_len);
	if (node->rs_model == NULL) {
		free(node);
		return -EINVAL;
	}
	node->kind = strdup(kind);
	node->stripe_bytes = hhc_rs_model_stripe_bytes(node->rs_model);
	node->bdev.name = strdup(name);
	for (i = 0; i < count; i++) {
		node->keys[i] = strdup(keys[i]);
		node->values[i] = values[i];
		node->params_count += node->keys[i] != NULL;
	}
	if (node->kind == NULL || node->bdev.name == NULL || node->params_count != count) {
		snprintf(error, error_len, "out of memory");
		node_free(node);
		return -ENOMEM;
	}
	rc = spdk_bdev_open_ext(base_name, true, base_event_cb, NULL, &node->base_desc);
	if (rc == -EPERM) {
		/* Opening a claimed bdev for writing is refused. */
		snprintf(error, error_len, "cannot claim base bdev '%s': claimed already", base_name);
		node_free(node);
		return rc;
	} else if (rc != 0) {
		snprintf(error, error_len, "cannot open base bdev '%s': %s", base_name, spdk_strerror(-rc));
		node_free(node);
		return rc;
	}
	base = spdk_bdev_desc_get_bdev(node->base_desc);
	rc = spdk_bdev_module_claim_bdev(base, node->base_desc, &g_hhc_model_module);
	if (rc != 0) {
		snprintf(error, error_len, "cannot claim base bdev '%s': %s", base_name, spdk_strerror(-rc));
		spdk_bdev_close(node->base_desc);
		node_free(node);
		return rc;
	}
	node->base_bdev = base;
	node->base_flush = spdk_bdev_io_type_supported(base, SPDK_BDEV_IO_TYPE_FLUSH);
	node->thread = spdk_get_thread();
	node->bdev.product_name = "HHC device model (test)";
	node->bdev.write_cache = base->write_cache;
	node->bdev.required_alignment = base->required_alignment;
	node->bdev.optimal_io_boundary = base->optimal_io_boundary;
	node->bdev.blocklen = base->blocklen;
	node->bdev.blockcnt = base->blockcnt;
	node->bdev.ctxt = node;
	node->bdev.fn_table = &g_hhc_model_fn_table;
	node->bdev.module = &g_hhc_model_module;
	spdk_uuid_parse(&ns_uuid, HHC_MODEL_NAMESPACE_UUID);
	rc = spdk_uuid_generate_sha1(&node->bdev.uuid, &ns_uuid, (const char *)&base->uuid, sizeof(base->uuid));
	if (rc == 0) {
		spdk_io_device_register(node, channel_create, channel_destroy, sizeof(struct hhc_model_channel),
					name);
		TAILQ_INSERT_TAIL(&g_model_nodes, node, link);
		rc = spdk_bdev_register(&node->bdev);
		if (rc != 0) {
			TAILQ_REMOVE(&g_model_nodes, node, link);
			spdk_io_device_unregister(node, NULL);
		}
	}
	if (rc != 0) {
		snprintf(error, error_len, "cannot register bdev '%s': %s", name, spdk_strerror(-rc));
		spdk_bdev_module_release_bdev(base);
		spdk_bdev_close(node->base_desc);
		node_free(node);
		return rc;
	}
	return 0;
}

static struct hhc_model_node *
node_by_name(const char *name)
{
	struct hhc_model_node *node;

	TAILQ_FOREACH(node, &g_model_nodes, link) {
		if (strcmp(node->bdev.name, name) == 0) {
			return node;
		}
	}
	return NULL;
}

/* ---- RPCs ---- */

struct rpc_model_params {
	size_t count;
	char *keys[HHC_GLUE_MODEL_MAX_PARAMS];
	double values[HHC_GLUE_MODEL_MAX_PARAMS];
	/* Why decoding failed, when it was the params object. */
	char error[160];
};

struct rpc_model_create {
	char *name;
	char *base_bdev_name;
	char *model;
	struct rpc_model_params params;
};

/* params: an object of numbers, {key: number, ...}. */
static int
decode_model_params(const struct spdk_json_val *val, void *out)
{
	struct rpc_model_params *params = out;
	const struct spdk_json_val *key, *value;
	char number[64];
	char *end;
	uint32_t i;

	if (val->type != SPDK_JSON_VAL_OBJECT_BEGIN) {
		snprintf(params->error, sizeof(params->error), "params must be an object of numbers");
		return -EINVAL;
	}
	for (i = 1; i + 1 <= val->len; i += 2) {
		key = &val[i];
		value = &val[i + 1];
		if (params->count == HHC_GLUE_MODEL_MAX_PARAMS) {
			snprintf(params->error, sizeof(params->error), "at most %d params", HHC_GLUE_MODEL_MAX_PARAMS);
			return -EINVAL;
		}
		if (key->type != SPDK_JSON_VAL_NAME || value->type != SPDK_JSON_VAL_NUMBER ||
		    value->len >= sizeof(number)) {
			snprintf(params->error, sizeof(params->error), "params must be an object of numbers");
			return -EINVAL;
		}
		memcpy(number, value->start, value->len);
		number[value->len] = '\0';
		params->values[params->count] = strtod(number, &end);
		if (end != number + value->len) {
			snprintf(params->error, sizeof(params->error), "params: '%s' is not a number", number);
			return -EINVAL;
		}
		params->keys[params->count] = spdk_json_strdup(key);
		if (params->keys[params->count] == NULL) {
			return -ENOMEM;
		}
		params->count++;
	}
	return 0;
}

static const struct spdk_json_object_decoder g_rpc_model_create_decoders[] = {
	{"name", offsetof(struct rpc_model_create, name), spdk_json_decode_string},
	{"base_bdev_name", offsetof(struct rpc_model_create, base_bdev_name), spdk_json_decode_string},
	{"model", offsetof(struct rpc_model_create, model), spdk_json_decode_string},
	{"params", offsetof(struct rpc_model_create, params), decode_model_params, true},
};

static void
rpc_bdev_hhc_model_create(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_model_create req = {0};
	char error[256] = "";
	size_t i;
	int rc;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_model_create_decoders,
			SPDK_COUNTOF(g_rpc_model_create_decoders), &req)) {
		spdk_jsonrpc_send_error_response_fmt(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						     "invalid parameters%s%s: need name, base_bdev_name, model "
						     "(\"hdd\", \"ssd\" or \"raid5\"); optional params "
						     "({key: number}); no other keys",
						     req.params.error[0] != '\0' ? ": " : "", req.params.error);
		goto out;
	}
	rc = model_create(req.name, req.base_bdev_name, req.model, req.params.keys, req.params.values,
			  req.params.count, error, sizeof(error));
	if (rc == -EINVAL) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS, error);
	} else if (rc != 0) {
		spdk_jsonrpc_send_error_response(request, rc, error);
	} else {
		spdk_jsonrpc_send_bool_response(request, true);
	}
out:
	free(req.name);
	free(req.base_bdev_name);
	free(req.model);
	for (i = 0; i < req.params.count; i++) {
		free(req.params.keys[i]);
	}
}
SPDK_RPC_REGISTER("bdev_hhc_model_create", rpc_bdev_hhc_model_create, SPDK_RPC_RUNTIME)

static void
rpc_bdev_hhc_model_delete(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_name req = {0};
	int rc;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_name_decoders,
			SPDK_COUNTOF(g_rpc_name_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name (string); no other keys");
	} else {
		rc = spdk_bdev_unregister_by_name(req.name, &g_hhc_model_module, rpc_delete_cb, request);
		if (rc != 0) {
			spdk_jsonrpc_send_error_response_fmt(request, rc, "no device-model bdev named '%s': %s",
							     req.name, spdk_strerror(-rc));
		}
	}
	free(req.name);
}
SPDK_RPC_REGISTER("bdev_hhc_model_delete", rpc_bdev_hhc_model_delete, SPDK_RPC_RUNTIME)

static void
rpc_bdev_hhc_model_get_stats(struct spdk_jsonrpc_request *request, const struct spdk_json_val *params)
{
	struct rpc_name req = {0};
	struct hhc_model_node *node;

	if (params == NULL || spdk_json_decode_object(params, g_rpc_name_decoders,
			SPDK_COUNTOF(g_rpc_name_decoders), &req)) {
		spdk_jsonrpc_send_error_response(request, SPDK_JSONRPC_ERROR_INVALID_PARAMS,
						 "invalid parameters: need name (string); no other keys");
	} else {
		node = node_by_name(req.name);
		hhc_rs_model_get_stats(node != NULL ? node->rs_model : NULL, req.name,
				       (struct hhc_glue_rpc *)request);
	}
	free(req.name);
}
SPDK_RPC_REGISTER("bdev_hhc_model_get_stats", rpc_bdev_hhc_model_get_stats, SPDK_RPC_RUNTIME)

int
hhc_model_anchor(void)
{
	return hhc_common_linked();
}
