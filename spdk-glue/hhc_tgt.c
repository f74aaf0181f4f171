/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * hhc_tgt: an SPDK target application with every default subsystem
 * (NVMe-oF, iSCSI, vhost, NBD, ...) linked in, plus the HHC bdev module.
 * The module registers itself through a constructor in hhc_glue.c; this file
 * only starts the application framework.
 */

#include <stdio.h>
#include <stdlib.h>

#include "spdk/event.h"
#include "spdk/log.h"
#include "hhc_glue.h"

static void
hhc_tgt_started(void *arg)
{
	(void)arg;
	SPDK_NOTICELOG("hhc_tgt started; HHC bdev module loaded\n");
}

int
main(int argc, char **argv)
{
	struct spdk_app_opts opts = {};
	int rc;

	/* The module lives in the same binary; keep its object linked in. */
	(void)hhc_glue_anchor();
	spdk_app_opts_init(&opts, sizeof(opts));
	opts.name = "hhc_tgt";
	rc = spdk_app_parse_args(argc, argv, &opts, NULL, NULL, NULL, NULL);
	if (rc != SPDK_APP_PARSE_ARGS_SUCCESS) {
		return rc == SPDK_APP_PARSE_ARGS_HELP ? EXIT_SUCCESS : EXIT_FAILURE;
	}
	rc = spdk_app_start(&opts, hhc_tgt_started, NULL);
	spdk_app_fini();
	return rc == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
