/*
 * store_sync.c - the synchronous calls (kvt_put, kvt_get, kvt_exists,
 * kvt_delete, kvt_lookup_prefix, kvt_clear, kvt_flush): one request run on
 * the calling thread, waiting on a private queue only when the chain may
 * complete it on another thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

static int store_sync(struct kvt_store *s, struct kvt_req *r)
{
	struct kvt_queue q;
	int ret;
	if (!s)
		return KVT_ENULL;
	if ((ret = store_check(s)) < 0)
		return ret;
	if ((ret = req_check(s, r)) < 0)
		return ret;
	/* Only a get that goes to a tier with TIER_ASYNC_GET (SSD), or any
	 * request in a chain with a TIER_ASYNC_ALL tier (remote, shared),
	 * completes on another thread; it needs a private
	 * queue on the stack to wait on.  Everything else runs here and now,
	 * without one (lookups are hot). */
	if (!(s->tier_flags & TIER_ASYNC_ALL) &&
	    (!(s->tier_flags & TIER_ASYNC_GET) ||
	     (r->op != KVT_OP_GET && r->op != KVT_OP_GET_PINNED))) {
		ret = store_exec(s, r);
		nsstat_req(&s->nsstat, r, ret); /* never pending here */
		return ret;
	}
	memset(&q, 0, sizeof(q));
	q.store = s;
	q.efd = -1;
	pthread_mutex_init(&q.lock, NULL);
	pthread_cond_init(&q.cond, NULL);
	r->priv_[0] = &q;
	req_set_state(r, REQ_RUNNING);
	ret = store_exec(s, r);
	if (ret == STORE_PENDING) {
		pthread_mutex_lock(&q.lock);
		while (!q.done_head)
			pthread_cond_wait(&q.cond, &q.lock);
		pthread_mutex_unlock(&q.lock);
		ret = r->status; /* counted by req_complete */
	} else {
		nsstat_req(&s->nsstat, r, ret);
	}
	pthread_mutex_destroy(&q.lock);
	pthread_cond_destroy(&q.cond);
	return ret;
}

int kvt_put(struct kvt_store *s, uint32_t ns, const struct kvt_key *key,
	    const struct iovec *parts, unsigned part_count)
{
	struct kvt_req r = { .op = KVT_OP_PUT, .ns = ns, .iov = parts, .iov_count = part_count };
	if (!key)
		return KVT_ENULL;
	r.key = *key;
	return store_sync(s, &r);
}

int kvt_get(struct kvt_store *s, uint32_t ns, const struct kvt_key *key, void *buf,
	    size_t buf_len, uint64_t *value_len)
{
	struct iovec v = { buf, buf_len };
	struct kvt_req r = { .op = KVT_OP_GET, .ns = ns, .iov = &v, .iov_count = 1 };
	int ret;
	if (!key || !buf)
		return KVT_ENULL;
	r.key = *key;
	ret = store_sync(s, &r);
	if (value_len)
		*value_len = r.value_len;
	return ret;
}

int kvt_exists(struct kvt_store *s, uint32_t ns, const struct kvt_key *key)
{
	struct kvt_req r = { .op = KVT_OP_EXISTS, .ns = ns };
	if (!key)
		return KVT_ENULL;
	r.key = *key;
	return store_sync(s, &r);
}

/* A delete or clear that removed something returns once it is durable
 * (store_dispatch.c store_deletes_durable). */
int kvt_delete(struct kvt_store *s, uint32_t ns, const struct kvt_key *key)
{
	struct kvt_req r = { .op = KVT_OP_DELETE, .ns = ns };
	int ret, st;
	if (!key)
		return KVT_ENULL;
	r.key = *key;
	ret = store_sync(s, &r);
	if (ret == KVT_OK && (st = store_deletes_durable(s)) < 0)
		return st;
	return ret;
}

int64_t kvt_lookup_prefix(struct kvt_store *s, uint32_t ns, const struct kvt_key *keys,
			  size_t key_count, uint8_t *tiers)
{
	struct kvt_req r = { .op = KVT_OP_LOOKUP, .ns = ns, .keys = keys, .tiers = tiers };
	int ret;
	if (key_count > KVT_BATCH_MAX)
		return KVT_EBADLEN;
	r.key_count = (uint32_t)key_count;
	ret = store_sync(s, &r);
	return ret < 0 ? ret : (int64_t)r.length;
}

int64_t kvt_clear(struct kvt_store *s, uint32_t ns)
{
	struct kvt_req r = { .op = KVT_OP_CLEAR, .ns = ns };
	int ret = store_sync(s, &r);
	if (ret >= 0 && (ret = store_deletes_durable(s)) < 0)
		return ret;
	return ret < 0 ? ret : (int64_t)r.length;
}

int kvt_flush(struct kvt_store *s)
{
	struct kvt_req r = { .op = KVT_OP_FLUSH }, *rp = &r, *got;
	struct kvt_queue *q;
	int ret;

	if (!s)
		return KVT_ENULL;
	ret = kvt_queue_create(s, &q);
	if (ret < 0)
		return ret;
	ret = kvt_submit(q, &rp, 1);
	/* Wait through signals: r lives on this stack until it completes. */
	while (ret >= 0 && ((ret = kvt_queue_wait(q, &got, 1, -1)) == 0 || ret == -EINTR))
		ret = 0;
	if (ret > 0)
		ret = r.status;
	kvt_queue_destroy(q);
	return ret;
}
