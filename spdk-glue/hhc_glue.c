/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * C shim of the HHC bdev module: registers module "hhc" and its examine
 * callbacks, and wraps the SPDK services the Rust side (src/ffi/) needs
 * behind hhc_glue.h: threads, DMA memory, logging, JSON (the clock is in
 * hhc_common.c, which the device-model module links too). The base
 * bdevs, the HHC bdev's data path and the RPC methods have files of their
 * own (hhc_glue_internal.h lists them). No caching policy lives here; every
 * decision is made in Rust. Only SPDK's public headers are used.
 */

#include "hhc_glue_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spdk/bdev.h"
#include "spdk/cpuset.h"
#include "spdk/env.h"
#include "spdk/json.h"
#include "spdk/log.h"
#include "spdk/thread.h"

static int hhc_module_init(void);
static void hhc_module_fini(void);

static void hhc_examine_config(struct spdk_bdev *bdev);
static void hhc_examine_disk(struct spdk_bdev *bdev);

static int
hhc_get_ctx_size(void)
{
	return (int)hhc_glue_io_ctx_size();
}

struct spdk_bdev_module g_hhc_module = {
	.name = "hhc",
	.module_init = hhc_module_init,
	.module_fini = hhc_module_fini,
	.get_ctx_size = hhc_get_ctx_size,
	.examine_config = hhc_examine_config,
	.examine_disk = hhc_examine_disk,
};

SPDK_BDEV_MODULE_REGISTER(hhc, &g_hhc_module)
SPDK_LOG_REGISTER_COMPONENT(hhc)

static int
hhc_module_init(void)
{
	return 0;
}

static void
hhc_module_fini(void)
{
	hhc_rs_module_fini();
}

/* ------------------------------------------------------------------ */
/* examine: an HHC cache bdev arriving assembles its HHC bdev          */
/* ------------------------------------------------------------------ */

/* Bytes handed to Rust: units 0..3, the cache superblock and the two
 * copies of the owner record (docs/format.md). */
#define HHC_EXAMINE_BYTES (3 * 4096)

struct hhc_examine {
	struct spdk_bdev_desc *desc;
	struct spdk_io_channel *channel;
	void *buf;
	uint64_t len;
	char *name;
};

static void
hhc_examine_config(struct spdk_bdev *bdev)
{
	hhc_rs_examine_config(spdk_bdev_get_name(bdev));
	spdk_bdev_module_examine_done(&g_hhc_module);
}

static void
examine_event_cb(enum spdk_bdev_event_type type, struct spdk_bdev *bdev, void *ctx)
{
	/* The read in flight completes (with an error) if the bdev goes. */
}

static void
examine_finish(struct hhc_examine *examine, bool read_ok)
{
	if (examine->channel != NULL) {
		spdk_put_io_channel(examine->channel);
	}
	if (examine->desc != NULL) {
		spdk_bdev_close(examine->desc);
	}
	/* After the close: assembling claims this bdev. */
	if (read_ok) {
		hhc_rs_examine_disk(examine->name, examine->buf, HHC_EXAMINE_BYTES);
	}
	spdk_dma_free(examine->buf);
	free(examine->name);
	free(examine);
	spdk_bdev_module_examine_done(&g_hhc_module);
}

static void
examine_read_done(struct spdk_bdev_io *bdev_io, bool success, void *ctx)
{
	spdk_bdev_free_io(bdev_io);
	examine_finish(ctx, success);
}

static void
hhc_examine_disk(struct spdk_bdev *bdev)
{
	uint32_t block_size = spdk_bdev_get_block_size(bdev);
	struct hhc_examine *examine;
	int rc;

	examine = calloc(1, sizeof(*examine));
	if (examine == NULL) {
		spdk_bdev_module_examine_done(&g_hhc_module);
		return;
	}
	/* Whole blocks covering the superblock unit. */
	examine->len = (HHC_EXAMINE_BYTES + block_size - 1) / block_size * block_size;
	examine->name = strdup(spdk_bdev_get_name(bdev));
	examine->buf = spdk_dma_zmalloc(examine->len, spdk_bdev_get_buf_align(bdev), NULL);
	/* Our own bdevs and bdevs too small for a cache are never HHC caches. */
	if (examine->name == NULL || examine->buf == NULL || bdev->module == &g_hhc_module ||
	    examine->len > spdk_bdev_get_num_blocks(bdev) * block_size) {
		examine_finish(examine, false);
		return;
	}
	rc = spdk_bdev_open_ext(examine->name, false, examine_event_cb, NULL, &examine->desc);
	if (rc == 0) {
		examine->channel = spdk_bdev_get_io_channel(examine->desc);
		rc = examine->channel == NULL ? -ENOMEM : 0;
	}
	if (rc == 0) {
		rc = spdk_bdev_read(examine->desc, examine->channel, examine->buf, 0, examine->len,
				    examine_read_done, examine);
	}
	if (rc != 0) {
		examine_finish(examine, false);
	}
}

/* ------------------------------------------------------------------ */
/* threads, time, memory, logging, JSON                                */
/* ------------------------------------------------------------------ */

struct hhc_glue_poller *
hhc_glue_poller_start(int (*poll)(void *arg), void *arg, uint64_t period_us)
{
	return (struct hhc_glue_poller *)spdk_poller_register(poll, arg, period_us);
}

void
hhc_glue_poller_stop(struct hhc_glue_poller *poller)
{
	struct spdk_poller *spdk_poller = (struct spdk_poller *)poller;

	spdk_poller_unregister(&spdk_poller);
}

const void *
hhc_glue_thread_current(void)
{
	return spdk_get_thread();
}

int
hhc_glue_thread_send(const void *thread, void (*fn)(void *arg), void *arg)
{
	return spdk_thread_send_msg(thread, fn, arg);
}

const void *
hhc_glue_thread_app(void)
{
	return spdk_thread_get_app_thread();
}

int
hhc_glue_thread_create(const char *name, const char *cpumask, const void **out)
{
	struct spdk_cpuset mask, cores;
	struct spdk_thread *thread;
	uint32_t core;

	if (spdk_cpuset_parse(&mask, cpumask) != 0) {
		return -EINVAL;
	}
	spdk_cpuset_zero(&cores);
	SPDK_ENV_FOREACH_CORE(core) {
		spdk_cpuset_set_cpu(&cores, core, true);
	}
	spdk_cpuset_and(&cores, &mask);
	if (spdk_cpuset_count(&cores) == 0) {
		return -EDOM;
	}
	thread = spdk_thread_create(name, &mask);
	if (thread == NULL) {
		return -ENOMEM;
	}
	*out = thread;
	return 0;
}

void
hhc_glue_thread_describe(const void *thread, char *out, size_t len)
{
	struct spdk_thread *t = (struct spdk_thread *)thread;

	snprintf(out, len, "%s (id %" PRIu64 ")", spdk_thread_get_name(t), spdk_thread_get_id(t));
}

void *
hhc_glue_dma_zmalloc(size_t len_bytes, size_t align_bytes)
{
	return spdk_dma_zmalloc(len_bytes, align_bytes, NULL);
}

void
hhc_glue_dma_free(void *buffer)
{
	spdk_dma_free(buffer);
}

void
hhc_glue_log(enum hhc_glue_log_level level, const char *message)
{
	switch (level) {
	case HHC_GLUE_LOG_ERROR:
		SPDK_ERRLOG("hhc: %s\n", message);
		break;
	case HHC_GLUE_LOG_WARN:
		SPDK_WARNLOG("hhc: %s\n", message);
		break;
	case HHC_GLUE_LOG_NOTICE:
	case HHC_GLUE_LOG_INFO:
		SPDK_NOTICELOG("hhc: %s\n", message);
		break;
	default:
		SPDK_DEBUGLOG(hhc, "%s\n", message);
		break;
	}
}

void
hhc_glue_json_write_raw(struct hhc_glue_json *json, const char *name, const char *text, size_t len)
{
	struct spdk_json_write_ctx *w = (struct spdk_json_write_ctx *)json;

	if (name != NULL) {
		spdk_json_write_name(w, name);
	}
	spdk_json_write_val_raw(w, text, len);
}

int
hhc_glue_anchor(void)
{
	return hhc_base_linked() + hhc_node_linked() + hhc_rpc_linked() + hhc_common_linked();
}
