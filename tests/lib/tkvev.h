/*
 * tkvev.h - reading decoded KV event batches (vLLM 0.32's layout,
 * doc/kvevents.md) in tests: an event's field by name.
 */
#ifndef KVT_TEST_TKVEV_H
#define KVT_TEST_TKVEV_H

#include <msgpack.h>

#include "t.h"

/* The value of field name in event map e; fails the test if e is not a
 * map or has no such field. */
static inline const msgpack_object *t_ev_field(const msgpack_object *e, const char *name)
{
	T_EQ_INT(e->type, MSGPACK_OBJECT_MAP);
	for (uint32_t i = 0; i < e->via.map.size; i++) {
		const msgpack_object_kv *kv = &e->via.map.ptr[i];
		if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(name) &&
		    memcmp(kv->key.via.str.ptr, name, kv->key.via.str.size) == 0)
			return &kv->val;
	}
	T_FAIL("event has no field %s", name);
	return NULL;
}

#endif
