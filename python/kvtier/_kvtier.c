/*
 * _kvtier.c - the CPython binding of libkvtier (the "kvtier" package).
 *
 * Owns the Python objects kvtier.Store and kvtier.Error and the module
 * functions for keys and namespaces; everything else is include/kvtier.h.
 * The package's Python half (python/kvtier/__init__.py) re-exports these
 * and holds the documentation of the whole; __init__.pyi the types.
 *
 * Invariants:
 *   - Values are never copied here: a put hands the library the memory of
 *     the caller's buffer-protocol objects (held by Py_buffer views for
 *     the duration of the call), a get_into the caller's writable memory.
 *     The library's one copy is the only one.
 *   - The GIL is released around every call into the library that may
 *     block or take a lock (put, get, lookup, prefetch, flush, queue
 *     waits, open, close, stats); Python objects are built only with it.
 *   - kvt_store_close must not run concurrently with other calls on the
 *     store (kvtier.h): every call holds store_obj.lock for reading while
 *     it is in the library, close takes it for writing.  The lock is taken
 *     only after the GIL is released, so it cannot deadlock against it.
 *   - A miss is a result: get() returns None, get_into() returns 0 (no
 *     value is ever empty, so 0 is never a length), exists()/delete()
 *     return False.  Every negative code raises kvtier.Error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kvtier.h"

static PyObject *kvt_error; /* kvtier.Error */

/* A method table entry from a function of a more specific type. */
#define FN(f) ((PyCFunction)(void (*)(void))(f))

/* ------------------------------------------------------------------------
 * Errors
 */

/* o.name = v, taking v's reference (NULL v: the error in flight). */
static int set_attr(PyObject *o, const char *name, PyObject *v)
{
	int ret;
	if (!v)
		return -1;
	ret = PyObject_SetAttrString(o, name, v);
	Py_DECREF(v);
	return ret;
}

/* Raise kvtier.Error(code, text) with .code and .strerror set; NULL. */
static PyObject *raise_code(int code)
{
	const char *text = kvt_strerror(code);
	PyObject *exc = PyObject_CallFunction(kvt_error, "is", code, text);
	if (!exc)
		return NULL;
	if (set_attr(exc, "code", PyLong_FromLong(code)) < 0 ||
	    set_attr(exc, "strerror", PyUnicode_FromString(text)) < 0) {
		Py_DECREF(exc);
		return NULL;
	}
	PyErr_SetObject(kvt_error, exc);
	Py_DECREF(exc);
	return NULL;
}

/* ------------------------------------------------------------------------
 * Argument conversion
 */

/* Fill *key from a bytes-like object of 1..64 bytes.  0 or -1 (raised). */
static int key_from(PyObject *o, struct kvt_key *key)
{
	Py_buffer b;
	int ret;
	if (PyObject_GetBuffer(o, &b, PyBUF_SIMPLE) < 0)
		return -1;
	ret = kvt_key_set(key, b.buf, (size_t)b.len);
	PyBuffer_Release(&b);
	if (ret < 0) {
		raise_code(ret);
		return -1;
	}
	return 0;
}

/* Keys from a sequence of bytes-like objects into a new array (*count). */
static struct kvt_key *keys_from(PyObject *seq, size_t *count)
{
	PyObject *fast = PySequence_Fast(seq, "keys must be a sequence of bytes");
	struct kvt_key *keys;
	Py_ssize_t n;
	if (!fast)
		return NULL;
	n = PySequence_Fast_GET_SIZE(fast);
	keys = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*keys));
	if (!keys) {
		Py_DECREF(fast);
		PyErr_NoMemory();
		return NULL;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		if (key_from(PySequence_Fast_GET_ITEM(fast, i), &keys[i]) < 0) {
			PyMem_Free(keys);
			Py_DECREF(fast);
			return NULL;
		}
	}
	Py_DECREF(fast);
	*count = (size_t)n;
	return keys;
}

/*
 * Tokens as uint32: a buffer of 4-byte unsigned integers (numpy uint32,
 * array('I')) is used in place, through *view; anything else is iterated
 * as ints in [0, 2^32) into *owned (PyMem_Free it).  0 or -1 (raised).
 */
static int tokens_from(PyObject *o, Py_buffer *view, uint32_t **owned,
		       const uint32_t **tokens, size_t *count)
{
	PyObject *fast;
	Py_ssize_t n;
	*owned = NULL;
	view->obj = NULL;
	if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
		if (PyObject_GetBuffer(o, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
			return -1;
		const char *f = view->format ? view->format : "B";
		if (*f == '=' || *f == '<' || *f == '@')
			f++;
		if (view->itemsize == 4 && (!strcmp(f, "I") || !strcmp(f, "L"))) {
			*tokens = view->buf;
			*count = (size_t)(view->len / 4);
			return 0;
		}
		PyBuffer_Release(view);
		view->obj = NULL;
	}
	fast = PySequence_Fast(o, "tokens must be a sequence of ints or a uint32 buffer");
	if (!fast)
		return -1;
	n = PySequence_Fast_GET_SIZE(fast);
	*owned = PyMem_Malloc(n ? (size_t)n * 4 : 4);
	if (!*owned) {
		Py_DECREF(fast);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		/* __index__ first: numpy integer scalars are not int subclasses */
		PyObject *iv = PyNumber_Index(PySequence_Fast_GET_ITEM(fast, i));
		unsigned long long v;
		if (!iv)
			goto fail;
		v = PyLong_AsUnsignedLongLong(iv);
		Py_DECREF(iv);
		if (v == (unsigned long long)-1 && PyErr_Occurred())
			goto fail;
		if (v > UINT32_MAX) {
			PyErr_Format(PyExc_OverflowError, "token %zd (%llu) is not a u32", i, v);
			goto fail;
		}
		(*owned)[i] = (uint32_t)v;
	}
	Py_DECREF(fast);
	*tokens = *owned;
	*count = (size_t)n;
	return 0;
fail:
	Py_DECREF(fast);
	PyMem_Free(*owned);
	*owned = NULL;
	return -1;
}

static void tokens_release(Py_buffer *view, uint32_t *owned)
{
	if (view->obj)
		PyBuffer_Release(view);
	PyMem_Free(owned);
}

/* Optional bytes-like object (None: empty).  0 or -1 (raised). */
static int opt_buffer(PyObject *o, Py_buffer *b)
{
	if (!o || o == Py_None) {
		memset(b, 0, sizeof(*b));
		return 0;
	}
	return PyObject_GetBuffer(o, b, PyBUF_SIMPLE);
}

static void opt_release(Py_buffer *b)
{
	if (b->obj)
		PyBuffer_Release(b);
}

/* The key chain functions' tokens and optional extra bytes, taken together
 * (tokens_from, opt_buffer): release with chain_in_release. */
struct chain_in {
	Py_buffer tv, ev;
	uint32_t *owned;
	const uint32_t *tokens;
	size_t count;
};

/* 0, or -1 (raised: nothing held). */
static int chain_in_from(PyObject *toks, PyObject *extrao, struct chain_in *in)
{
	if (tokens_from(toks, &in->tv, &in->owned, &in->tokens, &in->count) < 0)
		return -1;
	if (opt_buffer(extrao, &in->ev) < 0) {
		tokens_release(&in->tv, in->owned);
		return -1;
	}
	return 0;
}

static void chain_in_release(struct chain_in *in)
{
	tokens_release(&in->tv, in->owned);
	opt_release(&in->ev);
}

/* A 32-byte digest argument.  0 or -1 (raised). */
static int digest_from(PyObject *o, uint8_t digest[32])
{
	Py_buffer b;
	if (PyObject_GetBuffer(o, &b, PyBUF_SIMPLE) < 0)
		return -1;
	if (b.len != 32) {
		PyBuffer_Release(&b);
		PyErr_SetString(PyExc_ValueError, "a namespace digest is 32 bytes");
		return -1;
	}
	memcpy(digest, b.buf, 32);
	PyBuffer_Release(&b);
	return 0;
}

/*
 * A namespace descriptor from a dict.  Strings stay owned by the dict's
 * str objects (UTF-8 cache), which the caller keeps alive.  Unknown keys
 * are refused so that a typo cannot silently change the digest.
 */
static int desc_from(PyObject *d, struct kvt_ns_desc *desc)
{
	static const char *const str_keys[] = { "model", "config_hash", "dtype", "kv_quant",
						"layout", "tenant" };
	static const char *const int_keys[] = { "block_tokens", "tp_rank", "tp_size",
						"pp_rank", "pp_size", "replicas" };
	/* KVT_NS_* by name: persistent and retain are policy, not identity */
	static const char *const flag_keys[] = { "rank_agnostic", "persistent", "retain" };
	static const uint32_t flag_bits[] = { KVT_NS_RANK_AGNOSTIC, KVT_NS_PERSISTENT,
					      KVT_NS_RETAIN };
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	memset(desc, 0, sizeof(*desc));
	desc->tp_size = desc->pp_size = 1;
	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "a namespace descriptor is a dict");
		return -1;
	}
	while (PyDict_Next(d, &pos, &k, &v)) {
		const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
		const char **sfield[] = { &desc->model, &desc->config_hash, &desc->dtype,
					  &desc->kv_quant, &desc->layout, &desc->tenant };
		uint32_t *ifield[] = { &desc->block_tokens, &desc->tp_rank, &desc->tp_size,
				       &desc->pp_rank, &desc->pp_size, &desc->replicas };
		int found = 0;
		if (!name) {
			PyErr_SetString(PyExc_TypeError, "descriptor keys are str");
			return -1;
		}
		for (size_t i = 0; i < sizeof(str_keys) / sizeof(*str_keys) && !found; i++) {
			if (strcmp(name, str_keys[i]))
				continue;
			found = 1;
			if (v == Py_None)
				*sfield[i] = NULL;
			else if (!PyUnicode_Check(v) || !(*sfield[i] = PyUnicode_AsUTF8(v))) {
				if (!PyErr_Occurred())
					PyErr_Format(PyExc_TypeError, "descriptor %s: a str", name);
				return -1;
			}
		}
		for (size_t i = 0; i < sizeof(int_keys) / sizeof(*int_keys) && !found; i++) {
			unsigned long x;
			if (strcmp(name, int_keys[i]))
				continue;
			found = 1;
			x = PyLong_AsUnsignedLong(v);
			if (x == (unsigned long)-1 && PyErr_Occurred())
				return -1;
			if (x > UINT32_MAX) {
				PyErr_Format(PyExc_OverflowError, "descriptor %s: not a u32", name);
				return -1;
			}
			*ifield[i] = (uint32_t)x;
		}
		for (size_t i = 0; i < sizeof(flag_keys) / sizeof(*flag_keys) && !found; i++) {
			int t;
			if (strcmp(name, flag_keys[i]))
				continue;
			found = 1;
			if ((t = PyObject_IsTrue(v)) < 0)
				return -1;
			if (t)
				desc->flags |= flag_bits[i];
		}
		if (!found) {
			PyErr_Format(PyExc_ValueError, "unknown namespace descriptor key '%s'", name);
			return -1;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * kvtier.Store
 */

struct store_obj {
	PyObject_HEAD
	struct kvt_store *store;
	pthread_rwlock_t lock;   /* read: a call in the library; write: open/close */
	int opened;              /* 1 after a successful open; under lock (write) */
	atomic_int inflight;     /* calls now inside the library without the GIL */
	atomic_int inflight_peak; /* most such calls seen at once (GIL release proof) */
	/* Queues for store_run_req, reused and destroyed only at close, once
	 * the library's threads are joined: a completing thread writes the
	 * queue's eventfd after the completion is visible to poll (lib/store.c
	 * req_complete), so destroying a queue right after its wait could
	 * close that fd under the write (TSan reports it in test_remote). */
	pthread_mutex_t qlock;
	struct kvt_queue **qfree;    /* under qlock; grows to the most calls at once */
	int qfree_count, qfree_cap;  /* under qlock */
};

/*
 * Enter and leave the library for one call: drop the GIL, then take the
 * store's lock for reading.  LEAVE undoes both.  Between them no Python
 * object may be touched.
 */
#define STORE_ENTER(self)                                                     \
	Py_BEGIN_ALLOW_THREADS                                                \
	pthread_rwlock_rdlock(&(self)->lock);                                 \
	store_count_in(self);
#define STORE_LEAVE(self)                                                     \
	atomic_fetch_sub(&(self)->inflight, 1);                               \
	pthread_rwlock_unlock(&(self)->lock);                                 \
	Py_END_ALLOW_THREADS

static void store_count_in(struct store_obj *self)
{
	int now = atomic_fetch_add(&self->inflight, 1) + 1;
	int peak = atomic_load(&self->inflight_peak);
	while (now > peak && !atomic_compare_exchange_weak(&self->inflight_peak, &peak, now))
		;
}

static int store_check(struct store_obj *self)
{
	if (!self->store) {
		PyErr_SetString(PyExc_ValueError, "store handle is gone");
		return -1;
	}
	return 0;
}

static int store_set_options(struct store_obj *self, PyObject *options)
{
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	if (!options || options == Py_None)
		return 0;
	if (!PyDict_Check(options)) {
		PyErr_SetString(PyExc_TypeError, "options must be a dict");
		return -1;
	}
	while (PyDict_Next(options, &pos, &k, &v)) {
		PyObject *sv = PyObject_Str(v);
		const char *name, *val;
		int ret;
		if (!sv)
			return -1;
		name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
		val = PyUnicode_AsUTF8(sv);
		if (!name || !val) {
			Py_DECREF(sv);
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "option names are str");
			return -1;
		}
		ret = kvt_store_set_option(self->store, name, val);
		Py_DECREF(sv);
		if (ret < 0) {
			raise_code(ret);
			return -1;
		}
	}
	return 0;
}

static int Store_init(struct store_obj *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "options", "open", NULL };
	PyObject *options = NULL;
	int do_open = 1, ret;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$p", kwlist, &options, &do_open))
		return -1;
	if (self->store) {
		PyErr_SetString(PyExc_RuntimeError, "Store.__init__ called twice");
		return -1;
	}
	ret = kvt_store_create(&self->store);
	if (ret < 0) {
		raise_code(ret);
		return -1;
	}
	if (store_set_options(self, options) < 0)
		return -1;
	if (do_open) {
		Py_BEGIN_ALLOW_THREADS
		ret = kvt_store_open(self->store);
		Py_END_ALLOW_THREADS
		if (ret < 0) {
			raise_code(ret);
			return -1;
		}
		self->opened = 1;
	}
	return 0;
}

static PyObject *Store_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	struct store_obj *self = (struct store_obj *)type->tp_alloc(type, 0);
	(void)args;
	(void)kw;
	if (!self)
		return NULL;
	/* Writer-preferring: with glibc's default (readers first) a steady
	 * stream of overlapping calls from several threads could keep close()
	 * waiting forever.  No call takes the read lock twice, so a waiting
	 * writer cannot deadlock a reader. */
	pthread_rwlockattr_t attr;
	int ret = pthread_rwlockattr_init(&attr);
	if (ret == 0) {
		pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		ret = pthread_rwlock_init(&self->lock, &attr);
		pthread_rwlockattr_destroy(&attr);
	}
	if (ret != 0) {
		type->tp_free((PyObject *)self); /* not dealloc: no lock to destroy */
		return PyErr_NoMemory();
	}
	if (pthread_mutex_init(&self->qlock, NULL) != 0) {
		pthread_rwlock_destroy(&self->lock);
		type->tp_free((PyObject *)self);
		return PyErr_NoMemory();
	}
	atomic_init(&self->inflight, 0);
	atomic_init(&self->inflight_peak, 0);
	return (PyObject *)self;
}

static void Store_dealloc(struct store_obj *self)
{
	if (self->store) {
		struct kvt_store *s = self->store;
		self->store = NULL;
		Py_BEGIN_ALLOW_THREADS
		kvt_store_destroy(s);
		Py_END_ALLOW_THREADS
	}
	pthread_rwlock_destroy(&self->lock);
	pthread_mutex_destroy(&self->qlock);
	free(self->qfree);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Store_set_option(struct store_obj *self, PyObject *args)
{
	const char *name, *value;
	int ret;
	if (!PyArg_ParseTuple(args, "ss", &name, &value) || store_check(self) < 0)
		return NULL;
	STORE_ENTER(self)
	ret = kvt_store_set_option(self->store, name, value);
	STORE_LEAVE(self)
	if (ret < 0)
		return raise_code(ret);
	Py_RETURN_NONE;
}

static PyObject *Store_open(struct store_obj *self, PyObject *unused)
{
	int ret;
	(void)unused;
	if (store_check(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	pthread_rwlock_wrlock(&self->lock);
	ret = kvt_store_open(self->store);
	if (ret == 0)
		self->opened = 1;
	pthread_rwlock_unlock(&self->lock);
	Py_END_ALLOW_THREADS
	if (ret < 0)
		return raise_code(ret);
	Py_RETURN_NONE;
}

/* Close; a second close is a no-op (so are close after a failed open). */
static PyObject *Store_close(struct store_obj *self, PyObject *unused)
{
	int ret = 0;
	(void)unused;
	if (!self->store)
		Py_RETURN_NONE;
	Py_BEGIN_ALLOW_THREADS
	pthread_rwlock_wrlock(&self->lock);
	if (self->opened) {
		ret = kvt_store_close(self->store);
		self->opened = 0;
		/* the library's threads are joined: no completion can still
		 * be writing to these queues' eventfds */
		pthread_mutex_lock(&self->qlock);
		while (self->qfree_count > 0)
			kvt_queue_destroy(self->qfree[--self->qfree_count]);
		pthread_mutex_unlock(&self->qlock);
	}
	pthread_rwlock_unlock(&self->lock);
	Py_END_ALLOW_THREADS
	if (ret < 0 && ret != KVT_ECLOSED)
		return raise_code(ret);
	Py_RETURN_NONE;
}

static PyObject *Store_enter(struct store_obj *self, PyObject *unused)
{
	(void)unused;
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *Store_exit(struct store_obj *self, PyObject *args)
{
	PyObject *r;
	(void)args;
	r = Store_close(self, NULL);
	if (!r)
		return NULL;
	Py_DECREF(r);
	Py_RETURN_FALSE;
}

static PyObject *Store_register(struct store_obj *self, PyObject *d)
{
	struct kvt_ns_desc desc;
	uint32_t id = 0;
	int ret;
	if (store_check(self) < 0 || desc_from(d, &desc) < 0)
		return NULL;
	Py_INCREF(d); /* keeps desc's strings alive without the GIL */
	STORE_ENTER(self)
	ret = kvt_ns_register(self->store, &desc, &id);
	STORE_LEAVE(self)
	Py_DECREF(d);
	if (ret < 0)
		return raise_code(ret);
	return PyLong_FromUnsignedLong(id);
}

static PyObject *Store_ns_info(struct store_obj *self, PyObject *arg)
{
	unsigned long id = PyLong_AsUnsignedLong(arg);
	uint8_t digest[32];
	char buf[2049];
	int ret;
	if ((id == (unsigned long)-1 && PyErr_Occurred()) || store_check(self) < 0)
		return NULL;
	if (id > UINT32_MAX) {
		PyErr_SetString(PyExc_OverflowError, "namespace id is a u32");
		return NULL;
	}
	STORE_ENTER(self)
	ret = kvt_ns_info(self->store, (uint32_t)id, digest, buf, sizeof(buf));
	STORE_LEAVE(self)
	if (ret < 0)
		return raise_code(ret);
	return Py_BuildValue("(y#s#)", (const char *)digest, (Py_ssize_t)32, buf,
			     (Py_ssize_t)(ret < (int)sizeof(buf) ? ret : (int)sizeof(buf) - 1));
}

/* Release the first n views of parts[]. */
static void views_release(Py_buffer *views, Py_ssize_t n)
{
	for (Py_ssize_t i = 0; i < n; i++)
		PyBuffer_Release(&views[i]);
}

/*
 * Views of a value: one buffer-protocol object, or a list/tuple of them
 * (one part each).  flags is PyBUF_SIMPLE for reading, PyBUF_WRITABLE
 * for writing.  Fills views[] and iov[] (PyMem; caller frees both) and
 * *n.  0 or -1 (raised).
 */
static int views_from(PyObject *o, int flags, Py_buffer **views_out, struct iovec **iov_out,
		      Py_ssize_t *n_out)
{
	int multi = PyList_Check(o) || PyTuple_Check(o);
	Py_ssize_t n = multi ? PySequence_Fast_GET_SIZE(o) : 1;
	Py_buffer *views;
	struct iovec *iov;
	if (n < 1 || n > KVT_PARTS_MAX) {
		PyErr_Format(PyExc_ValueError, "a value has 1..%d parts, not %zd", KVT_PARTS_MAX, n);
		return -1;
	}
	views = PyMem_Calloc((size_t)n, sizeof(*views));
	iov = PyMem_Calloc((size_t)n, sizeof(*iov));
	if (!views || !iov) {
		PyMem_Free(views);
		PyMem_Free(iov);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *p = multi ? PySequence_Fast_GET_ITEM(o, i) : o;
		if (PyObject_GetBuffer(p, &views[i], flags | PyBUF_C_CONTIGUOUS) < 0) {
			views_release(views, i);
			PyMem_Free(views);
			PyMem_Free(iov);
			return -1;
		}
		iov[i].iov_base = views[i].buf;
		iov[i].iov_len = (size_t)views[i].len;
	}
	*views_out = views;
	*iov_out = iov;
	*n_out = n;
	return 0;
}

static int store_run_req(struct store_obj *self, struct kvt_req *r);

/* put(ns, key, value | [parts], *, nowait=False, retain=False): nowait is
 * KVT_F_NOWAIT (a persistent namespace's put raises EWAIT at once instead
 * of waiting for write-down room; then room()), retain KVT_F_RETAIN (this
 * block's prompt will be asked again); either runs as one request of its
 * own. */
static PyObject *Store_put(struct store_obj *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ns", "key", "value", "nowait", "retain", NULL };
	unsigned int ns;
	PyObject *keyo, *value;
	struct kvt_key key;
	Py_buffer *views;
	struct iovec *iov;
	Py_ssize_t n;
	int ret, nowait = 0, retain = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "IOO|$pp", kwlist, &ns, &keyo, &value,
					 &nowait, &retain) ||
	    store_check(self) < 0 || key_from(keyo, &key) < 0 ||
	    views_from(value, PyBUF_SIMPLE, &views, &iov, &n) < 0)
		return NULL;
	STORE_ENTER(self)
	if (nowait || retain) {
		struct kvt_req r = { .op = KVT_OP_PUT,
				     .flags = (nowait ? KVT_F_NOWAIT : 0u) |
					      (retain ? KVT_F_RETAIN : 0u),
				     .ns = ns, .key = key, .iov = iov, .iov_count = (uint32_t)n };
		ret = store_run_req(self, &r);
	} else {
		ret = kvt_put(self->store, ns, &key, iov, (unsigned)n);
	}
	STORE_LEAVE(self)
	views_release(views, n);
	PyMem_Free(views);
	PyMem_Free(iov);
	if (ret < 0)
		return raise_code(ret);
	return PyBool_FromLong(ret == KVT_OK);
}

/*
 * A queue from the store's pool, or a new one (NULL with *err set).
 * Without the GIL.
 */
static struct kvt_queue *queue_take(struct store_obj *self, int *err)
{
	struct kvt_queue *q = NULL;
	pthread_mutex_lock(&self->qlock);
	if (self->qfree_count > 0)
		q = self->qfree[--self->qfree_count];
	pthread_mutex_unlock(&self->qlock);
	if (!q) {
		*err = kvt_queue_create(self->store, &q);
		if (*err < 0)
			return NULL;
	}
	return q;
}

/*
 * Back to the pool, or left to kvt_store_destroy (never destroyed here:
 * see qlock).  A stale eventfd count only wakes a later wait early, and
 * that wait polls again.  The queue must have nothing in flight.
 */
static void queue_give(struct store_obj *self, struct kvt_queue *q)
{
	pthread_mutex_lock(&self->qlock);
	if (self->qfree_count == self->qfree_cap) {
		int cap = self->qfree_cap ? self->qfree_cap * 2 : 8;
		struct kvt_queue **n = realloc(self->qfree, (size_t)cap * sizeof(*n));
		if (n) {
			self->qfree = n;
			self->qfree_cap = cap;
		}
	}
	if (self->qfree_count < self->qfree_cap)
		self->qfree[self->qfree_count++] = q;
	/* else: out of memory; kvt_store_destroy frees the queue */
	pthread_mutex_unlock(&self->qlock);
}

/*
 * One request through a queue of its own, waited for without the GIL
 * (the store's lock held for reading).  The request's status is returned;
 * a submit or wait failure too.
 */
static int store_run_req(struct store_obj *self, struct kvt_req *r)
{
	struct kvt_req *done = NULL;
	int ret;
	struct kvt_queue *q = queue_take(self, &ret);
	if (!q)
		return ret;
	ret = kvt_submit(q, &r, 1);
	if (ret < 0)
		goto out;
	for (;;) {
		ret = kvt_queue_wait(q, &done, 1, -1);
		if (ret == 1)
			break;
		if (ret < 0 && ret != -EINTR)
			goto out; /* cannot happen with a valid queue */
	}
	ret = r->status;
out:
	queue_give(self, q);
	return ret;
}

/* get_into(ns, key, buf | [bufs]) -> value length, or 0 on a miss. */
static PyObject *Store_get_into(struct store_obj *self, PyObject *args)
{
	unsigned int ns;
	PyObject *keyo, *dst;
	struct kvt_key key;
	Py_buffer *views;
	struct iovec *iov;
	Py_ssize_t n;
	struct kvt_req r;
	int ret;
	if (!PyArg_ParseTuple(args, "IOO", &ns, &keyo, &dst) || store_check(self) < 0 ||
	    key_from(keyo, &key) < 0 || views_from(dst, PyBUF_WRITABLE, &views, &iov, &n) < 0)
		return NULL;
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_GET;
	r.ns = ns;
	r.key = key;
	r.iov = iov;
	r.iov_count = (uint32_t)n;
	STORE_ENTER(self)
	if (n == 1) {
		ret = kvt_get(self->store, ns, &key, iov[0].iov_base, iov[0].iov_len, &r.value_len);
	} else {
		ret = store_run_req(self, &r);
	}
	STORE_LEAVE(self)
	views_release(views, n);
	PyMem_Free(views);
	PyMem_Free(iov);
	if (ret == KVT_MISS)
		return PyLong_FromLong(0);
	if (ret < 0) {
		raise_code(ret);
		if (ret == KVT_EBUFSMALL) {
			PyObject *t, *v, *tb;
			PyErr_Fetch(&t, &v, &tb);
			PyErr_NormalizeException(&t, &v, &tb);
			if (set_attr(v, "value_len", PyLong_FromUnsignedLongLong(r.value_len)) < 0)
				PyErr_Clear();
			PyErr_Restore(t, v, tb);
		}
		return NULL;
	}
	return PyLong_FromUnsignedLongLong(r.value_len);
}

/*
 * get(ns, key) -> bytes or None.  Reads straight into a bytes object of
 * a first guess (64 KiB); a longer value is read again into one of its
 * exact length (the retry is served from DRAM, where the first read
 * published it), so a value is copied once into the bytes it ends in.
 */
static PyObject *Store_get(struct store_obj *self, PyObject *args)
{
	unsigned int ns;
	PyObject *keyo, *out;
	struct kvt_key key;
	Py_ssize_t guess = 64 * 1024;
	uint64_t vlen = 0;
	int ret;
	if (!PyArg_ParseTuple(args, "IO", &ns, &keyo) || store_check(self) < 0 ||
	    key_from(keyo, &key) < 0)
		return NULL;
	for (int tries = 0; tries < 4; tries++) {
		out = PyBytes_FromStringAndSize(NULL, guess);
		if (!out)
			return NULL;
		STORE_ENTER(self)
		ret = kvt_get(self->store, ns, &key, PyBytes_AS_STRING(out), (size_t)guess, &vlen);
		STORE_LEAVE(self)
		if (ret == KVT_OK) {
			if ((Py_ssize_t)vlen != guess && _PyBytes_Resize(&out, (Py_ssize_t)vlen) < 0)
				return NULL;
			return out;
		}
		Py_DECREF(out);
		if (ret == KVT_MISS)
			Py_RETURN_NONE;
		if (ret != KVT_EBUFSMALL)
			return raise_code(ret);
		if (vlen > (uint64_t)PY_SSIZE_T_MAX)
			return PyErr_NoMemory();
		guess = (Py_ssize_t)vlen;
	}
	return raise_code(KVT_EBUFSMALL);
}

/* exists(ns, key) -> tier (int > 0) that holds it, or 0. */
static PyObject *Store_exists(struct store_obj *self, PyObject *args)
{
	unsigned int ns;
	PyObject *keyo;
	struct kvt_req r;
	int ret;
	memset(&r, 0, sizeof(r));
	if (!PyArg_ParseTuple(args, "IO", &ns, &keyo) || store_check(self) < 0 ||
	    key_from(keyo, &r.key) < 0)
		return NULL;
	r.op = KVT_OP_EXISTS;
	r.ns = ns;
	STORE_ENTER(self)
	ret = store_run_req(self, &r);
	STORE_LEAVE(self)
	if (ret < 0)
		return raise_code(ret);
	return PyLong_FromUnsignedLong(ret == KVT_OK ? (r.tier ? r.tier : KVT_TIER_DRAM) : 0);
}

static PyObject *Store_delete(struct store_obj *self, PyObject *args)
{
	unsigned int ns;
	PyObject *keyo;
	struct kvt_key key;
	int ret;
	if (!PyArg_ParseTuple(args, "IO", &ns, &keyo) || store_check(self) < 0 ||
	    key_from(keyo, &key) < 0)
		return NULL;
	STORE_ENTER(self)
	ret = kvt_delete(self->store, ns, &key);
	STORE_LEAVE(self)
	if (ret < 0)
		return raise_code(ret);
	return PyBool_FromLong(ret == KVT_OK);
}

/* lookup_prefix(ns, keys) -> (count, [tier per key]) */
static PyObject *Store_lookup_prefix(struct store_obj *self, PyObject *args)
{
	unsigned int ns;
	PyObject *seq, *tiers_list;
	struct kvt_key *keys;
	uint8_t *tiers;
	size_t n;
	int64_t ret;
	if (!PyArg_ParseTuple(args, "IO", &ns, &seq) || store_check(self) < 0 ||
	    !(keys = keys_from(seq, &n)))
		return NULL;
	tiers = PyMem_Calloc(n ? n : 1, 1);
	if (!tiers) {
		PyMem_Free(keys);
		return PyErr_NoMemory();
	}
	STORE_ENTER(self)
	ret = kvt_lookup_prefix(self->store, ns, keys, n, tiers);
	STORE_LEAVE(self)
	PyMem_Free(keys);
	if (ret < 0) {
		PyMem_Free(tiers);
		return raise_code((int)ret);
	}
	tiers_list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; tiers_list && i < n; i++)
		PyList_SET_ITEM(tiers_list, (Py_ssize_t)i, PyLong_FromLong(tiers[i]));
	PyMem_Free(tiers);
	if (!tiers_list)
		return NULL;
	return Py_BuildValue("(LN)", (long long)ret, tiers_list);
}

/* prefetch(ns, keys) -> blocks now in the fastest tier */
static PyObject *Store_prefetch(struct store_obj *self, PyObject *args)
{
	unsigned int ns;
	PyObject *seq;
	struct kvt_req r;
	struct kvt_key *keys;
	size_t n;
	int ret;
	if (!PyArg_ParseTuple(args, "IO", &ns, &seq) || store_check(self) < 0 ||
	    !(keys = keys_from(seq, &n)))
		return NULL;
	if (n == 0) {
		PyMem_Free(keys);
		return PyLong_FromLong(0);
	}
	memset(&r, 0, sizeof(r));
	r.op = KVT_OP_PREFETCH;
	r.ns = ns;
	r.keys = keys;
	if (n > KVT_BATCH_MAX) {
		PyMem_Free(keys);
		return raise_code(KVT_EBADLEN);
	}
	r.key_count = (uint32_t)n;
	STORE_ENTER(self)
	ret = store_run_req(self, &r);
	STORE_LEAVE(self)
	PyMem_Free(keys);
	if (ret < 0)
		return raise_code(ret);
	return PyLong_FromUnsignedLongLong(r.length);
}

/* ------------------------------------------------------------------------
 * Batched calls: many blocks in one call (issue 23, item 4).  The GIL is
 * released once, and the requests go to the library together, through one
 * queue (kvt_submit of up to KVT_BATCH_MAX at a time), so that those that
 * leave DRAM (SSD reads, kvtierd round trips) are in flight at once
 * instead of one after another.
 *
 *   put_many(ns, keys, parts=None, *, addrs=None, lens=None, nowait=False,
 *            retain=False) -> [int]
 *   get_into_many(ns, keys, parts=None, *, addrs=None, lens=None, part=None) -> [int]
 *   exists_many(ns, keys) -> [int]
 *
 * The parts of all values are one flat sequence, k per key (k =
 * len(parts) / len(keys), 1..KVT_PARTS_MAX): key i's value is parts
 * [i*k, i*k+k).  Either buffer-protocol objects (parts), or raw addresses
 * (addrs: ints) with their lengths (lens: ints, or one int for all) --
 * memory the caller owns and vouches for, as in C: an engine's KV pool,
 * e.g. the pointers of SGLang's get_page_buffer_meta().
 *
 * Results are per key and never raise for one key's outcome:
 *   put_many:      1 stored, 0 already present, < 0 its code (EFULL, ...;
 *                  with nowait=True, KVT_F_NOWAIT: EWAIT)
 *   get_into_many: the value's length, 0 a miss, < 0 its code (EBUFSMALL);
 *                  with part=i (KVT_F_PART), only part i of each value is
 *                  read into that key's buffers, and the result is the
 *                  bytes copied (the part's length); a value without part
 *                  i is ERANGE
 *   exists_many:   the tier holding it (TIER_*), 0 absent, < 0 its code
 * Wrong arguments, and a store that takes no requests (closed, after
 * fork, an unknown namespace), raise as the single-key calls do.
 */

struct batch {
	size_t n;                /* keys */
	Py_ssize_t per;          /* parts per key */
	struct kvt_key *keys;
	Py_buffer *views;        /* parts given as objects: nviews taken */
	Py_ssize_t nviews;
	struct iovec *iov;       /* n * per */
	struct kvt_req *reqs;    /* n */
	struct kvt_req **rp;     /* n: &reqs[i], for kvt_submit */
};

static void batch_free(struct batch *b)
{
	if (b->views)
		views_release(b->views, b->nviews);
	PyMem_Free(b->views);
	PyMem_Free(b->iov);
	PyMem_Free(b->keys);
	PyMem_Free(b->reqs);
	PyMem_Free(b->rp);
}

/* An int (anything with __index__) as a u64.  0 or -1 (raised). */
static int u64_from(PyObject *o, uint64_t *v)
{
	PyObject *i = PyNumber_Index(o);
	if (!i)
		return -1;
	*v = PyLong_AsUnsignedLongLong(i);
	Py_DECREF(i);
	return *v == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
}

/*
 * b->iov (and b->per) from parts, or from addrs and lens.  flags:
 * PyBUF_SIMPLE to read the parts, PyBUF_WRITABLE to write them.  b->n
 * is set.  0 or -1 (raised).
 */
static int batch_parts(struct batch *b, PyObject *parts, PyObject *addrs, PyObject *lens,
		       int flags)
{
	PyObject *fast, *lfast = NULL;
	Py_ssize_t total;
	uint64_t one_len = 0;
	int ret = -1;
	if ((parts != Py_None) == (addrs != Py_None) || (addrs != Py_None) != (lens != Py_None)) {
		PyErr_SetString(PyExc_TypeError, "give parts, or addrs and lens");
		return -1;
	}
	fast = parts != Py_None ? PySequence_Fast(parts, "parts must be a sequence of buffers")
				: PySequence_Fast(addrs, "addrs must be a sequence of ints");
	if (!fast)
		return -1;
	total = PySequence_Fast_GET_SIZE(fast);
	if (b->n == 0 ? total != 0
		      : total % (Py_ssize_t)b->n != 0 || total / (Py_ssize_t)b->n < 1 ||
				total / (Py_ssize_t)b->n > KVT_PARTS_MAX) {
		PyErr_Format(PyExc_ValueError,
			     "%zd parts for %zu keys: each key needs the same number, 1..%d",
			     total, b->n, KVT_PARTS_MAX);
		goto out;
	}
	b->per = b->n ? total / (Py_ssize_t)b->n : 0;
	b->iov = PyMem_Calloc(total ? (size_t)total : 1, sizeof(*b->iov));
	if (!b->iov) {
		PyErr_NoMemory();
		goto out;
	}
	if (parts != Py_None) {
		b->views = PyMem_Calloc(total ? (size_t)total : 1, sizeof(*b->views));
		if (!b->views) {
			PyErr_NoMemory();
			goto out;
		}
		for (Py_ssize_t i = 0; i < total; i++) {
			if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, i), &b->views[i],
					       flags | PyBUF_C_CONTIGUOUS) < 0)
				goto out;
			b->nviews = i + 1;
			b->iov[i].iov_base = b->views[i].buf;
			b->iov[i].iov_len = (size_t)b->views[i].len;
		}
		ret = 0;
		goto out;
	}
	if (PyIndex_Check(lens)) {
		if (u64_from(lens, &one_len) < 0)
			goto out;
	} else {
		lfast = PySequence_Fast(lens, "lens must be an int or a sequence of ints");
		if (!lfast)
			goto out;
		if (PySequence_Fast_GET_SIZE(lfast) != total) {
			PyErr_Format(PyExc_ValueError, "%zd addrs but %zd lens", total,
				     PySequence_Fast_GET_SIZE(lfast));
			goto out;
		}
	}
	for (Py_ssize_t i = 0; i < total; i++) {
		uint64_t a, l = one_len;
		if (u64_from(PySequence_Fast_GET_ITEM(fast, i), &a) < 0 ||
		    (lfast && u64_from(PySequence_Fast_GET_ITEM(lfast, i), &l) < 0))
			goto out;
		if (a == 0 || l == 0 || a > UINTPTR_MAX || l > SIZE_MAX) {
			PyErr_Format(PyExc_ValueError, "part %zd: address %llu, length %llu", i,
				     (unsigned long long)a, (unsigned long long)l);
			goto out;
		}
		b->iov[i].iov_base = (void *)(uintptr_t)a;
		b->iov[i].iov_len = (size_t)l;
	}
	ret = 0;
out:
	Py_XDECREF(lfast);
	Py_DECREF(fast);
	return ret;
}

/*
 * Submit b->reqs through one queue, KVT_BATCH_MAX at a time, and wait
 * until every submitted request has completed.  Without the GIL.  Returns
 * 0, or a kvt_submit error (the requests before it were submitted and
 * have completed; the rest were not submitted).
 */
static int batch_run(struct store_obj *self, struct batch *b)
{
	struct kvt_req *got[64];
	size_t sub = 0, done = 0;
	int ret = 0;
	struct kvt_queue *q = queue_take(self, &ret);
	if (!q)
		return ret;
	while (sub < b->n) {
		size_t c = b->n - sub < KVT_BATCH_MAX ? b->n - sub : KVT_BATCH_MAX;
		int r = kvt_submit(q, b->rp + sub, (unsigned)c);
		if (r < 0) {
			ret = r;
			break;
		}
		sub += c;
	}
	while (done < sub) {
		size_t want = sub - done < 64 ? sub - done : 64;
		int r = kvt_queue_wait(q, got, (unsigned)want, -1);
		if (r > 0)
			done += (size_t)r;
		else if (r < 0 && r != -EINTR) {
			ret = r; /* cannot happen with a valid queue */
			break;
		}
	}
	queue_give(self, q);
	return ret;
}

static PyObject *batch_call(struct store_obj *self, PyObject *args, PyObject *kw, uint32_t op)
{
	static char *kwlist[] = { "ns",	  "keys",   "parts", "addrs", "lens",
				  "part", "nowait", "retain", NULL };
	unsigned int ns;
	PyObject *keyseq, *parts = Py_None, *addrs = Py_None, *lens = Py_None, *parto = Py_None;
	PyObject *out;
	long part = -1;
	struct batch b;
	int ret = 0, nowait = 0, retain = 0;
	memset(&b, 0, sizeof(b));
	if (op == KVT_OP_EXISTS) {
		if (!PyArg_ParseTuple(args, "IO", &ns, &keyseq))
			return NULL;
	} else if (!PyArg_ParseTupleAndKeywords(args, kw, "IO|O$OOOpp", kwlist, &ns, &keyseq,
						&parts, &addrs, &lens, &parto, &nowait,
						&retain)) {
		return NULL;
	}
	if ((nowait || retain) && op != KVT_OP_PUT) {
		PyErr_SetString(PyExc_ValueError, nowait ? "nowait: puts only" : "retain: puts only");
		return NULL;
	}
	if (parto != Py_None) {
		part = op == KVT_OP_GET ? PyLong_AsLong(parto) : -1;
		if (op != KVT_OP_GET || part < 0 || part >= KVT_PARTS_MAX) {
			if (!PyErr_Occurred())
				PyErr_Format(PyExc_ValueError, "part: a get's part index, 0..%d",
					     KVT_PARTS_MAX - 1);
			return NULL;
		}
	}
	if (store_check(self) < 0 || !(b.keys = keys_from(keyseq, &b.n)))
		return NULL;
	if (op != KVT_OP_EXISTS &&
	    batch_parts(&b, parts, addrs, lens,
			op == KVT_OP_PUT ? PyBUF_SIMPLE : PyBUF_WRITABLE) < 0) {
		batch_free(&b);
		return NULL;
	}
	b.reqs = PyMem_Calloc(b.n ? b.n : 1, sizeof(*b.reqs));
	b.rp = PyMem_Calloc(b.n ? b.n : 1, sizeof(*b.rp));
	if (!b.reqs || !b.rp) {
		batch_free(&b);
		return PyErr_NoMemory();
	}
	for (size_t i = 0; i < b.n; i++) {
		struct kvt_req *r = &b.reqs[i];
		r->op = op;
		r->ns = ns;
		r->key = b.keys[i];
		if (op != KVT_OP_EXISTS) {
			r->iov = b.iov + (size_t)b.per * i;
			r->iov_count = (uint32_t)b.per;
		}
		if (part >= 0) {
			r->flags |= KVT_F_PART;
			r->part = (uint32_t)part;
		}
		if (nowait)
			r->flags |= KVT_F_NOWAIT;
		if (retain)
			r->flags |= KVT_F_RETAIN;
		b.rp[i] = r;
	}
	if (b.n) {
		STORE_ENTER(self)
		ret = batch_run(self, &b);
		STORE_LEAVE(self)
	}
	if (ret < 0) {
		batch_free(&b);
		return raise_code(ret);
	}
	out = PyList_New((Py_ssize_t)b.n);
	for (size_t i = 0; out && i < b.n; i++) {
		const struct kvt_req *r = &b.reqs[i];
		long long v = r->status;
		if (op == KVT_OP_PUT)
			v = r->status == KVT_OK ? 1 : r->status == KVT_EXISTS ? 0 : r->status;
		else if (op == KVT_OP_GET)
			v = r->status == KVT_OK ? (long long)(part >= 0 ? r->length : r->value_len)
					       : r->status == KVT_MISS ? 0 : r->status;
		else
			v = r->status == KVT_OK ? (long long)(r->tier ? r->tier : KVT_TIER_DRAM)
					       : r->status == KVT_MISS ? 0 : r->status;
		PyObject *item = PyLong_FromLongLong(v);
		if (!item) {
			Py_CLEAR(out);
			break;
		}
		PyList_SET_ITEM(out, (Py_ssize_t)i, item);
	}
	batch_free(&b);
	return out;
}

static PyObject *Store_put_many(struct store_obj *self, PyObject *args, PyObject *kw)
{
	return batch_call(self, args, kw, KVT_OP_PUT);
}

static PyObject *Store_get_into_many(struct store_obj *self, PyObject *args, PyObject *kw)
{
	return batch_call(self, args, kw, KVT_OP_GET);
}

static PyObject *Store_exists_many(struct store_obj *self, PyObject *args)
{
	return batch_call(self, args, NULL, KVT_OP_EXISTS);
}

static PyObject *Store_clear(struct store_obj *self, PyObject *args)
{
	PyObject *nso = Py_None;
	uint32_t ns = KVT_NS_ALL;
	int64_t ret;
	if (!PyArg_ParseTuple(args, "|O", &nso) || store_check(self) < 0)
		return NULL;
	if (nso != Py_None) {
		unsigned long v = PyLong_AsUnsignedLong(nso);
		if (v == (unsigned long)-1 && PyErr_Occurred())
			return NULL;
		ns = (uint32_t)v;
	}
	STORE_ENTER(self)
	ret = kvt_clear(self->store, ns);
	STORE_LEAVE(self)
	if (ret < 0)
		return raise_code((int)ret);
	return PyLong_FromLongLong(ret);
}

/* room(ns, length) -> bool: KVT_OP_ROOM, waited for without the GIL. */
static PyObject *Store_room(struct store_obj *self, PyObject *args)
{
	unsigned int ns;
	unsigned long long len;
	struct kvt_req r = { .op = KVT_OP_ROOM };
	int ret;
	if (!PyArg_ParseTuple(args, "IK", &ns, &len) || store_check(self) < 0)
		return NULL;
	r.ns = ns;
	r.len = len;
	STORE_ENTER(self)
	ret = store_run_req(self, &r);
	STORE_LEAVE(self)
	if (ret == KVT_EFULL)
		Py_RETURN_FALSE;
	if (ret < 0)
		return raise_code(ret);
	Py_RETURN_TRUE;
}

static PyObject *Store_flush(struct store_obj *self, PyObject *unused)
{
	int ret;
	(void)unused;
	if (store_check(self) < 0)
		return NULL;
	STORE_ENTER(self)
	ret = kvt_flush(self->store);
	STORE_LEAVE(self)
	if (ret < 0)
		return raise_code(ret);
	Py_RETURN_NONE;
}

/* Statistics are gathered without the GIL into a flat list, then made a dict. */
struct stat_item {
	char *name;
	char *str;
	uint64_t value;
};
struct stat_list {
	struct stat_item *items;
	size_t count, cap;
	int oom;
};

static void stats_collect(void *ctx, const char *name, uint64_t value, const char *str)
{
	struct stat_list *l = ctx;
	struct stat_item *it;
	if (l->oom)
		return;
	if (l->count == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 128;
		struct stat_item *n = realloc(l->items, cap * sizeof(*n));
		if (!n) {
			l->oom = 1;
			return;
		}
		l->items = n;
		l->cap = cap;
	}
	it = &l->items[l->count];
	it->name = strdup(name);
	it->str = str ? strdup(str) : NULL;
	it->value = value;
	if (!it->name || (str && !it->str)) {
		free(it->name);
		free(it->str);
		l->oom = 1;
		return;
	}
	l->count++;
}

static PyObject *Store_stats(struct store_obj *self, PyObject *unused)
{
	struct stat_list l = { 0 };
	PyObject *d = NULL;
	int ret;
	(void)unused;
	if (store_check(self) < 0)
		return NULL;
	STORE_ENTER(self)
	ret = kvt_store_stats(self->store, stats_collect, &l);
	STORE_LEAVE(self)
	if (ret < 0)
		raise_code(ret);
	else if (l.oom)
		PyErr_NoMemory();
	else if ((d = PyDict_New())) {
		for (size_t i = 0; i < l.count; i++) {
			struct stat_item *it = &l.items[i];
			PyObject *v = it->str ? PyUnicode_FromString(it->str)
					      : PyLong_FromUnsignedLongLong(it->value);
			if (!v || PyDict_SetItemString(d, it->name, v) < 0) {
				Py_XDECREF(v);
				Py_CLEAR(d);
				break;
			}
			Py_DECREF(v);
		}
	}
	for (size_t i = 0; i < l.count; i++) {
		free(l.items[i].name);
		free(l.items[i].str);
	}
	free(l.items);
	return d;
}

static PyObject *Store_stat(struct store_obj *self, PyObject *args)
{
	const char *name;
	uint64_t v = 0;
	int ret;
	if (!PyArg_ParseTuple(args, "s", &name) || store_check(self) < 0)
		return NULL;
	STORE_ENTER(self)
	ret = kvt_store_stat(self->store, name, &v);
	STORE_LEAVE(self)
	if (ret < 0)
		return raise_code(ret);
	if (ret == KVT_MISS)
		Py_RETURN_NONE;
	return PyLong_FromUnsignedLongLong(v);
}

static PyObject *Store_peak(struct store_obj *self, PyObject *args)
{
	int reset = 0;
	int v;
	if (!PyArg_ParseTuple(args, "|p", &reset))
		return NULL;
	v = atomic_load(&self->inflight_peak);
	if (reset)
		atomic_store(&self->inflight_peak, 0);
	return PyLong_FromLong(v);
}

static PyMethodDef Store_methods[] = {
	{ "open", FN(Store_open), METH_NOARGS, "Open a store made with open=False." },
	{ "close", FN(Store_close), METH_NOARGS, "Close the store (idempotent)." },
	{ "__enter__", FN(Store_enter), METH_NOARGS, NULL },
	{ "__exit__", FN(Store_exit), METH_VARARGS, NULL },
	{ "set_option", FN(Store_set_option), METH_VARARGS,
	  "set_option(name, value): one option (before open, or debug.* after)." },
	{ "register", FN(Store_register), METH_O,
	  "register(desc: dict) -> int: the local id of a namespace." },
	{ "ns_info", FN(Store_ns_info), METH_O,
	  "ns_info(id) -> (digest, canonical text)." },
	{ "put", FN(Store_put), METH_VARARGS | METH_KEYWORDS,
	  "put(ns, key, value | [parts], *, nowait=False, retain=False) -> bool: True stored, "
	  "False already present; nowait: raise EWAIT rather than wait for write-down room; "
	  "retain: hint that this block's prompt will be asked again (KVT_F_RETAIN)." },
	{ "get", FN(Store_get), METH_VARARGS, "get(ns, key) -> bytes | None." },
	{ "get_into", FN(Store_get_into), METH_VARARGS,
	  "get_into(ns, key, buf | [bufs]) -> int: value length, 0 on a miss." },
	{ "exists", FN(Store_exists), METH_VARARGS,
	  "exists(ns, key) -> int: tier holding it (TIER_*), 0 if absent." },
	{ "delete", FN(Store_delete), METH_VARARGS,
	  "delete(ns, key) -> bool: True if it was there." },
	{ "lookup_prefix", FN(Store_lookup_prefix), METH_VARARGS,
	  "lookup_prefix(ns, keys) -> (leading hits, [tier per key])." },
	{ "prefetch", FN(Store_prefetch), METH_VARARGS,
	  "prefetch(ns, keys) -> int: blocks now in the fastest tier." },
	{ "put_many", FN(Store_put_many), METH_VARARGS | METH_KEYWORDS,
	  "put_many(ns, keys, parts=None, *, addrs=None, lens=None, nowait=False, retain=False) "
	  "-> [int]: per key 1 stored, 0 present, < 0 its error code; one call, one GIL release "
	  "for all." },
	{ "get_into_many", FN(Store_get_into_many), METH_VARARGS | METH_KEYWORDS,
	  "get_into_many(ns, keys, parts=None, *, addrs=None, lens=None, part=None) -> [int]: per key the "
	  "value length, 0 a miss, < 0 its error code." },
	{ "exists_many", FN(Store_exists_many), METH_VARARGS,
	  "exists_many(ns, keys) -> [int]: per key the tier holding it, 0 absent, < 0 its code." },
	{ "clear", FN(Store_clear), METH_VARARGS,
	  "clear(ns=None) -> int: blocks removed (None: every namespace)." },
	{ "room", FN(Store_room), METH_VARARGS,
	  "room(ns, length) -> bool: True once a put of length bytes to ns would not "
	  "wait for write-down room, False if none came within ssd.writedown_wait_ms." },
	{ "flush", FN(Store_flush), METH_NOARGS,
	  "flush(): wait until earlier puts reached their tiers." },
	{ "stats", FN(Store_stats), METH_NOARGS, "stats() -> dict of statistics." },
	{ "stat", FN(Store_stat), METH_VARARGS,
	  "stat(name) -> int | None: one numeric statistic." },
	{ "_inflight_peak", FN(Store_peak), METH_VARARGS,
	  "_inflight_peak(reset=False) -> most calls seen inside the library at once "
	  "without the GIL (tests)." },
	{ NULL, NULL, 0, NULL }
};

static PyTypeObject Store_type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "kvtier.Store",
	.tp_basicsize = sizeof(struct store_obj),
	.tp_dealloc = (destructor)(void (*)(void))Store_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Store(options: dict | None = None, *, open: bool = True): a libkvtier store.",
	.tp_methods = Store_methods,
	.tp_init = (initproc)(void (*)(void))Store_init,
	.tp_new = Store_new,
};

/* ------------------------------------------------------------------------
 * Module functions
 */

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
	(void)m;
	(void)unused;
	return PyUnicode_FromString(kvt_version());
}

static PyObject *mod_strerror(PyObject *m, PyObject *args)
{
	int code;
	(void)m;
	if (!PyArg_ParseTuple(args, "i", &code))
		return NULL;
	return PyUnicode_FromString(kvt_strerror(code));
}

static PyObject *mod_tier_name(PyObject *m, PyObject *args)
{
	int t;
	(void)m;
	if (!PyArg_ParseTuple(args, "i", &t))
		return NULL;
	return PyUnicode_FromString(kvt_tier_name(t));
}

static PyObject *mod_crc32c(PyObject *m, PyObject *args)
{
	Py_buffer b;
	unsigned int crc = 0;
	uint32_t r;
	(void)m;
	if (!PyArg_ParseTuple(args, "y*|I", &b, &crc))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = kvt_crc32c(crc, b.buf, (size_t)b.len);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&b);
	return PyLong_FromUnsignedLong(r);
}

static PyObject *mod_ns_digest(PyObject *m, PyObject *d)
{
	struct kvt_ns_desc desc;
	uint8_t digest[32];
	char buf[2049];
	int ret;
	(void)m;
	if (desc_from(d, &desc) < 0)
		return NULL;
	ret = kvt_ns_digest(&desc, digest, buf, sizeof(buf));
	if (ret < 0)
		return raise_code(ret);
	return Py_BuildValue("(y#s#)", (const char *)digest, (Py_ssize_t)32, buf, (Py_ssize_t)ret);
}

static PyObject *mod_key_chain(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ns_digest", "parent", "tokens", "extra", NULL };
	PyObject *dig, *parento, *toks, *extrao = NULL;
	uint8_t digest[32];
	struct kvt_key parent, out;
	struct chain_in in;
	int ret;
	(void)m;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O", kwlist, &dig, &parento, &toks, &extrao) ||
	    digest_from(dig, digest) < 0)
		return NULL;
	if (parento != Py_None && key_from(parento, &parent) < 0)
		return NULL;
	if (chain_in_from(toks, extrao, &in) < 0)
		return NULL;
	ret = kvt_key_chain(digest, parento == Py_None ? NULL : &parent, in.tokens, in.count,
			    in.ev.buf, (size_t)in.ev.len, &out);
	chain_in_release(&in);
	if (ret < 0)
		return raise_code(ret);
	return PyBytes_FromStringAndSize((const char *)out.bytes, out.len);
}

static PyObject *mod_key_chain_prompt(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "ns_digest", "tokens", "block_tokens", "include_partial",
				  "extra", NULL };
	PyObject *dig, *toks, *extrao = NULL, *list;
	unsigned int block_tokens;
	int partial = 0;
	uint8_t digest[32];
	struct chain_in in;
	size_t max;
	struct kvt_key *keys;
	int64_t ret;
	(void)m;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOI|pO", kwlist, &dig, &toks, &block_tokens,
					 &partial, &extrao) ||
	    digest_from(dig, digest) < 0)
		return NULL;
	if (chain_in_from(toks, extrao, &in) < 0)
		return NULL;
	max = block_tokens ? in.count / block_tokens + 1 : 1;
	keys = PyMem_Malloc(max * sizeof(*keys));
	if (!keys) {
		chain_in_release(&in);
		return PyErr_NoMemory();
	}
	Py_BEGIN_ALLOW_THREADS
	ret = kvt_key_chain_prompt(digest, in.tokens, in.count, block_tokens, partial, in.ev.buf,
				   (size_t)in.ev.len, keys, max);
	Py_END_ALLOW_THREADS
	chain_in_release(&in);
	if (ret < 0) {
		PyMem_Free(keys);
		return raise_code((int)ret);
	}
	list = PyList_New((Py_ssize_t)ret);
	for (int64_t i = 0; list && i < ret; i++) {
		PyObject *k = PyBytes_FromStringAndSize((const char *)keys[i].bytes, keys[i].len);
		if (!k) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, k);
	}
	PyMem_Free(keys);
	return list;
}

static PyMethodDef mod_methods[] = {
	{ "version", mod_version, METH_NOARGS, "version() -> str: libkvtier's version." },
	{ "strerror", mod_strerror, METH_VARARGS, "strerror(code) -> str." },
	{ "tier_name", mod_tier_name, METH_VARARGS, "tier_name(tier) -> str." },
	{ "crc32c", mod_crc32c, METH_VARARGS, "crc32c(data, crc=0) -> int (Castagnoli)." },
	{ "ns_digest", mod_ns_digest, METH_O,
	  "ns_digest(desc: dict) -> (digest: bytes, canonical: str)." },
	{ "key_chain", FN(mod_key_chain), METH_VARARGS | METH_KEYWORDS,
	  "key_chain(ns_digest, parent, tokens, extra=b'') -> bytes (32)." },
	{ "key_chain_prompt", FN(mod_key_chain_prompt),
	  METH_VARARGS | METH_KEYWORDS,
	  "key_chain_prompt(ns_digest, tokens, block_tokens, include_partial=False, extra=b'')"
	  " -> list[bytes]." },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef kvtier_module = {
	PyModuleDef_HEAD_INIT, "_kvtier", "The C half of the kvtier package.", -1, mod_methods,
	NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__kvtier(void);
PyMODINIT_FUNC PyInit__kvtier(void)
{
	static const struct {
		const char *name;
		long value;
	} consts[] = {
		{ "OK", KVT_OK }, { "MISS", KVT_MISS }, { "EXISTS", KVT_EXISTS },
		{ "ENULL", KVT_ENULL }, { "EBADLEN", KVT_EBADLEN }, { "ENONS", KVT_ENONS },
		{ "EKEYLEN", KVT_EKEYLEN }, { "EPIN", KVT_EPIN }, { "ECLOSED", KVT_ECLOSED },
		{ "ESTATE", KVT_ESTATE }, { "EOPTION", KVT_EOPTION }, { "EOPTVAL", KVT_EOPTVAL },
		{ "ETOOBIG", KVT_ETOOBIG }, { "EFULL", KVT_EFULL }, { "ECORRUPT", KVT_ECORRUPT },
		{ "ELOCKED", KVT_ELOCKED }, { "EBADOP", KVT_EBADOP }, { "ERANGE", KVT_ERANGE },
		{ "EBUFSMALL", KVT_EBUFSMALL }, { "EFORK", KVT_EFORK },
		{ "EVERSION", KVT_EVERSION }, { "EBUSY", KVT_EBUSY }, { "EDESC", KVT_EDESC },
		{ "EWAIT", KVT_EWAIT },
		{ "TIER_NONE", KVT_TIER_NONE }, { "TIER_DRAM", KVT_TIER_DRAM },
		{ "TIER_SSD", KVT_TIER_SSD }, { "TIER_REMOTE", KVT_TIER_REMOTE },
		{ "TIER_SHARED", KVT_TIER_SHARED }, { "KEY_MAX", KVT_KEY_MAX },
		{ "PARTS_MAX", KVT_PARTS_MAX },
	};
	PyObject *m;
	if (PyType_Ready(&Store_type) < 0)
		return NULL;
	m = PyModule_Create(&kvtier_module);
	if (!m)
		return NULL;
	kvt_error = PyErr_NewExceptionWithDoc(
		"kvtier.Error",
		"A libkvtier error: .code is the kvtier (or -errno) code, .strerror its text.",
		PyExc_Exception, NULL);
	if (!kvt_error || PyModule_AddObjectRef(m, "Error", kvt_error) < 0 ||
	    PyModule_AddObjectRef(m, "Store", (PyObject *)&Store_type) < 0)
		goto fail;
	for (size_t i = 0; i < sizeof(consts) / sizeof(*consts); i++)
		if (PyModule_AddIntConstant(m, consts[i].name, consts[i].value) < 0)
			goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
