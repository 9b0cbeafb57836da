/*
 * store_pins.c - completing requests to their queues, and the pin table:
 * the handles of pinned gets, quiet copies and put reservations
 * (kvt_pin_release, kvt_pin_parts), and dropping them all at close.
 * Below store_dispatch.c, which completes and pins through it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

/* ------------------------------------------------------------------------
 * Completion
 */

/* Hand a finished request to its queue.  Any thread.  bell false: no
 * eventfd write for it (kvt_submit's inline completions on a queue whose
 * owner polls after every submit, KVT_QUEUE_POLL_AFTER_SUBMIT). */
void req_complete_bell(struct kvt_store *s, struct kvt_req *r, int status, bool bell)
{
	struct kvt_queue *q = req_queue(r);
	bool was_empty;

	r->status = status;
	atomic_fetch_add_explicit(&s->completed, 1, memory_order_relaxed);
	nsstat_req(&s->nsstat, r, status);
	pthread_mutex_lock(&q->lock);
	req_set_state(r, REQ_DONE);
	r->priv_[1] = NULL;
	was_empty = q->done_head == NULL;
	if (q->done_tail)
		q->done_tail->priv_[1] = r;
	else
		q->done_head = r;
	q->done_tail = r;
	if (q->efd < 0) {
		pthread_cond_signal(&q->cond);
		pthread_mutex_unlock(&q->lock);
		return;
	}
	/* One write until poll reads it: the eventfd is a doorbell, not a
	 * count.  Under the lock: once poll can take this request the owner
	 * may destroy the queue and close the eventfd, so nothing here may
	 * touch q after the unlock (a write after it could land in a reused
	 * fd: TSan saw it). */
	if (!bell) {
		/* The owner polls when kvt_submit returns: it takes this one
		 * then (and whatever completes meanwhile, which finds the list
		 * not empty and writes nothing either). */
		pthread_mutex_unlock(&q->lock);
		return;
	}
	if (was_empty && !q->signaled) {
		uint64_t one = 1;
		/* Cannot fail short of a counter overflow, which poll resets. */
		ssize_t w = write(q->efd, &one, sizeof(one));
		KVT_UNUSED(w);
	}
	q->signaled = true;
	pthread_mutex_unlock(&q->lock);
}

/* ------------------------------------------------------------------------
 * Pins
 */

/*
 * A slot in the pin table for item (a ref the slot now owns), or for copy
 * (SLOT_COPY: the slot owns it), and a copy of its view; hint picks the
 * shard.  *handle and *vcopy on success.
 */
int slot_add(struct kvt_store *s, uintptr_t hint, struct dram_item *item,
		    struct ssd_copy *copy, const struct iovec *view, unsigned view_count, int kind,
		    unsigned pflags, uint64_t *handle, struct iovec **vcopy)
{
	struct pin_shard *ps = &s->pins[(hint >> 6) % PIN_SHARDS];
	unsigned shard = (unsigned)(ps - s->pins);
	struct iovec *v;
	struct pin_slot *slot;
	uint32_t idx;

	v = kvt_mem_alloc(&s->mem, view_count * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v, view, view_count * sizeof(*v));
	pthread_mutex_lock(&ps->lock);
	if (!ps->free_head) {
		uint32_t ncap = ps->cap ? ps->cap * 2 : 64;
		struct pin_slot *ns;
		if (ncap > (1u << PIN_IDX_BITS)) {
			pthread_mutex_unlock(&ps->lock);
			kvt_mem_free(&s->mem, v, view_count * sizeof(*v));
			return KVT_EFULL;
		}
		ns = kvt_mem_realloc(&s->mem, ps->slots, ps->cap * sizeof(*ns), ncap * sizeof(*ns));
		if (!ns) {
			pthread_mutex_unlock(&ps->lock);
			kvt_mem_free(&s->mem, v, view_count * sizeof(*v));
			return -ENOMEM;
		}
		memset(ns + ps->cap, 0, (ncap - ps->cap) * sizeof(*ns));
		for (uint32_t i = ncap; i > ps->cap; i--) {
			ns[i - 1].next_free = ps->free_head;
			ns[i - 1].gen = 1;
			ps->free_head = i;
		}
		ps->slots = ns;
		ps->cap = ncap;
	}
	idx = ps->free_head - 1;
	slot = &ps->slots[idx];
	ps->free_head = slot->next_free;
	slot->item = item;
	slot->copy = copy;
	slot->view = v;
	slot->view_count = view_count;
	slot->kind = (uint8_t)kind;
	slot->pflags = (uint8_t)pflags;
	if (++ps->active > ps->peak)
		ps->peak = ps->active;
	*handle = ((uint64_t)slot->gen << 32) | ((uint64_t)shard << PIN_IDX_BITS) | idx;
	pthread_mutex_unlock(&ps->lock);
	*vcopy = v;
	return 0;
}

int pin_add(struct kvt_store *s, struct kvt_req *r, struct dram_item *item,
		   const struct iovec *view, unsigned view_count)
{
	struct iovec *v;
	int ret = slot_add(s, (uintptr_t)r, item, NULL, view, view_count, SLOT_PIN, 0, &r->pin,
			   &v);
	if (ret < 0)
		return ret;
	r->view = v;
	r->view_count = view_count;
	return 0;
}

/* Take the slot of handle out of the table (it must be of kind; SLOT_PIN
 * takes SLOT_COPY too): its item (the ref passes to the caller) or copy
 * (*copy, may be NULL: then a SLOT_COPY is not taken) and publish flags; its
 * view is freed.  0, KVT_EPIN. */
int slot_take(struct kvt_store *s, uint64_t handle, int kind, struct dram_item **item,
		     struct ssd_copy **copy, unsigned *pflags)
{
	unsigned shard = (unsigned)((handle >> PIN_IDX_BITS) & 0xff);
	uint32_t idx = (uint32_t)(handle & ((1u << PIN_IDX_BITS) - 1)),
		 gen = (uint32_t)(handle >> 32);
	struct pin_shard *ps;
	struct iovec *v;
	uint32_t vc;

	if (shard >= PIN_SHARDS || gen == 0)
		return KVT_EPIN;
	ps = &s->pins[shard];
	pthread_mutex_lock(&ps->lock);
	if (idx >= ps->cap || ps->slots[idx].gen != gen || !slot_used(&ps->slots[idx]) ||
	    !(ps->slots[idx].kind == kind ||
	      (copy && kind == SLOT_PIN && ps->slots[idx].kind == SLOT_COPY))) {
		pthread_mutex_unlock(&ps->lock);
		return KVT_EPIN;
	}
	*item = ps->slots[idx].item;
	if (copy)
		*copy = ps->slots[idx].copy;
	ps->slots[idx].copy = NULL;
	if (pflags)
		*pflags = ps->slots[idx].pflags;
	v = ps->slots[idx].view;
	vc = ps->slots[idx].view_count;
	ps->slots[idx].item = NULL;
	ps->slots[idx].view = NULL;
	ps->slots[idx].gen = gen + 1 ? gen + 1 : 1;
	ps->slots[idx].next_free = ps->free_head;
	ps->free_head = idx + 1;
	ps->active--;
	pthread_mutex_unlock(&ps->lock);
	kvt_mem_free(&s->mem, v, vc * sizeof(*v));
	return 0;
}

/* Release a pin, or abort a reservation. */
int slot_drop(struct kvt_store *s, uint64_t handle, int kind)
{
	struct dram_item *item;
	struct ssd_copy *copy = NULL;
	int ret;

	if (!s)
		return KVT_ENULL;
	if (s->state != ST_OPEN)
		return KVT_ECLOSED;
	ret = slot_take(s, handle, kind, &item, &copy, NULL);
	if (ret < 0)
		return ret;
	if (copy)
		ssd_copy_free(&s->mem, copy);
	else if (kind == SLOT_PIN)
		dram_unpin(s->dram, item);
	else
		dram_abort(s->dram, item);
	return 0;
}

int kvt_pin_release(struct kvt_store *s, uint64_t pin)
{
	return slot_drop(s, pin, SLOT_PIN);
}

int kvt_pin_parts(struct kvt_store *s, uint64_t pin, uint64_t *lens, uint32_t *crcs,
		  unsigned max)
{
	unsigned shard = (unsigned)((pin >> PIN_IDX_BITS) & 0xff);
	uint32_t idx = (uint32_t)(pin & ((1u << PIN_IDX_BITS) - 1)), gen = (uint32_t)(pin >> 32);
	struct pin_shard *ps;
	uint64_t *l = NULL;
	uint32_t *c = NULL;
	struct kvt_key key;
	uint32_t ns;
	int n;

	if (!s)
		return KVT_ENULL;
	if (s->state != ST_OPEN)
		return KVT_ECLOSED;
	if (shard >= PIN_SHARDS || gen == 0)
		return KVT_EPIN;
	l = kvt_mem_alloc(&s->mem, KVT_PARTS_MAX * (sizeof(*l) + sizeof(*c)));
	if (!l)
		return -ENOMEM;
	c = (uint32_t *)(l + KVT_PARTS_MAX);
	ps = &s->pins[shard];
	/* Under the pin lock, so a racing release cannot free the item (the
	 * pin lock is taken before DRAM locks elsewhere too: pins_drop_all). */
	pthread_mutex_lock(&ps->lock);
	if (idx >= ps->cap || ps->slots[idx].gen != gen || !slot_used(&ps->slots[idx]) ||
	    (ps->slots[idx].kind != SLOT_PIN && ps->slots[idx].kind != SLOT_COPY)) {
		n = KVT_EPIN;
	} else if (ps->slots[idx].copy) {
		const struct ssd_copy *cp = ps->slots[idx].copy;
		n = (int)cp->part_count;
		memcpy(l, cp->lens, cp->part_count * sizeof(*l));
		memcpy(c, cp->crcs, cp->part_count * sizeof(*c));
	} else {
		n = dram_item_meta(s->dram, ps->slots[idx].item, &ns, &key, l, c, KVT_PARTS_MAX);
	}
	pthread_mutex_unlock(&ps->lock);
	for (int i = 0; i < n && (unsigned)i < max; i++) {
		if (lens)
			lens[i] = l[i];
		if (crcs)
			crcs[i] = c[i];
	}
	kvt_mem_free(&s->mem, l, KVT_PARTS_MAX * (sizeof(*l) + sizeof(*c)));
	return n;
}

/* Close: drop every pin still held, saying so. */

void pins_drop_all(struct kvt_store *s)
{
	uint64_t dropped = 0;
	for (int i = 0; i < PIN_SHARDS; i++) {
		struct pin_shard *ps = &s->pins[i];
		pthread_mutex_lock(&ps->lock);
		for (uint32_t j = 0; j < ps->cap; j++) {
			struct pin_slot *sl = &ps->slots[j];
			if (!slot_used(sl))
				continue;
			if (sl->copy)
				ssd_copy_free(&s->mem, sl->copy);
			else if (sl->kind == SLOT_RESV)
				dram_abort(s->dram, sl->item);
			else
				dram_unpin(s->dram, sl->item);
			kvt_mem_free(&s->mem, sl->view, sl->view_count * sizeof(struct iovec));
			sl->item = NULL;
			sl->copy = NULL;
			dropped++;
		}
		kvt_mem_free(&s->mem, ps->slots, ps->cap * sizeof(struct pin_slot));
		ps->slots = NULL;
		ps->cap = 0;
		ps->free_head = 0;
		ps->active = 0;
		pthread_mutex_unlock(&ps->lock);
	}
	if (dropped)
		kvt_logf(&s->log, KVT_LOG_WARN,
			 "close: %llu pins were still held; their views are now invalid",
			 (unsigned long long)dropped);
}
