/*
 * pmix.c: the PMIx client (pmix.h). Only the handful of calls wire-up needs:
 * PMIx_Init for this process's name, PMIx_Get of the job's and the node's sizes,
 * and Put/Commit/Fence/Get of byte objects. Without a server, or built without
 * PMIx, blobs live in a list in the process (a job of one puts and gets its own).
 */
#include "comm/pmix.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef LMT_HAVE_PMIX
#include <pmix.h>
#endif

#define KEY_MAX 511 /* PMIX_MAX_KEYLEN */

struct blob {
	struct blob *next;
	char *key;
	size_t bytes;
	unsigned char data[];
};

struct priv {
	struct blob *blobs; /* a job of one's own store */
#ifdef LMT_HAVE_PMIX
	pmix_proc_t me;
#endif
};

int lmt_pmix_env(void)
{
	return getenv("PMIX_RANK") != NULL || getenv("PMIX_NAMESPACE") != NULL;
}

static int check_key(const char *key, struct lmt_err *err)
{
	size_t n = key ? strlen(key) : 0;
	if (n == 0 || n > KEY_MAX)
		return lmt_err_set(err, LMT_EINVAL, "pmix key '%s': %zu characters, expected 1 to %d", key ? key : "",
				   n, KEY_MAX);
	return 0;
}

#ifdef LMT_HAVE_PMIX
static int pmix_fail(struct lmt_err *err, pmix_status_t rc, const char *what)
{
	return lmt_err_set(err, LMT_EIO, "pmix: %s: %s (%d)", what, PMIx_Error_string(rc), (int)rc);
}

/* PMIx hands sizes and ranks back in whichever unsigned type it chose */
static int value_int(const pmix_value_t *v, long long *out)
{
	switch (v->type) {
	case PMIX_UINT8: *out = v->data.uint8; return 0;
	case PMIX_UINT16: *out = v->data.uint16; return 0;
	case PMIX_UINT32: *out = v->data.uint32; return 0;
	case PMIX_UINT64: *out = (long long)v->data.uint64; return 0;
	case PMIX_INT: *out = v->data.integer; return 0;
	case PMIX_INT32: *out = v->data.int32; return 0;
	case PMIX_UINT: *out = v->data.uint; return 0;
	case PMIX_SIZE: *out = (long long)v->data.size; return 0;
	case PMIX_PROC_RANK: *out = v->data.rank; return 0;
	default: return -1;
	}
}

static int get_int(const pmix_proc_t *proc, const char *key, int *out, struct lmt_err *err)
{
	pmix_value_t *v = NULL;
	pmix_status_t rc = PMIx_Get(proc, key, NULL, 0, &v);
	if (rc != PMIX_SUCCESS)
		return pmix_fail(err, rc, key);
	long long x;
	int bad = value_int(v, &x);
	int type = v->type;
	PMIX_VALUE_RELEASE(v);
	if (bad || x < 0 || x > INT32_MAX)
		return lmt_err_set(err, LMT_EFORMAT, "pmix: %s: a value of type %d, expected a count", key, type);
	*out = (int)x;
	return 0;
}
#endif

int lmt_pmix_init(struct lmt_pmix *p, struct lmt_err *err)
{
	memset(p, 0, sizeof *p);
	p->size = 1;
	p->local_size = 1;
	struct priv *q = calloc(1, sizeof *q);
	if (!q)
		return lmt_err_set(err, LMT_ENOMEM, "pmix: out of memory");
	p->priv = q;
#ifdef LMT_HAVE_PMIX
	pmix_status_t rc = PMIx_Init(&q->me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		if (!lmt_pmix_env())
			return 0; /* no launcher: a job of one */
		rc = pmix_fail(err, rc, "init (the environment names a server)");
		lmt_pmix_release(p);
		return rc;
	}
	p->launched = 1;
	p->rank = (int)q->me.rank;
	pmix_proc_t job;
	PMIX_LOAD_PROCID(&job, q->me.nspace, PMIX_RANK_WILDCARD);
	int r;
	if ((r = get_int(&job, PMIX_JOB_SIZE, &p->size, err)) || (r = get_int(&q->me, PMIX_LOCAL_RANK, &p->local_rank, err)) ||
	    (r = get_int(&job, PMIX_LOCAL_SIZE, &p->local_size, err))) {
		lmt_pmix_release(p);
		return r;
	}
	if (p->rank >= p->size || p->local_rank >= p->local_size) {
		r = lmt_err_set(err, LMT_EFORMAT, "pmix: rank %d (local %d) in a job of %d (local %d)", p->rank,
				p->local_rank, p->size, p->local_size);
		lmt_pmix_release(p);
		return r;
	}
#endif
	return 0;
}

int lmt_pmix_put(struct lmt_pmix *p, const char *key, const void *data, size_t bytes, struct lmt_err *err)
{
	int r = check_key(key, err);
	if (r)
		return r;
	struct priv *q = p->priv;
#ifdef LMT_HAVE_PMIX
	if (p->launched) {
		pmix_value_t v;
		PMIX_VALUE_CONSTRUCT(&v);
		v.type = PMIX_BYTE_OBJECT;
		v.data.bo.bytes = (char *)data; /* PMIx_Put copies it */
		v.data.bo.size = bytes;
		pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
		return rc == PMIX_SUCCESS ? 0 : pmix_fail(err, rc, "put");
	}
#endif
	for (struct blob **b = &q->blobs; *b; b = &(*b)->next)
		if (!strcmp((*b)->key, key)) { /* a second put replaces the first */
			struct blob *old = *b;
			*b = old->next;
			free(old->key);
			free(old);
			break;
		}
	struct blob *b = malloc(sizeof *b + bytes);
	if (!b || !(b->key = strdup(key))) {
		free(b);
		return lmt_err_set(err, LMT_ENOMEM, "pmix: out of memory");
	}
	b->bytes = bytes;
	if (bytes)
		memcpy(b->data, data, bytes);
	b->next = q->blobs;
	q->blobs = b;
	return 0;
}

int lmt_pmix_commit(struct lmt_pmix *p, struct lmt_err *err)
{
#ifdef LMT_HAVE_PMIX
	if (p->launched) {
		pmix_status_t rc = PMIx_Commit();
		return rc == PMIX_SUCCESS ? 0 : pmix_fail(err, rc, "commit");
	}
#endif
	(void)p, (void)err;
	return 0;
}

int lmt_pmix_fence(struct lmt_pmix *p, int collect, struct lmt_err *err)
{
#ifdef LMT_HAVE_PMIX
	if (p->launched) {
		pmix_info_t info;
		bool flag = collect != 0;
		PMIX_INFO_CONSTRUCT(&info);
		PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
		pmix_status_t rc = PMIx_Fence(NULL, 0, &info, 1);
		PMIX_INFO_DESTRUCT(&info);
		return rc == PMIX_SUCCESS ? 0 : pmix_fail(err, rc, "fence");
	}
#endif
	(void)p, (void)collect, (void)err;
	return 0;
}

int lmt_pmix_get(struct lmt_pmix *p, int rank, const char *key, void *data, size_t bytes, struct lmt_err *err)
{
	int r = check_key(key, err);
	if (r)
		return r;
	if (rank < 0 || rank >= p->size)
		return lmt_err_set(err, LMT_EINVAL, "pmix get '%s': rank %d in a job of %d", key, rank, p->size);
	struct priv *q = p->priv;
	size_t found;
#ifdef LMT_HAVE_PMIX
	if (p->launched) {
		pmix_proc_t proc;
		pmix_value_t *v = NULL;
		pmix_info_t info;
		bool local = true; /* after a fence with collect: no round trip to the server, which would wait */
		PMIX_LOAD_PROCID(&proc, q->me.nspace, (pmix_rank_t)rank);
		PMIX_INFO_CONSTRUCT(&info);
		PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &local, PMIX_BOOL);
		pmix_status_t rc = PMIx_Get(&proc, key, &info, 1, &v);
		PMIX_INFO_DESTRUCT(&info);
		if (rc == PMIX_ERR_NOT_FOUND)
			return lmt_err_set(err, LMT_ENOTFOUND, "pmix get '%s': rank %d put nothing under it", key, rank);
		if (rc != PMIX_SUCCESS)
			return pmix_fail(err, rc, "get");
		if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != bytes) {
			r = lmt_err_set(err, LMT_EFORMAT, "pmix get '%s' from rank %d: %zu bytes of type %d, expected %zu bytes",
					key, rank, v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : 0, (int)v->type, bytes);
		} else if (bytes) {
			memcpy(data, v->data.bo.bytes, bytes);
		}
		PMIX_VALUE_RELEASE(v);
		return r;
	}
#endif
	for (struct blob *b = q->blobs; b; b = b->next)
		if (!strcmp(b->key, key)) {
			found = b->bytes;
			if (found != bytes)
				return lmt_err_set(err, LMT_EFORMAT, "pmix get '%s' from rank %d: %zu bytes, expected %zu",
						   key, rank, found, bytes);
			if (bytes)
				memcpy(data, b->data, bytes);
			return 0;
		}
	return lmt_err_set(err, LMT_ENOTFOUND, "pmix get '%s': rank %d put nothing under it", key, rank);
}

void lmt_pmix_release(struct lmt_pmix *p)
{
	struct priv *q = p->priv;
	if (!q)
		return;
#ifdef LMT_HAVE_PMIX
	/* nothing to do with a failure here but go on exiting */
	if (p->launched)
		(void)PMIx_Finalize(NULL, 0);
#endif
	while (q->blobs) {
		struct blob *b = q->blobs;
		q->blobs = b->next;
		free(b->key);
		free(b);
	}
	free(q);
	p->priv = NULL;
	p->launched = 0;
}
