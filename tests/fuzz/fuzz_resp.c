/*
 * fuzz_resp.c - libFuzzer target for kvtierd's RESP2 codec (daemon/resp.c,
 * doc/resp.md): the bytes a Redis client sends, parsed command after
 * command as the RESP listener does.
 *
 * The input is copied to a buffer exactly its size (ASan sees a read one
 * byte too far).  Properties, each a trap when broken:
 *   - results are only the documented codes;
 *   - RESP_OK consumes at least one byte and no more than there is; every
 *     argument lies inside the command's bytes and within the limits;
 *     the command's bytes minus one are RESP_NEED_MORE or RESP_NEED_ARGS
 *     (never RESP_OK: a command is complete only with its last CRLF),
 *     except for inline lines ending in a bare LF; an array of no
 *     arguments (argc 0) is a count of 0 or below ("*0", "*-N");
 *   - RESP_NEED_MORE's need is more than the input holds;
 *   - RESP_NEED_ARGS reports more arguments than the array had room for,
 *     and parsing again with that room gives RESP_OK or RESP_NEED_MORE or
 *     an error, never RESP_NEED_ARGS again;
 *   - resp_parse_from fed growing prefixes (a step of 1 to 16 bytes, the
 *     input's first byte), its resume state carried from call to call as
 *     the RESP listener does, answers each prefix as resp_parse does: the
 *     same result, need, length, arguments;
 *   - an inline argument with quotes (raw_len != 0) lies inside the
 *     command's bytes, decodes (resp_unquote) to len <= raw_len bytes, the
 *     same in place as into another buffer;
 *   - the input quoted as redis-cli quotes an argument ("..." with \xHH,
 *     \n, \", \\; sdscatrepr) in an inline ECHO line parses back to two
 *     arguments, the second the input's bytes exactly.
 * Seed corpus: tests/fuzz/corpus/resp/.
 */
#include <stdlib.h>
#include <string.h>

#include "resp.h"
#include "fuzz.h"

static struct resp_arg g_args[1024];
static struct resp_arg g_args2[1024];

/* Growing prefixes of buf[0, len), step bytes more each, parsed with a
 * resume state carried along, against parsing each prefix from scratch. */
static void fuzz_resumed(const uint8_t *buf, size_t len, const struct resp_limits *lim,
			 uint32_t cap, size_t step)
{
	struct resp_resume rs = { 0 };

	for (size_t n = 0;; n = n + step < len ? n + step : len) {
		struct resp_cmd c1, c2;
		int r1 = resp_parse(buf, n, lim, &c1, g_args, cap);
		int r2 = resp_parse_from(buf, n, lim, &c2, g_args2, cap, &rs);
		FUZZ_CHECK(r1 == r2);
		FUZZ_CHECK(r2 == RESP_NEED_MORE || rs.pos == 0);
		if (r1 == RESP_NEED_MORE)
			FUZZ_CHECK(c1.need == c2.need);
		if (r1 == RESP_NEED_ARGS)
			FUZZ_CHECK(c1.argc == c2.argc);
		if (r1 == RESP_OK) {
			FUZZ_CHECK(c1.len == c2.len && c1.argc == c2.argc);
			for (uint32_t i = 0; i < c1.argc; i++)
				FUZZ_CHECK(g_args[i].p == g_args2[i].p &&
					   g_args[i].len == g_args2[i].len &&
					   g_args[i].raw_len == g_args2[i].raw_len);
		}
		if (r1 != RESP_NEED_MORE || n == len)
			return;
	}
}

/* An argument with quotes decoded into a buffer and in place (a copy of
 * its bytes): the same len bytes. */
static void fuzz_unquote(const struct resp_arg *a)
{
	uint8_t *out = malloc((size_t)a->len + 1), *raw = malloc((size_t)a->raw_len);
	struct resp_arg b = *a;

	FUZZ_CHECK(out && raw);
	out[a->len] = 0xa5;
	resp_unquote(out, a);
	FUZZ_CHECK(out[a->len] == 0xa5); /* not a byte more */
	memcpy(raw, a->p, (size_t)a->raw_len);
	b.p = raw;
	resp_unquote(raw, &b);
	FUZZ_CHECK(memcmp(raw, out, (size_t)a->len) == 0);
	free(raw);
	free(out);
}

/* data as redis-cli prints and users paste it (sdscatrepr): "ECHO " and
 * the bytes in double quotes, escaped; parsed back, decoded: data. */
static void fuzz_quoted_echo(const uint8_t *data, size_t size)
{
	static const struct resp_limits lim = { .argc_max = 4, .bulk_max = 1u << 20,
						.inline_max = 1u << 16 };
	static const char hex[] = "0123456789abcdef";
	uint8_t *line = malloc(size * 4 + 16), *out = malloc(size + 1);
	struct resp_arg args[4];
	struct resp_cmd cmd;
	size_t n = 0;

	FUZZ_CHECK(line && out);
	memcpy(line, "ECHO \"", 6);
	n = 6;
	for (size_t i = 0; i < size; i++) {
		uint8_t c = data[i];
		if (c == '\\' || c == '"') {
			line[n++] = '\\';
			line[n++] = c;
		} else if (c == '\n' || c == '\r' || c == '\t' || c == '\a' || c == '\b') {
			line[n++] = '\\';
			line[n++] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' :
				    c == '\a' ? 'a' : 'b';
		} else if (c < 0x20 || c >= 0x7f) {
			line[n++] = '\\';
			line[n++] = 'x';
			line[n++] = (uint8_t)hex[c >> 4];
			line[n++] = (uint8_t)hex[c & 15];
		} else {
			line[n++] = c;
		}
	}
	line[n++] = '"';
	line[n++] = '\r';
	line[n++] = '\n';
	FUZZ_CHECK(resp_parse(line, n, &lim, &cmd, args, 4) == RESP_OK);
	FUZZ_CHECK(cmd.len == n && cmd.argc == 2 && args[1].len == size);
	FUZZ_CHECK(args[1].raw_len == n - 7);
	resp_unquote(out, &args[1]);
	FUZZ_CHECK(memcmp(out, data, size) == 0);
	free(out);
	free(line);
}

static int fuzz_one(const uint8_t *buf, size_t len, const struct resp_limits *lim, uint32_t cap,
		    struct resp_cmd *cmd)
{
	int rc = resp_parse(buf, len, lim, cmd, g_args, cap);

	FUZZ_CHECK(rc == RESP_OK || rc == RESP_NEED_MORE || rc == RESP_NEED_ARGS ||
		   rc == RESP_EPROTO || rc == RESP_EARGC || rc == RESP_EBULK || rc == RESP_EINLINE ||
		   rc == RESP_EQUOTES);
	FUZZ_CHECK(rc != RESP_EQUOTES || buf[0] != '*');
	if (rc == RESP_OK) {
		FUZZ_CHECK(cmd->len >= 1 && cmd->len <= len);
		FUZZ_CHECK(cmd->argc <= cap && cmd->argc <= lim->argc_max);
		FUZZ_CHECK(cmd->argc > 0 || buf[0] != '*' ||
			   (cmd->len >= 4 && (buf[1] == '-' || (buf[1] == '0' && cmd->len == 4))));
		for (uint32_t i = 0; i < cmd->argc; i++) {
			const struct resp_arg *a = &g_args[i];
			FUZZ_CHECK(a->p >= buf && a->len <= lim->bulk_max);
			FUZZ_CHECK(a->p + a->len <= buf + cmd->len);
			FUZZ_CHECK(a->raw_len == 0 || (buf[0] != '*' && a->raw_len >= a->len &&
						      a->p + a->raw_len <= buf + cmd->len));
			if (a->raw_len)
				fuzz_unquote(a);
		}
	} else if (rc == RESP_NEED_MORE) {
		FUZZ_CHECK(cmd->need > len || cmd->need == 0);
	} else if (rc == RESP_NEED_ARGS) {
		FUZZ_CHECK(cmd->argc > cap && cmd->argc <= lim->argc_max);
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct resp_limits lims[2] = {
		{ .argc_max = 1024, .bulk_max = 1u << 20, .inline_max = 1024 },
		{ .argc_max = 3, .bulk_max = 8, .inline_max = 16 },
	};
	uint8_t *buf = malloc(size ? size : 1);

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (size <= 4096)
		fuzz_quoted_echo(data, size);
	for (int l = 0; l < 2; l++)
		fuzz_resumed(buf, size, &lims[l], l ? 3 : 1024, size ? 1 + data[0] % 16 : 1);
	for (int l = 0; l < 2; l++) {
		size_t off = 0;
		for (int guard = 0; guard < 4096 && off < size; guard++) {
			struct resp_cmd cmd;
			uint32_t cap = 2;
			int rc = fuzz_one(buf + off, size - off, &lims[l], cap, &cmd);
			if (rc == RESP_NEED_ARGS) {
				cap = cmd.argc <= 1024 ? cmd.argc : 1024;
				rc = fuzz_one(buf + off, size - off, &lims[l], cap, &cmd);
				FUZZ_CHECK(rc != RESP_NEED_ARGS);
			}
			if (rc != RESP_OK)
				break;
			if (cmd.len >= 2 && buf[off] == '*') {
				/* one byte less of a complete array is incomplete */
				struct resp_cmd c2;
				int r2 = resp_parse(buf + off, (size_t)cmd.len - 1, &lims[l], &c2,
						    g_args, cap);
				FUZZ_CHECK(r2 == RESP_NEED_MORE);
			}
			off += (size_t)cmd.len;
		}
	}
	free(buf);
	return 0;
}
