/*
 * ssd_idx.c - what the SSD tier's write path (ssd.c) and its recovery
 * (ssd_recover.c) both stand on: the in-memory index of what is on SSD,
 * synchronous I/O through the engine, and the segment files (open, header,
 * seal).  Below both, so that neither calls up into the other's helpers:
 * ssd.c calls recovery at open, recovery calls these (doc/decisions.md
 * "Layers").  Locks: as ssd.c's header says; nothing here takes seg_lock.
 */
#include <sched.h>

#include "ssd_int.h"

/* ------------------------------------------------------------------------
 * Index
 */

/*
 * Index growth.  A shard's table doubles when its entries outnumber its
 * chains.  Until 2026-12-07 the doubling rehashed the whole shard at once
 * under its lock: at 4 M entries (262 k a shard) one took up to 460 ms
 * here, every get and put of the shard waiting (bench/RESULTS.md, grow45).
 * Now it is incremental, as Redis's dict: the doubling allocates the new
 * table and keeps the old one (sh->old), and each put of the shard moves
 * the next IDX_GROW_STEP chains of the old table into the new one, in
 * order (sh->old_next), until it is empty and freed.  An entry of hash h
 * lies in old[h & old_mask] while that chain was not moved (h & old_mask
 * >= old_next), else in buckets[h & mask]: one chain to look at, one place
 * to insert (idx_head), both tables' chains for a walk of the whole index
 * (ssd_idx_chains).  A doubling needs count > mask + 1, so at least
 * old_mask + 1 puts after the last one began, by which time that one has
 * moved every chain: two tables at most.  Moving an entry rewrites its
 * hash link alone, never its slot's list ("One segment's entries").
 * Recovery builds the index through the same puts.  What a put holds the
 * lock for: IDX_GROW_STEP chains' rehash.  The new table is allocated,
 * and its pages touched, with the lock released (ssd_idx_put: 4 MiB at
 * 262 k entries a shard, 64 MiB at 4 M; calloc's pages fault in at their
 * first write, which was the steps' under the lock): the put that finds a
 * doubling due marks it (grow_due), and after its unlock one thread of the
 * shard (grow_busy) allocates, takes the lock again, and installs the
 * table if the doubling is still due -- else frees it (deletes took the
 * count back down, or the table changed meanwhile).  The old table, once
 * empty, is freed after the unlock too.  Until session 46 both were under
 * the lock (bench/RESULTS.md, grow46).
 */
#define IDX_GROW_STEP 8u

/* Where an entry of hash h lies in sh, or would be inserted.  Locked. */
static struct ssd_entry **idx_head(struct ssd_shard *sh, uint64_t h)
{
	if (sh->old && (uint32_t)(h & sh->old_mask) >= sh->old_next)
		return &sh->old[h & sh->old_mask];
	return &sh->buckets[h & sh->mask];
}

struct ssd_entry **ssd_idx_slot(struct ssd_shard *sh, uint64_t h, uint32_t ns,
				const struct kvt_key *k)
{
	struct ssd_entry **pp = idx_head(sh, h);
	for (; *pp; pp = &(*pp)->hnext) {
		struct ssd_entry *e = *pp;
		if (e->ns == ns && e->key_len == k->len && memcmp(e->key, k->bytes, k->len) == 0)
			return pp;
	}
	return pp;
}

/*
 * One segment's entries.  Each shard keeps, per slot, a doubly linked list
 * of its entries naming that slot (slot_heads, snext/sprev), so that
 * dropping or killing one segment's entries (eviction, the end of a
 * progressive reuse, quarantine) visits those entries -- at most the two
 * generations a slot holds during a progressive reuse, and the carries
 * leaving it -- not the whole index under every shard's lock, which at 64
 * M entries (1 TB of 16 KiB values) took each eviction seconds of CPU and
 * stalled each shard's gets and puts meanwhile (bench/RESULTS.md,
 * sweep45).  The invariant, kept under the shard's lock: an entry of sh
 * is on sh->slot_heads[e->slot]'s list exactly while it is in sh's hash
 * table and e->slot < slot_count (else on none, both links NULL).  Every
 * path that enters an entry (ssd_idx_put), takes one out
 * (ssd_idx_remove_locked) or changes its slot (ssd_idx_reslot_locked: a
 * carry moving to its new place) keeps it; nothing else writes e->slot of
 * an entry in the table.  The sweeps of every slot (UINT32_MAX: recovery's
 * by namespace and seq, a namespace's clear) still walk the whole table.
 */
static void slot_link(struct ssd *s, struct ssd_shard *sh, struct ssd_entry *e)
{
	struct ssd_entry **head;
	if (e->slot >= s->slot_count || !sh->slot_heads) {
		e->snext = NULL;
		e->sprev = NULL;
		return;
	}
	head = &sh->slot_heads[e->slot];
	e->snext = *head;
	if (e->snext)
		e->snext->sprev = &e->snext;
	*head = e;
	e->sprev = head;
}

static void slot_unlink(struct ssd_entry *e)
{
	if (!e->sprev)
		return;
	*e->sprev = e->snext;
	if (e->snext)
		e->snext->sprev = e->sprev;
	e->snext = NULL;
	e->sprev = NULL;
}

void ssd_idx_reslot_locked(struct ssd *s, struct ssd_shard *sh, struct ssd_entry *e,
			   uint32_t slot)
{
	slot_unlink(e);
	e->slot = slot;
	slot_link(s, sh, e);
}

uint64_t ssd_idx_check_slots(struct ssd *s, struct ssd_shard *sh)
{
	uint64_t in_table = 0, unlinked = 0, listed = 0, misplaced = 0, missing, bad;
	for (uint64_t b = 0; b < ssd_idx_chains(sh); b++)
		for (struct ssd_entry *e = *ssd_idx_chain(sh, b); e; e = e->hnext)
			if (e->slot < s->slot_count) {
				in_table++;
				unlinked += !e->sprev;
			}
	for (uint32_t i = 0; i < s->slot_count; i++)
		for (struct ssd_entry *e = sh->slot_heads[i]; e; e = e->snext) {
			listed++;
			misplaced += e->slot != i;
		}
	/* Each entry wrong once: on another slot's list, on none (unlinked,
	 * or linked but out of reach), or listed and not in the table. */
	missing = in_table > listed ? in_table - listed : 0;
	bad = misplaced + (unlinked > missing ? unlinked : missing) +
	      (listed > in_table ? listed - in_table : 0);
	if (bad) {
		AN(s->slot_list_errors, bad);
		kvt_logf(s->log, KVT_LOG_ERROR,
			 "ssd: index slot lists wrong: %llu entries, %llu listed, %llu misplaced, "
			 "%llu unlinked",
			 (unsigned long long)in_table, (unsigned long long)listed,
			 (unsigned long long)misplaced, (unsigned long long)unlinked);
	}
	return bad;
}

/* Where e (an entry of sh) is linked in its hash chain.  Locked. */
static struct ssd_entry **idx_link_of(struct ssd *s, struct ssd_shard *sh,
				      const struct ssd_entry *e)
{
	struct kvt_key k;
	struct ssd_entry **pp;
	k.len = e->key_len;
	memcpy(k.bytes, e->key, e->key_len);
	pp = idx_head(sh, ssd_hash(s, e->ns, &k));
	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	return *pp ? pp : NULL;
}

/* The longest growth under a shard's lock, and the most entries one put
 * moved: ssd.idx_grow_max_ns, ssd.idx_grow_max_moved. */
static void idx_grow_note(struct ssd *s, uint64_t t0, uint64_t moved)
{
	uint64_t ns = kvt_now_ns() - t0, max = AL(s->idx_grow_max_ns);
	while (ns > max && !atomic_compare_exchange_weak(&s->idx_grow_max_ns, &max, ns))
		;
	max = AL(s->idx_grow_max_moved);
	while (moved > max && !atomic_compare_exchange_weak(&s->idx_grow_max_moved, &max, moved))
		;
}

/* A table emptied by a growth, freed once the shard's lock is released. */
struct idx_retired {
	struct ssd_entry **t;
	size_t len;
};

static void idx_retired_free(struct ssd *s, struct idx_retired *r)
{
	kvt_mem_free(s->mem, r->t, r->len);
	r->t = NULL;
}

/* Move the next n chains of the old table into the new one; once empty,
 * hand it to *ret (freed by the caller after the unlock).  Returns the
 * entries moved.  Locked. */
static uint64_t idx_grow_step(struct ssd *s, struct ssd_shard *sh, uint32_t n,
			      struct idx_retired *ret)
{
	uint64_t moved = 0;
	for (; n > 0 && sh->old_next <= sh->old_mask; n--, sh->old_next++) {
		struct ssd_entry *e = sh->old[sh->old_next], *next;
		sh->old[sh->old_next] = NULL;
		for (; e; e = next) {
			struct kvt_key k;
			uint64_t h;
			next = e->hnext;
			moved++;
			k.len = e->key_len;
			memcpy(k.bytes, e->key, e->key_len);
			h = ssd_hash(s, e->ns, &k);
			e->hnext = sh->buckets[h & sh->mask];
			sh->buckets[h & sh->mask] = e;
		}
	}
	if (sh->old_next > sh->old_mask) {
		ret->t = sh->old;
		ret->len = ((size_t)sh->old_mask + 1) * sizeof(*sh->old);
		sh->old = NULL;
		sh->old_mask = sh->old_next = 0;
		sh->tab_gen++;
	}
	return moved;
}

/* After a put: a growth's next step, or a doubling marked due for
 * ssd_idx_put to begin after the unlock ("Index growth").  Locked. */
static void idx_grow_locked(struct ssd *s, struct ssd_shard *sh, struct idx_retired *ret)
{
	uint32_t size = sh->mask + 1;
	if (sh->old) {
		uint64_t t0 = kvt_now_ns();
		idx_grow_note(s, t0, idx_grow_step(s, sh, IDX_GROW_STEP, ret));
	} else if (sh->count > size && size * 2 != 0) {
		atomic_store_explicit(&sh->grow_due, true, memory_order_relaxed);
	}
}

/* A doubling marked due: the new table allocated and its pages touched
 * with sh's lock released, then installed under it if still due (one
 * thread of the shard at a time: grow_busy).  Unlocked. */
static void idx_grow_begin(struct ssd *s, struct ssd_shard *sh)
{
	struct idx_retired ret = { NULL, 0 };
	struct ssd_entry **nb;
	uint32_t size;
	size_t len;
	uint64_t t0;
	bool due;

	if (!atomic_load_explicit(&sh->grow_due, memory_order_relaxed) ||
	    atomic_exchange(&sh->grow_busy, true))
		return;
	pthread_mutex_lock(&sh->lock);
	size = sh->mask + 1;
	due = !sh->old && sh->count > size && size * 2 != 0;
	if (!due)
		atomic_store_explicit(&sh->grow_due, false, memory_order_relaxed);
	pthread_mutex_unlock(&sh->lock);
	if (!due) {
		atomic_store(&sh->grow_busy, false);
		return;
	}
	len = (size_t)size * 2 * sizeof(*nb);
	nb = kvt_mem_calloc(s->mem, (size_t)size * 2, sizeof(*nb));
	if (!nb) { /* the next put tries again; the chains grow meanwhile */
		atomic_store(&sh->grow_busy, false);
		return;
	}
	/* Fault its pages in here, not at the steps' first writes under the
	 * lock (calloc's large tables are fresh, untouched pages). */
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)nb)[off] = 0;
	pthread_mutex_lock(&sh->lock);
	t0 = kvt_now_ns();
	if (!sh->old && sh->mask + 1 == size && sh->count > size) {
		A(s->idx_grows);
		sh->old = sh->buckets;
		sh->old_mask = sh->mask;
		sh->old_next = 0;
		sh->buckets = nb;
		sh->mask = size * 2 - 1;
		sh->tab_gen++;
		nb = NULL;
		idx_grow_note(s, t0, idx_grow_step(s, sh, IDX_GROW_STEP, &ret));
	}
	atomic_store_explicit(&sh->grow_due, false, memory_order_relaxed);
	pthread_mutex_unlock(&sh->lock);
	atomic_store(&sh->grow_busy, false);
	kvt_mem_free(s->mem, nb, len); /* not needed after all (NULL: installed) */
	idx_retired_free(s, &ret);
}

/* Unlink *pp (an entry of sh) and free it.  Locked. */
void ssd_idx_remove_locked(struct ssd *s, struct ssd_shard *sh, struct ssd_entry **pp)
{
	struct ssd_entry *e = *pp;
	*pp = e->hnext;
	slot_unlink(e);
	sh->count--;
	if (e->flags & E_DEAD)
		sh->dead--;
	if (!(e->flags & E_PENDING)) {
		sh->bytes -= e->value_len;
		sh->rec_bytes -= (uint64_t)e->len_512 * SSD_REC_ALIGN; /* 512-byte units */
		quota_ssd_add(s->cfg.quota, e->ns, e->value_len, false);
	}
	kvt_mem_free(s->mem, e, sizeof(*e));
}

/* Insert or replace (if seq is newer) an entry.  Locked.  0, KVT_EXISTS, -ENOMEM. */
static int idx_put_locked(struct ssd *s, struct ssd_shard *sh, uint64_t h,
			  const struct ssd_entry *src, struct ssd_entry **spare,
			  struct idx_retired *ret)
{
	struct kvt_key k;
	struct ssd_entry **pp, *e;
	k.len = src->key_len;
	memcpy(k.bytes, src->key, src->key_len);
	pp = ssd_idx_slot(sh, h, src->ns, &k);
	if (*pp) {
		if ((*pp)->seq >= src->seq)
			return KVT_EXISTS;
		ssd_idx_remove_locked(s, sh, pp);
		pp = ssd_idx_slot(sh, h, src->ns, &k);
	}
	if (spare && *spare) {
		e = *spare; /* allocated before anything reached the disk */
		*spare = NULL;
	} else {
		e = kvt_mem_alloc(s->mem, sizeof(*e));
		if (!e)
			return -ENOMEM;
	}
	*e = *src;
	e->hnext = NULL;
	*pp = e;
	slot_link(s, sh, e);
	sh->count++;
	if (!(e->flags & E_PENDING)) {
		sh->bytes += e->value_len;
		sh->rec_bytes += (uint64_t)e->len_512 * SSD_REC_ALIGN;
		quota_ssd_add(s->cfg.quota, e->ns, e->value_len, true);
	}
	idx_grow_locked(s, sh, ret);
	return 0;
}

int ssd_idx_put(struct ssd *s, uint64_t h, const struct ssd_entry *src,
		struct ssd_entry **spare)
{
	struct ssd_shard *sh = shard_of(s, h);
	struct idx_retired ret = { NULL, 0 };
	int r;
	pthread_mutex_lock(&sh->lock);
	r = idx_put_locked(s, sh, h, src, spare, &ret);
	pthread_mutex_unlock(&sh->lock);
	idx_retired_free(s, &ret);
	idx_grow_begin(s, sh);
	return r;
}

/* Remove the entry for (ns, key) if its seq is below `below` (UINT64_MAX:
 * any) and it has every flag of `flags` (0: whatever its flags). */
static bool idx_remove_if(struct ssd *s, uint32_t ns, const struct kvt_key *k, uint64_t below,
			  uint32_t flags)
{
	uint64_t h = ssd_hash(s, ns, k);
	struct ssd_shard *sh = shard_of(s, h);
	struct idx_retired ret = { NULL, 0 };
	struct ssd_entry **pp;
	bool found = false;
	pthread_mutex_lock(&sh->lock);
	pp = ssd_idx_slot(sh, h, ns, k);
	if (*pp && (*pp)->seq < below && ((*pp)->flags & flags) == flags) {
		ssd_idx_remove_locked(s, sh, pp);
		found = true;
	}
	/* A growth under way takes a step on a delete too (as Redis's dict
	 * does): a shard that only deletes after a doubling began no longer
	 * keeps the old table, a third of its chains' memory (review45g).
	 * Not in the walks' removals: they iterate the tables. */
	if (sh->old)
		idx_grow_note(s, kvt_now_ns(), idx_grow_step(s, sh, IDX_GROW_STEP, &ret));
	pthread_mutex_unlock(&sh->lock);
	idx_retired_free(s, &ret);
	return found;
}

bool ssd_idx_remove_key(struct ssd *s, uint32_t ns, const struct kvt_key *k, uint64_t below)
{
	return idx_remove_if(s, ns, k, below, 0);
}

bool ssd_idx_remove_dead(struct ssd *s, uint32_t ns, const struct kvt_key *k)
{
	return idx_remove_if(s, ns, k, UINT64_MAX, E_DEAD);
}

/* What one slot's sweep or kill cost: ssd.slot_sweep_* (ssd.c's stats). */
static void slot_sweep_note(struct ssd *s, uint64_t visited, uint64_t t0)
{
	uint64_t ns = kvt_now_ns() - t0, max = AL(s->slot_sweep_max_ns);
	A(s->slot_sweeps);
	AN(s->slot_sweep_visited, visited);
	AN(s->slot_sweep_ns, ns);
	while (ns > max && !atomic_compare_exchange_weak(&s->slot_sweep_max_ns, &max, ns))
		;
}

/* Does e go in a sweep of ns, slot, gen and below (ssd_idx_sweep)? */
static bool sweep_takes(const struct ssd_entry *e, uint32_t ns, uint32_t slot, uint64_t gen,
			uint64_t below)
{
	return (ns == KVT_NS_ALL || e->ns == ns) &&
	       (slot == UINT32_MAX || (e->slot == slot && !(e->flags & E_CARRY))) &&
	       (gen == 0 || e->generation == gen) && e->seq < below;
}

/*
 * Chunked walks.  A walk of a whole shard that removes (a namespace's
 * clear, recovery's sweeps) looks at SSD_IDX_SWEEP_CHUNK chains and entries,
 * then drops the shard's lock, yields, and takes it again.  Until session
 * 47 it held the lock for the whole shard: at 4 M entries each clear held
 * each shard 60-120 ms and a get beside it waited up to 118 ms
 * (bench/RESULTS.md, clear46).  Between chunks the index changes under
 * it: entries come and go (a chunk ends between chains, never inside
 * one), a growth moves chains from the old table into the new, a doubling
 * installs a new table, the old one is freed.  So the walk keeps its
 * place as (table, chain): the old table's chains first, from old_next up
 * (a chain below old_next was moved: empty), then the new table's.  A
 * growth only moves entries from the old table into the new, which is
 * walked after it: nothing not yet walked is passed over.  Once the old
 * table is freed (every chain moved into the new one) the walk goes on
 * with the new table, from its first chain if it was still in the old.
 * A doubling that began meanwhile (a new table: tab_gen moved and
 * buckets changed) makes the walk start the shard over
 * (ssd.idx_sweep_restarts): the table it walked is now the old one,
 * partly moved.  A doubling needs as many puts in the shard as it has
 * chains, so that is rare; after IDX_SWEEP_RESTARTS of them the rest of
 * the shard is walked in one hold, as before.  What the walk promises is
 * unchanged: the caller (ssd_clear) returns once every shard was walked,
 * so every entry of the namespace that was in the index when the walk
 * began and is still there has gone; an entry entered meanwhile is a put
 * racing the clear (a write-down of a block the clear killed in DRAM
 * removes its own entry, wd_write).  The longest hold:
 * ssd.idx_sweep_max_hold_ns.
 */
#define IDX_SWEEP_RESTARTS 8u

static void idx_sweep_hold_note(struct ssd *s, uint64_t t0, uint64_t looked)
{
	uint64_t ns = kvt_now_ns() - t0, max = AL(s->idx_sweep_max_hold_ns);
	A(s->idx_sweep_chunks);
	AN(s->idx_sweep_hold_ns, ns);
	while (ns > max && !atomic_compare_exchange_weak(&s->idx_sweep_max_hold_ns, &max, ns))
		;
	max = AL(s->idx_sweep_max_chunk);
	while (looked > max && !atomic_compare_exchange_weak(&s->idx_sweep_max_chunk, &max, looked))
		;
}

/* Remove what sweep_takes from one whole shard, in chunks; *visited
 * counts the entries looked at.  Called and returns with sh's lock held,
 * which it drops between chunks. */
static uint64_t idx_sweep_shard(struct ssd *s, struct ssd_shard *sh, uint32_t ns, uint32_t slot,
				uint64_t gen, uint64_t below, uint64_t *visited)
{
	uint64_t n = 0, pos, budget = 0, t0 = kvt_now_ns();
	struct ssd_entry **tab;
	uint32_t tg, restarts = 0;
	bool in_old;

start:
	tg = sh->tab_gen;
	tab = sh->buckets;
	in_old = sh->old != NULL;
	pos = in_old ? sh->old_next : 0;
	for (;;) {
		budget = 0;
		while (budget < SSD_IDX_SWEEP_CHUNK || restarts >= IDX_SWEEP_RESTARTS) {
			struct ssd_entry **pp;
			if (in_old) {
				if (pos < sh->old_next)
					pos = sh->old_next; /* moved since: empty */
				if (pos > sh->old_mask) {
					in_old = false;
					pos = 0;
					continue;
				}
				pp = &sh->old[pos];
			} else {
				if (pos > sh->mask)
					goto done;
				pp = &sh->buckets[pos];
			}
			pos++;
			budget++;
			while (*pp) {
				struct ssd_entry *e = *pp;
				(*visited)++;
				budget++;
				if (sweep_takes(e, ns, slot, gen, below)) {
					if (!(e->flags & E_PENDING))
						n++;
					ssd_idx_remove_locked(s, sh, pp);
				} else {
					pp = &e->hnext;
				}
			}
		}
		idx_sweep_hold_note(s, t0, budget);
		pthread_mutex_unlock(&sh->lock);
		sched_yield(); /* a waiter woken by the unlock gets the lock */
		if (s->sweep_gap_hook)
			s->sweep_gap_hook(s->sweep_gap_ctx, sh);
		pthread_mutex_lock(&sh->lock);
		t0 = kvt_now_ns();
		if (sh->tab_gen == tg)
			continue;
		if (sh->buckets == tab && !sh->old && sh->tab_gen == tg + 1) {
			/* The old table emptied and freed: its chains are
			 * in the new one, walked next or being walked. */
			tg = sh->tab_gen;
			if (in_old) {
				in_old = false;
				pos = 0;
			}
			continue;
		}
		A(s->idx_sweep_restarts);
		restarts++;
		goto start;
	}
done:
	idx_sweep_hold_note(s, t0, budget);
	return n;
}

/* Remove every entry matching: ns (KVT_NS_ALL: any), slot (UINT32_MAX: any)
 * and generation (0: any), with seq < below.  Returns how many.  A sweep of
 * one slot leaves the entries kept for a carry (E_CARRY): they name the
 * slot they are leaving.  One slot: its shards' lists of the slot ("One
 * segment's entries"); any slot (recovery, a namespace's clear): the whole
 * table, in chunks ("Chunked walks"). */
uint64_t ssd_idx_sweep(struct ssd *s, uint32_t ns, uint32_t slot, uint64_t gen, uint64_t below)
{
	uint64_t n = 0, visited = 0, t0 = kvt_now_ns();
	bool one = slot < s->slot_count;
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		pthread_mutex_lock(&sh->lock);
		if (one && sh->slot_heads) {
			struct ssd_entry *e = sh->slot_heads[slot], *next;
			for (; e; e = next) {
				struct ssd_entry **pp;
				next = e->snext; /* removing e leaves next linked */
				visited++;
				if (e->slot != slot) /* a bug: on another slot's list */
					A(s->slot_list_errors);
				if (!sweep_takes(e, ns, slot, gen, below))
					continue;
				pp = idx_link_of(s, sh, e);
				if (!pp) /* not in the table: cannot be (above) */
					continue;
				if (!(e->flags & E_PENDING))
					n++;
				ssd_idx_remove_locked(s, sh, pp);
			}
			pthread_mutex_unlock(&sh->lock);
			continue;
		}
		n += idx_sweep_shard(s, sh, ns, slot, gen, below, &visited);
		pthread_mutex_unlock(&sh->lock);
	}
	if (slot != UINT32_MAX)
		slot_sweep_note(s, visited, t0);
	return n;
}

/* Does the summary v[0..n) (rising offsets) name e at its offset?  A
 * summary out of order names less: its entries go early (a miss). */
static bool sum_names(const struct ssd_entry *e, const struct ssd_sum_entry *v, size_t n)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].off_512 < e->off_512)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].off_512 == e->off_512 && v[lo].ns_id == e->ns &&
	       v[lo].key.len == e->key_len && memcmp(v[lo].key.bytes, e->key, e->key_len) == 0;
}

/*
 * Progressive reuse reclaims an old record (evict_entry_cb) when the new
 * generation's writes are about to reach it -- but only the records its
 * summary names.  An indexed record the summary does not name went at the
 * seal, after it was overwritten: a part read whose first read passed
 * before the overwrite then had only the part's CRC32C against another
 * record's bytes, and a read after it counted a header error (review47a:
 * a checkpoint names the dead entries of a quarantined segment, and a
 * reopen's walk of it stops at the failed write, so its seal's summary
 * names none past it; test_ssd part_reclaim_unnamed).  So they go here,
 * before the first write.  Writer thread, seg_lock held.
 */
uint64_t ssd_idx_sweep_unnamed(struct ssd *s, uint32_t slot, uint64_t gen,
			       const struct ssd_sum_entry *v, size_t n)
{
	uint64_t gone = 0, visited = 0, t0 = kvt_now_ns();
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		pthread_mutex_lock(&sh->lock);
		if (sh->slot_heads) {
			struct ssd_entry *e = sh->slot_heads[slot], *next;
			for (; e; e = next) {
				struct ssd_entry **pp;
				next = e->snext;
				visited++;
				if (e->slot != slot || e->generation != gen ||
				    (e->flags & E_CARRY) || sum_names(e, v, n))
					continue;
				pp = idx_link_of(s, sh, e);
				if (!pp)
					continue;
				if (!(e->flags & E_PENDING))
					gone++;
				ssd_idx_remove_locked(s, sh, pp);
			}
		} else {
			for (uint64_t b = 0; b < ssd_idx_chains(sh); b++) {
				struct ssd_entry **pp = ssd_idx_chain(sh, b);
				while (*pp) {
					struct ssd_entry *e = *pp;
					visited++;
					if (e->slot == slot && e->generation == gen &&
					    !(e->flags & E_CARRY) && !sum_names(e, v, n)) {
						if (!(e->flags & E_PENDING))
							gone++;
						ssd_idx_remove_locked(s, sh, pp);
					} else {
						pp = &e->hnext;
					}
				}
			}
		}
		pthread_mutex_unlock(&sh->lock);
	}
	slot_sweep_note(s, visited, t0);
	return gone;
}

/* Kill e if it is of slot's generation gen (ssd_idx_kill); whether it was
 * published.  Locked. */
static bool idx_kill_one(struct ssd *s, struct ssd_shard *sh, struct ssd_entry *e,
			 uint32_t slot, uint64_t gen)
{
	bool published = false;
	if (e->slot != slot || e->generation != gen || (e->flags & (E_CARRY | E_DEAD)))
		return false;
	if (!(e->flags & E_PENDING)) {
		sh->bytes -= e->value_len;
		sh->rec_bytes -= (uint64_t)e->len_512 * SSD_REC_ALIGN;
		quota_ssd_add(s->cfg.quota, e->ns, e->value_len, false);
		published = true;
	}
	e->flags |= E_PENDING | E_DEAD;
	sh->dead++;
	return published;
}

/*
 * Quarantine (ssd.c seg_quarantine_pending): the slot's blocks become
 * misses, but their entries stay, unpublished (E_PENDING | E_DEAD), until
 * the store reopens.  The segment is not voided on disk -- the device is
 * failing it -- so a restart may find its records again (exact or a
 * miss), and a delete that found no entry logs no tombstone: the entry
 * kept is what makes a delete of such a block log one.  Until 2026-12-05
 * the entries were removed, and a delete answered 0 after the quarantine
 * came back after a kill -9 (test_ssd quarantine_delete_kill9).  Entries
 * kept for a carry out of the slot (E_CARRY) are left, as a sweep leaves
 * them.  The slot's lists, as a sweep of one slot walks them.
 */
uint64_t ssd_idx_kill(struct ssd *s, uint32_t slot, uint64_t gen)
{
	uint64_t n = 0, visited = 0, t0 = kvt_now_ns();
	bool one = slot < s->slot_count;
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		pthread_mutex_lock(&sh->lock);
		if (one && sh->slot_heads) {
			for (struct ssd_entry *e = sh->slot_heads[slot]; e; e = e->snext) {
				visited++;
				if (e->slot != slot)
					A(s->slot_list_errors);
				n += idx_kill_one(s, sh, e, slot, gen);
			}
		} else {
			for (uint64_t b = 0; b < ssd_idx_chains(sh); b++)
				for (struct ssd_entry *e = *ssd_idx_chain(sh, b); e; e = e->hnext) {
					visited++;
					n += idx_kill_one(s, sh, e, slot, gen);
				}
		}
		pthread_mutex_unlock(&sh->lock);
	}
	slot_sweep_note(s, visited, t0);
	return n;
}

/*
 * A promotion that takes the block out of the SSD (ssd.first_hit=cold, a
 * second read: ssd.c) leaves its record on disk, readable by a recovery
 * until its segment is voided or reused: the entry of seq is kept dead
 * (as ssd_idx_kill keeps a quarantined slot's) so that a delete of the
 * block, now in DRAM alone, still logs its tombstone.  The segment's
 * eviction sweeps it (after the void), a newer record of the key replaces
 * it.  Until 2026-12-05 it was removed, the delete logged no tombstone,
 * and after a kill -9 the block was back (test_ssd promote_delete_kill9).
 * Returns whether the entry of seq was there, published.
 */
bool ssd_idx_kill_key(struct ssd *s, uint32_t ns, const struct kvt_key *k, uint64_t seq)
{
	uint64_t h = ssd_hash(s, ns, k);
	struct ssd_shard *sh = shard_of(s, h);
	struct ssd_entry **pp, *e;
	bool found = false;
	pthread_mutex_lock(&sh->lock);
	pp = ssd_idx_slot(sh, h, ns, k);
	e = *pp;
	if (e && e->seq == seq && !(e->flags & E_PENDING)) {
		sh->bytes -= e->value_len;
		sh->rec_bytes -= (uint64_t)e->len_512 * SSD_REC_ALIGN;
		quota_ssd_add(s->cfg.quota, e->ns, e->value_len, false);
		e->flags |= E_PENDING | E_DEAD;
		sh->dead++;
		found = true;
	}
	pthread_mutex_unlock(&sh->lock);
	return found;
}

void ssd_scan(struct ssd *s, uint32_t ns, void (*fn)(void *ctx, const struct kvt_key *key),
	      void *ctx)
{
	for (int i = 0; i < SSD_SHARDS; i++) {
		struct ssd_shard *sh = &s->shards[i];
		pthread_mutex_lock(&sh->lock);
		for (uint64_t b = 0; b < ssd_idx_chains(sh); b++)
			for (struct ssd_entry *e = *ssd_idx_chain(sh, b); e; e = e->hnext)
				if (e->ns == ns && !(e->flags & E_PENDING)) {
					struct kvt_key k = { .len = e->key_len };
					memcpy(k.bytes, e->key, k.len);
					fn(ctx, &k);
				}
		pthread_mutex_unlock(&sh->lock);
	}
}

/* ------------------------------------------------------------------------
 * Synchronous I/O through the engine (metadata writes, so that fault
 * injection and power-loss simulation see them too).
 */

struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void sync_done(struct io_req *r)
{
	struct sync_wait *w = r->ctx;
	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static int64_t ssd_io_sync_prio(struct ssd *s, int op, int prio, int fd, uint64_t off,
				void *buf, size_t len)
{
	struct sync_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
	struct iovec v = { buf, len };
	struct io_req r;
	memset(&r, 0, sizeof(r));
	r.opcode = (uint8_t)op;
	r.prio = (uint8_t)prio;
	r.fd = fd;
	r.off = off;
	r.iov = &v;
	r.iov_count = op == IO_FSYNC ? 0 : 1;
	r.done = sync_done;
	r.ctx = &w;
	io_submit(s->io, &r);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
	if (op != IO_FSYNC && r.res >= 0 && (uint64_t)r.res != len)
		return -EIO;
	return r.res;
}

int64_t ssd_io_sync(struct ssd *s, int op, int fd, uint64_t off, void *buf, size_t len)
{
	return ssd_io_sync_prio(s, op, IO_PRIO_WRITE, fd, off, buf, len);
}

/* Plain aligned pread (recovery): exactly len bytes or an error. */
int ssd_pread_full(struct ssd *s, int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	io_align_note(s->io, &(struct iovec){ buf, len }, 1, off);
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA;
		done += (size_t)n;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Segments
 */

/*
 * Record alignment.  A segment lays its records out at 512 bytes
 * (SSD_REC_ALIGN, the logical block of most devices) or at 4096
 * (SSD_REC_ALIGN_4K, for drives formatted with 4096-byte sectors, "4Kn",
 * whose O_DIRECT refuses anything finer: statx's dio_offset_align 4096);
 * its header says which (doc/ssd-format.md "Record alignment").  Every
 * segment this open starts uses s->rec_align: ssd.dio_align, or (auto)
 * the device's O_DIRECT offset alignment, probed once at open.  Segments
 * of the other alignment, from an earlier open, stay readable: a read
 * learns a record's layout from its length (ssd_rec_align_of).
 *
 * O_DIRECT is then a per-slot matter: a file keeps it while the device's
 * alignment is no finer than its generation's records; otherwise the file
 * goes through the page cache, said once in the log -- never an I/O error
 * at the first write.  Beyond 4096 (a 64 KiB-sector device) no alignment
 * fits: records stay at 512, in the page cache, as before 4096 existed.
 * Every buffer the tier reads into or writes from is 4096-aligned (header
 * buffers from kvt_mem_alloc_aligned, DRAM's runs), which meets any
 * dio_mem_align up to 4096; a device asking more is refused the same way.
 * Unknown alignment (no STATX_DIOALIGN): trusted.
 */
static uint32_t seg_dio_need(int fd)
{
	struct statx sx;
	uint32_t need;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) < 0 ||
	    !(sx.stx_mask & STATX_DIOALIGN))
		return 0;
	if (sx.stx_dio_offset_align == 0) /* O_DIRECT not supported on this file */
		return UINT32_MAX;
	need = sx.stx_dio_offset_align;
	if (sx.stx_dio_mem_align > SSD_REC_ALIGN_4K)
		return UINT32_MAX;
	return need;
}

void ssd_rec_align_pick(struct ssd *s)
{
	uint32_t need = 0;
	int fd;
	if (s->cfg.dio_align != 0) {
		s->rec_align = (uint32_t)s->cfg.dio_align;
		return;
	}
	/* A nameless file in ssd/ tells what the device wants of O_DIRECT. */
	fd = openat(s->dir_fd, ".", O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		need = seg_dio_need(fd);
		close(fd);
	}
	s->rec_align = need > SSD_REC_ALIGN && need <= SSD_REC_ALIGN_4K ? SSD_REC_ALIGN_4K
									 : SSD_REC_ALIGN;
	if (s->rec_align != SSD_REC_ALIGN)
		kvt_logf(s->log, KVT_LOG_INFO,
			 "ssd: O_DIRECT needs %u-byte offsets here: records are %u-byte aligned",
			 need, s->rec_align);
}

void ssd_seg_set_align(struct ssd *s, uint32_t slot, uint32_t align)
{
	struct ssd_seg *g = &s->segs[slot];
	bool want;
	int fl;
	g->rec_align = align;
	want = g->dio_ok && g->dio_need <= align;
	if (g->fd < 0 || want == g->direct)
		return;
	fl = fcntl(g->fd, F_GETFL);
	if (fl < 0 || fcntl(g->fd, F_SETFL, want ? fl | O_DIRECT : fl & ~O_DIRECT) < 0)
		return;
	g->direct = want;
	if (!want && !s->dio_warned) {
		s->dio_warned = true;
		if (g->dio_need == UINT32_MAX)
			kvt_logf(s->log, KVT_LOG_WARN,
				 "ssd: seg-%06u: O_DIRECT needs more than 4096-byte alignment here: "
				 "using the page cache", slot);
		else
			kvt_logf(s->log, KVT_LOG_WARN,
				 "ssd: seg-%06u: O_DIRECT needs %u-byte offsets here, records are "
				 "%u-byte aligned: using the page cache", slot, g->dio_need, align);
	}
}

/*
 * A new segment file's name.  Its records' fdatasyncs make its data
 * durable, not its directory entry: after a power loss a file created in
 * the log's first lap, every record of it synced, could be gone, and with
 * it blocks a flush answered durable (or deletes' tombstones).  So the
 * file that an open creates has ssd/ fsynced at once, before its header
 * or any record is written -- once a file, as the checkpoint's rename and
 * ssd/id are (ssd_recover.c).  A failed one removes the file again, so
 * that the next try creates it (and syncs) anew.  ssd.seg_dir_syncs counts
 * them.  Until session 46 no segment file's name was synced (test_ssd
 * seg_dir_sync).
 */
int ssd_seg_open_file(struct ssd *s, uint32_t slot, bool create)
{
	struct ssd_seg *g = &s->segs[slot];
	char name[32];
	int fd;
	if (g->fd >= 0)
		return 0;
	snprintf(name, sizeof(name), "seg-%06u", slot);
	fd = io_open_file(s->io, s->dir_fd, name, O_RDWR | O_CLOEXEC, 0600, &g->dio_ok);
	if (fd == -ENOENT && create) {
		fd = io_open_file(s->io, s->dir_fd, name, O_RDWR | O_CLOEXEC | O_CREAT | O_EXCL,
				  0600, &g->dio_ok);
		if (fd >= 0 && fsync(s->dir_fd) < 0) {
			int r = -errno;
			close(fd);
			(void)unlinkat(s->dir_fd, name, 0);
			return r;
		}
		if (fd >= 0)
			A(s->seg_dir_syncs);
	} else if (fd >= 0 && !atomic_load(&s->seg_dir_synced)) {
		/* A file this open found: its name may never have been synced
		 * (a kill -9 between a create and its directory's fsync, above),
		 * and nothing here would sync it again.  ssd/ once an open, at
		 * the first such file (review46e; test_ssd seg_dir_sync). */
		if (fsync(s->dir_fd) < 0) {
			int r = -errno;
			close(fd);
			return r;
		}
		atomic_store(&s->seg_dir_synced, true);
		A(s->seg_dir_syncs);
	}
	if (fd < 0)
		return fd;
	g->direct = g->dio_ok;
	g->dio_need = g->dio_ok ? seg_dio_need(fd) : 0;
	__atomic_store_n(&g->fd, fd, __ATOMIC_RELAXED);
	/* Until its generation says otherwise (recovery, a new one): the
	 * store's alignment. */
	ssd_seg_set_align(s, slot, g->rec_align ? g->rec_align : s->rec_align);
	return 0;
}

/* Write the slot's segment header.  Called by the writer thread. */
int ssd_seg_write_hdr(struct ssd *s, uint32_t slot, uint64_t sum_off, uint64_t sum_len)
{
	struct ssd_seg *g = &s->segs[slot];
	struct ssd_seg_hdr h;
	uint8_t *buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, SSD_ALIGN);
	int64_t r;
	if (!buf)
		return -ENOMEM;
	memset(&h, 0, sizeof(h));
	/* A format-3 generation keeps its version (4) when sealed. */
	h.version = g->batches ? SSD_SEG_VERSION_BATCH : 0;
	h.rec_align = g->rec_align;
	h.slot = slot;
	h.generation = g->generation;
	h.seg_size = s->cfg.seg_size;
	h.created_ns = wall_ns();
	h.summary_off = sum_off;
	h.summary_len = sum_len;
	memcpy(h.store_id, s->store_id, 16);
	ssd_seg_hdr_encode(&h, buf);
	r = ssd_io_sync(s, IO_WRITE, g->fd, 0, buf, SSD_ALIGN);
	kvt_mem_free(s->mem, buf, SSD_ALIGN);
	g->dirty = true;
	return r < 0 ? (int)r : 0;
}

/*
 * Tombstones at risk.  A quarantined segment is neither synced again nor
 * sealed, so a tombstone placed in it is lost unless it was durable
 * already and a recovery walk (or a durable summary) reaches it.  So
 * every quarantine's cause -- a failed write, fdatasync, seal or read, an
 * eviction or reuse that could not void the slot -- marks the slot here,
 * and here alone it is judged: lost when a tombstone there is not yet
 * covered by an fdatasync that began after it and every write placed
 * before it completed (tomb_synced, ssd_sync_all_prio), or lies past a
 * hole (a write that failed or may be lost: tomb_hole) that no durable
 * summary covers (seal_synced).  Lost: every later delete and flush fails
 * until the store reopens (ssd_tombs_lost).  A tombstone synced before the
 * fault loses nothing, and deletes go on (before 2026-12-05 any tombstone
 * of the generation failed every later delete, and a failed seal was not
 * looked at: test_ssd tomb_synced_eio, seal_fail_tomb, seal_hole_tomb).
 */

/* Tombstones lie past the first hole here (a write that failed or may be
 * lost, kept as ssd_seg_hole says), with no durable summary listing them. */
static bool seg_tombs_past_hole(struct ssd_seg *g)
{
	uint64_t h = atomic_load(&g->tomb_hole);
	return h != 0 && atomic_load(&g->tomb_placed) > (h - 1) / 2 &&
	       !atomic_load(&g->seal_synced);
}

static bool seg_tombs_at_risk(struct ssd_seg *g)
{
	uint64_t placed = atomic_load(&g->tomb_placed), synced = atomic_load(&g->tomb_synced);
	uint64_t h = atomic_load(&g->tomb_hole), tag, before;
	if (h == 0)
		return placed > synced;
	/* The hole: a write tagged tag; the tombstones before it (a failed
	 * tombstone is not one of them: it is logged again elsewhere, and
	 * the syncs wait for that), and those after it. */
	tag = (h - 1) / 2;
	before = (h - 1) % 2 ? tag : tag - 1;
	return (placed < before ? placed : before) > synced || seg_tombs_past_hole(g);
}

void ssd_seg_tombs_check(struct ssd *s, uint32_t slot, int err)
{
	char why[96];
	if (!seg_tombs_at_risk(&s->segs[slot]))
		return;
	snprintf(why, sizeof(why), "segment %u quarantined (%s)", slot, kvt_strerror(err));
	ssd_tombs_lost(s, why);
}

/*
 * An I/O error in a slot: from any thread (I/O completions included), so
 * only an atomic mark and a wake-up; the writer thread quarantines it
 * (seg_quarantine_pending), since it alone may hold seg_lock across I/O.
 * Its tombstones are looked at now (above), before the caller answers
 * anyone: a delete's sync after this sees the loss (wd_sync_lost).
 */
void ssd_seg_mark_bad(struct ssd *s, uint32_t slot, int err)
{
	int zero = 0;
	atomic_compare_exchange_strong(&s->segs[slot].bad_err, &zero, err);
	pthread_mutex_lock(&s->wd_lock);
	atomic_fetch_add(&s->bad_marks, 1);
	pthread_cond_broadcast(&s->wd_cond);
	pthread_mutex_unlock(&s->wd_lock);
	ssd_seg_tombs_check(s, slot, err);
}

/*
 * Tombstones may be lost (a segment holding some not yet durable was
 * quarantined): every later delete and flush fails until the store
 * reopens (ssd.deletes_lost).  Any thread; logged once.
 */
void ssd_tombs_lost(struct ssd *s, const char *why)
{
	bool was;
	pthread_mutex_lock(&s->wd_lock);
	was = s->tomb_dropped;
	s->tomb_dropped = true;
	pthread_mutex_unlock(&s->wd_lock);
	if (!was)
		kvt_logf(s->log, KVT_LOG_ERROR,
			 "ssd: %s holding deletes not yet durable: they may come back after a "
			 "restart; every later delete fails until the store reopens", why);
}

int ssd_seg_sum_room(struct ssd *s, struct ssd_seg *g, size_t n)
{
	size_t ncap = g->sum_cap ? g->sum_cap : 256;
	struct ssd_sum_entry *sum;

	if (g->sum_count + n <= g->sum_cap)
		return 0;
	while (ncap < g->sum_count + n)
		ncap *= 2;
	sum = kvt_mem_realloc(s->mem, g->sum, g->sum_cap * sizeof(*sum), ncap * sizeof(*sum));
	if (!sum)
		return -ENOMEM;
	g->sum = sum;
	g->sum_cap = ncap;
	return 0;
}

void ssd_seg_sum_free(struct ssd *s, struct ssd_seg *g)
{
	kvt_mem_free(s->mem, g->sum, g->sum_cap * sizeof(*g->sum));
	g->sum = NULL;
	g->sum_count = g->sum_cap = 0;
	g->sum_bytes = 0;
}

/*
 * Seal the open segment: write its summary, then its header.  seg_lock held.
 *
 * The header names the summary, and from then on recovery and fsck take
 * the summary's word for what the segment holds (its records are not
 * walked).  So it waits for every write placed in the segment to land
 * (infl_cur, infl_old: counted in flight by wd_placed, down in wd_finish,
 * which takes wd_lock and shard locks, never seg_lock) before either is
 * written.  Until 2026-12-07 it did not: a segment filled while an earlier
 * write of it was still in flight (a 300 KiB record on a psync worker, a
 * batch in the ring) was sealed on the other workers, and a kill -9 before
 * that write landed left a sealed segment whose summary named a record
 * never written -- "record header damaged", damage after a kill alone
 * (test_crashloop, CI of 1fa138b7; test_ssd_fsck seal_inflight), or a
 * batched value failing its value_crc that a later checkpoint's write
 * point made damage.  The writer waits at most one segment's last writes,
 * once a segment.
 *
 * Power loss: landed is not durable.  A device may keep the summary and
 * header and lose records written before them (nothing orders them but a
 * flush), and recovery takes a sealed segment's summary unchecked: after
 * a power loss its entries past the checkpoint named values never on the
 * device, indexed (misses at their read, by their CRCs), and the next
 * checkpoint's write point made fsck's "torn" warning damage.  So the
 * seal fdatasyncs the segment before it writes the summary: one
 * fdatasync a segment (bench/RESULTS.md, session 44 power44; test_ssd_fsck
 * seal_powerloss).  A failed one seals nothing: the slot is quarantined
 * (-EIO, below), as a failed sync's is.  Until 2026-12-07 it did not.
 */
/* The tombstones here that an fdatasync beginning now covers (*covers),
 * if any can be said to be ("Tombstones at risk", above; ssd_sync_all_prio
 * says how).  Takes wd_lock. */
static bool seg_sync_covers(struct ssd *s, struct ssd_seg *g, uint64_t *covers)
{
	bool has = false;
	pthread_mutex_lock(&s->wd_lock);
	if (g->infl_old == 0) {
		has = true;
		*covers = g->tomb_done == g->infl_tag ? g->infl_tag : g->infl_tag - 1;
	}
	pthread_mutex_unlock(&s->wd_lock);
	return has;
}

/*
 * An fdatasync of a slot's file from under seg_lock: the seal's, an
 * eviction's void, a reuse's new header.  It takes the segment's dirty
 * flag before it begins, as ssd_sync_all_prio does, and when it succeeds
 * moves tomb_synced to what it covered: until session 46 these left the
 * flag set, so the next flush or delete's sync fdatasynced the file again
 * for nothing (an evicted slot's, a reused one's header), and the
 * tombstones the seal's sync made durable were still held at risk -- a
 * summary write failing after it then failed every later delete
 * (test_ssd seal_sync_clean).  No race with a sync: ssd_sync_all_prio
 * reads the flag under seg_lock, so it finds the segment clean only once
 * this fdatasync has ended; a write completing meanwhile marks it again
 * (wd_finish).  A failed one leaves the flag clear, as a sync's does (the
 * caller quarantines the slot).  0 or -EIO.
 */
int ssd_seg_fsync_locked(struct ssd *s, uint32_t slot)
{
	struct ssd_seg *g = &s->segs[slot];
	uint64_t covers = 0;
	bool has;
	atomic_store(&g->dirty, false);
	/* A sync's fdatasync of the file in flight (taken before seg_lock
	 * was; none can start while it is held): Linux reports a writeback
	 * error to one caller -- if that one hears it, this one succeeds,
	 * and moving tomb_synced here would put the sync's hole past
	 * tombstones the error may have lost (a delete answered 0, then
	 * back after a power loss).  This one then counts nothing (review46e;
	 * test_ssd seal_sync_overlap). */
	has = atomic_load(&g->syncs_out) == 0 && seg_sync_covers(s, g, &covers);
	if (ssd_io_sync(s, IO_FSYNC, g->fd, 0, NULL, 0) < 0)
		return -EIO;
	if (has && covers > atomic_load(&g->tomb_synced))
		atomic_store(&g->tomb_synced, covers);
	return 0;
}

static void seg_wait_landed(struct ssd *s, struct ssd_seg *g)
{
	pthread_mutex_lock(&s->wd_lock);
	while (g->infl_cur + g->infl_old > 0)
		pthread_cond_wait(&s->wd_cond, &s->wd_lock);
	pthread_mutex_unlock(&s->wd_lock);
}

void ssd_seg_seal_locked(struct ssd *s)
{
	int32_t slot = s->open_slot;
	struct ssd_seg *g;
	uint64_t len, synced;
	uint8_t *buf;
	int64_t n;
	int r = 0;

	if (slot < 0)
		return;
	g = &s->segs[slot];
	s->open_slot = -1;
	seg_wait_landed(s, g);
	len = align4k(g->sum_bytes);
	buf = kvt_mem_alloc_aligned(s->mem, SSD_ALIGN, len);
	/* What an fdatasync before this one made durable: the sync thread's
	 * may run beside this one (not under sync_run_lock), and Linux tells
	 * a file's writeback error to one caller -- if this one hears it and
	 * the sync thread's succeeds after, tomb_synced moves past tombstones
	 * this failure may have lost (review44e).  The hole is put where
	 * tomb_synced stood before it. */
	synced = atomic_load(&g->tomb_synced);
	if (!buf) {
		r = -ENOMEM;
	} else if (ssd_seg_fsync_locked(s, (uint32_t)slot) < 0) {
		/* The records durable before the summary that names them
		 * ("Power loss", above). */
		r = -EIO;
		ssd_seg_hole(g, synced, false);
		kvt_mem_free(s->mem, buf, len);
	} else {
		n = ssd_sum_encode(ssd_seg_sum_version(g), g->generation, g->sum, g->sum_count,
				   buf, len);
		if (n < 0)
			r = (int)n;
		else if ((r = (int)ssd_io_sync(s, IO_WRITE, g->fd, g->write_off, buf, (size_t)n)) >=
			 0)
			r = ssd_seg_write_hdr(s, (uint32_t)slot, g->write_off, (uint64_t)n);
		kvt_mem_free(s->mem, buf, len);
	}
	AN(s->sealed_records, g->sum_count);
	g->rec_end = g->write_off;
	ssd_seg_sum_free(s, g);
	if (r < 0) {
		/* Without a summary recovery walks the records: still correct,
		 * unless a write here failed -- the walk stops at that hole,
		 * short of the records after it: blocks (misses after a
		 * restart: a cache's loss) and tombstones (deletes undone).
		 * With tombstones past it the segment is quarantined, as one
		 * the device fails (EIO), and they are judged there
		 * (ssd_seg_mark_bad; before 2026-12-05 a seal failing ENOSPC
		 * over a hole left it sealed in name, and a delete was
		 * answered 0 whose tombstone a kill -9 then lost: test_ssd
		 * seal_hole_tomb). */
		kvt_logf(s->log, KVT_LOG_WARN, "ssd: sealing segment %d: %s", slot,
			 kvt_strerror(r));
		if (r == -EIO || seg_tombs_past_hole(g))
			ssd_seg_mark_bad(s, (uint32_t)slot, r);
	} else {
		g->sealed_ok = true;
	}
	if (g->state == SEG_OPEN)
		g->state = SEG_SEALED;
	A(s->seg_sealed);
	s->seals_since_ckpt++;
}

/*
 * fsync every dirty segment file (flush, a delete's sync, and before a
 * checkpoint).  The writer and the sync thread both call it: one at a
 * time (sync_run_lock), so that a sync that finds a segment clean knows
 * the one that took its flag has finished its fdatasync.  A write marks
 * its segment dirty when it completes (wd_finish) as well as when placed:
 * a write in flight while a sync took the flag marks it again.
 *
 * A successful fdatasync also moves the segment's tomb_synced ("Tombstones
 * at risk", above) to what it covers: read after the dirty flag is taken
 * and before the fdatasync begins, under wd_lock, where wd_finish counts a
 * completed write (and marks the segment dirty again) -- the tombstones
 * whose writes, and every write placed before them in the segment, had
 * completed (tomb_done, infl_old; the writer places one write at a time,
 * so writes placed before a tombstone carry a smaller tag).  A completion
 * counted after a sync took the flag leaves it set for the next sync, so
 * each is covered by the first sync that reads it.  A segment whose writes
 * never pause keeps a tombstone at risk while a newer one waits on an
 * older write; the sync after the segment seals covers it.
 */
int ssd_sync_all_prio(struct ssd *s, int prio)
{
	int ret = 0;
	pthread_mutex_lock(&s->sync_run_lock);
	for (uint32_t i = 0; i < s->slot_count; i++) {
		struct ssd_seg *g = &s->segs[i];
		uint64_t covers = 0, gen;
		bool dirty, has = false, sealed;
		pthread_mutex_lock(&s->seg_lock);
		dirty = atomic_exchange(&g->dirty, false) && g->fd >= 0 && g->state != SEG_BAD;
		sealed = g->sealed_ok;
		gen = g->generation;
		if (dirty) {
			has = seg_sync_covers(s, g, &covers);
			atomic_fetch_add(&g->syncs_out, 1);
		}
		pthread_mutex_unlock(&s->seg_lock);
		if (dirty) {
			int64_t r = ssd_io_sync_prio(s, IO_FSYNC, prio, g->fd, 0, NULL, 0);
			if (r < 0 && ret == 0)
				ret = (int)r;
			/* What the failed fdatasync covered may not be on the
			 * device, and a second one would not say so (Linux
			 * reports a writeback error to a file once): the slot
			 * is quarantined, its blocks misses, and what lies past
			 * the last durable tombstone may be a hole.  Left
			 * dirty-less, the next sync skipped it and reported
			 * success.  Its tombstones are judged in
			 * ssd_seg_mark_bad before sync_run_lock goes: a delete's
			 * sync that finds the segment clean after this one sees
			 * the loss (ssd.c wd_sync_lost). */
			if (r < 0) {
				ssd_seg_hole(g, atomic_load(&g->tomb_synced), false);
				ssd_seg_mark_bad(s, i, (int)r);
			} else {
				if (has && covers > atomic_load(&g->tomb_synced))
					atomic_store(&g->tomb_synced, covers);
				/* The generation whose seal it read: the writer may
				 * have reused the slot during the fdatasync, and the
				 * new generation has no summary yet (seg_gen_reset_locked
				 * cleared seal_synced; before review28 this store
				 * set it again: test_ssd seal_synced_reuse). */
				if (sealed) {
					pthread_mutex_lock(&s->seg_lock);
					if (g->generation == gen && g->sealed_ok)
						atomic_store(&g->seal_synced, true);
					pthread_mutex_unlock(&s->seg_lock);
				}
			}
			atomic_fetch_sub(&g->syncs_out, 1);
		}
	}
	pthread_mutex_unlock(&s->sync_run_lock);
	return ret;
}

int ssd_sync_all(struct ssd *s)
{
	return ssd_sync_all_prio(s, IO_PRIO_WRITE);
}
