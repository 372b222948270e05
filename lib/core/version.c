/*
 * version.c: build identity. LMT_REVISION is passed by the Makefile from git describe.
 */
#include "core/version.h"

#ifndef LMT_REVISION
#define LMT_REVISION "unknown"
#endif

const char *lmt_revision(void)
{
	return LMT_REVISION;
}
