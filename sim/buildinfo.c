/*
 * buildinfo.c - where this trellara-sim was built from.  The values come
 * from build/sim/source_info.h, which the Makefile writes with
 * sim/source-info.sh (and rewrites only when they change, so only this
 * file is compiled again).
 */
#include "run.h"

/* written by the Makefile (sim/source-info.sh header) */
#include "../build/sim/source_info.h"

#ifndef TRELLARA_SOURCE_REVISION
#define TRELLARA_SOURCE_REVISION "unknown"
#endif
#ifndef TRELLARA_SOURCE_TREE
#define TRELLARA_SOURCE_TREE "unknown"
#endif
#ifndef TRELLARA_SOURCE_DIRTY
#define TRELLARA_SOURCE_DIRTY 0
#endif
#ifndef TRELLARA_BUILD_CC
#define TRELLARA_BUILD_CC "unknown"
#endif
#ifndef TRELLARA_BUILD_CFLAGS
#define TRELLARA_BUILD_CFLAGS "unknown"
#endif

void sim_build_info_get(struct sim_build_info *info)
{
	info->revision = TRELLARA_SOURCE_REVISION;
	info->tree = TRELLARA_SOURCE_TREE;
	info->dirty = TRELLARA_SOURCE_DIRTY != 0;
	info->cc = TRELLARA_BUILD_CC;
	info->cflags = TRELLARA_BUILD_CFLAGS;
}
