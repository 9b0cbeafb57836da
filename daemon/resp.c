/*
 * resp.c - the RESP2 codec (resp.h): commands in, reply pieces out.
 *
 * Owns nothing: pure functions over the caller's buffers.  Invariants:
 * every number is parsed with an overflow check and bounded by the limits
 * before anything is sized by it; nothing is read at or past buf + len;
 * a command is RESP_OK only when all of its bytes, final CRLF included,
 * are in the buffer.
 *
 * Re-parsing a command that is still arriving costs one pass over its
 * headers, not its payload: bulk strings are skipped by their length, so
 * a 16 MiB SET parsed again on every read stays cheap.  A command of many
 * arguments is resumed where the last read left it (resp_parse_from):
 * its headers, 65536 of them, are not walked again on every read; an
 * inline command's line is searched for its end from where the last read
 * left it (resp_inline).
 */
#include <stdbool.h>
#include <string.h>

#include "resp.h"

/* A line from buf[pos] to its CRLF: its length (CR excluded) in *ll, or
 * RESP_NEED_MORE.  A bare LF ends an inline line too. */
static int resp_line(const uint8_t *buf, size_t len, size_t pos, size_t max, size_t *ll)
{
	size_t end = len - pos > max + 2 ? pos + max + 2 : len;
	const uint8_t *nl = memchr(buf + pos, '\n', end - pos);

	if (!nl)
		return len - pos > max + 1 ? RESP_EPROTO : RESP_NEED_MORE;
	*ll = (size_t)(nl - (buf + pos));
	return RESP_OK;
}

/* "<digits>\r\n" at buf[pos] (after the type byte): value into *v, any
 * that fits an int64_t, as Redis's string2ll takes it. */
static int resp_number(const uint8_t *buf, size_t len, size_t *pos, int64_t *v)
{
	size_t p = *pos, ll;
	uint64_t n = 0; /* 19 digits at most: no wrap */
	bool neg = false;
	int rc = resp_line(buf, len, p, 21, &ll);

	if (rc != RESP_OK)
		return rc;
	if (ll < 2 || buf[p + ll - 1] != '\r')
		return RESP_EPROTO;
	ll--;
	if (buf[p] == '-') {
		neg = true;
		p++;
		ll--;
	}
	if (ll == 0 || ll > 19)
		return RESP_EPROTO;
	/* As Redis's string2ll: "0" alone, never a leading zero ("01",
	 * "-0"), which Redis refuses (a proxy in front of either must not
	 * read a length one of them would not) */
	if (buf[p] == '0' && (ll > 1 || neg))
		return RESP_EPROTO;
	for (size_t i = 0; i < ll; i++) {
		uint8_t ch = buf[p + i];
		if (ch < '0' || ch > '9')
			return RESP_EPROTO;
		n = n * 10 + (ch - '0');
	}
	if (n > (uint64_t)INT64_MAX + neg)
		return RESP_EPROTO;
	*v = !neg ? (int64_t)n : n > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)n;
	*pos = p + ll + 2;
	return RESP_OK;
}

/*
 * Inline quoting, as Redis's sdssplitargs (redis-cli and telnet users type
 * SET k "a b" and expect one argument "a b"):
 *
 *   SET  "it \x41\n"  'it\'s'  a"b c"
 *   ---  -----------  -------  -------
 *   SET  it A<LF>     it's     ab c
 *
 * One walk serves counting (out NULL: resp_inline checks and measures
 * each argument before anything is returned) and decoding (resp_unquote,
 * over bytes already checked): the two cannot disagree.  Each input byte
 * is read once and gives at most one output byte, so the decoding can
 * be done in place.
 */
static bool resp_blank(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* A hex digit's value plus one; 0: not a hex digit. */
static const uint8_t resp_hex1[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7,
	['7'] = 8, ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14,
	['e'] = 15, ['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15,
	['F'] = 16,
};

/* The bytes that end a run of bytes taken as they are, in each state of
 * resp_word: outside quotes (Redis ends an unquoted word at space, \t,
 * \r, \n only: \v and \f are skipped between words but kept inside one;
 * and a quote opens), in "..." and in '...'. */
static const bool resp_stop[3][256] = {
	{ [' '] = true, ['\t'] = true, ['\r'] = true, ['\n'] = true, ['"'] = true,
	  ['\''] = true },
	{ ['\\'] = true, ['"'] = true },
	{ ['\\'] = true, ['\''] = true },
};

/* One argument of the line p[0, n) from *i (not a blank, *i < n): its
 * decoded bytes to out (if not NULL), their count to *out_len, whether it
 * had quotes to *quoted; *i left past it.  RESP_EQUOTES if its quotes are
 * unbalanced or a closing one is followed by other than a blank.  Runs of
 * plain bytes are found by table and moved whole (a byte a branch cost a
 * 60 KB quoted ECHO twice the loop time of a plain one). */
static int resp_word(const uint8_t *p, size_t n, size_t *i, uint8_t *out, size_t *out_len,
		     bool *quoted)
{
	size_t k = *i, o = 0;
	int st = 0; /* 0 outside quotes, 1 in "...", 2 in '...' */

	*quoted = false;
	for (;;) {
		const bool *stop = resp_stop[st];
		size_t run = k;
		uint8_t c;
		while (run < n && !stop[p[run]])
			run++;
		if (run > k) {
			if (out) /* in place: out + o <= p + k */
				memmove(out + o, p + k, run - k);
			o += run - k;
			k = run;
		}
		if (st == 0) {
			if (k == n || (p[k] != '"' && p[k] != '\''))
				break; /* a blank: the word's end */
			st = p[k++] == '"' ? 1 : 2; /* a quote opens */
			*quoted = true;
			continue;
		} else if (k == n) {
			return RESP_EQUOTES;
		} else if (st == 1 && p[k] == '\\' && n - k > 3 && p[k + 1] == 'x' &&
			   resp_hex1[p[k + 2]] && resp_hex1[p[k + 3]]) {
			c = (uint8_t)((resp_hex1[p[k + 2]] - 1) << 4 | (resp_hex1[p[k + 3]] - 1));
			k += 4;
		} else if (st == 1 && p[k] == '\\' && n - k > 1) {
			c = p[k + 1];
			c = c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' :
			    c == 'b' ? '\b' : c == 'a' ? '\a' : c;
			k += 2;
		} else if (st == 2 && p[k] == '\\' && n - k > 1 && p[k + 1] == '\'') {
			c = '\'';
			k += 2;
		} else if (p[k] == (st == 1 ? '"' : '\'')) {
			/* the closing quote ends the argument */
			k++;
			if (k < n && !resp_blank(p[k]))
				return RESP_EQUOTES;
			break;
		} else {
			c = p[k++];
		}
		if (out)
			out[o] = c;
		o++;
	}
	*i = k;
	*out_len = o;
	return RESP_OK;
}

void resp_unquote(uint8_t *dst, const struct resp_arg *arg)
{
	size_t i = 0, n;
	bool q;

	(void)resp_word(arg->p, (size_t)arg->raw_len, &i, dst, &n, &q);
}

/*
 * An inline command: its line searched for its end from where the last
 * call left it (rs->pos, with rs->argc 0), not from its first byte: a
 * line of 60 KB arriving a byte a segment was searched whole on every
 * read, 7.2 us of the loop a segment against 2.7 for a bulk string
 * arriving so (release; 8 connections).  Found after a resume, the end
 * is searched once more from the start, so that the result is a parse in
 * one go's whatever the state said.
 */
static int resp_inline(const uint8_t *buf, size_t len, const struct resp_limits *lim,
		       struct resp_cmd *cmd, struct resp_arg *args, uint32_t args_cap,
		       struct resp_resume *rs)
{
	size_t ll, i = 0, from = 0;
	size_t end = len > lim->inline_max + 2 ? lim->inline_max + 2 : len;
	uint32_t argc = 0;
	const uint8_t *nl;

	if (rs && rs->argc == 0 && rs->done)
		goto no_end; /* a NUL was seen: the line has no end */
	if (rs && rs->argc == 0 && rs->pos < end)
		from = (size_t)rs->pos;
	if (rs)
		memset(rs, 0, sizeof(*rs));
	nl = memchr(buf + from, '\n', end - from);
	if (nl && from)
		nl = memchr(buf, '\n', end);
	/* A NUL before the line's end hides it, as in Redis, which looks for
	 * the end with strchr (processInlineBuffer): the line never ends, and
	 * the connection gets "too big inline request" at the limit.  Bytes
	 * searched once: the line's up to its end, or the ones this call
	 * searched (the state marks the line dead, done 1). */
	if (nl ? memchr(buf, 0, (size_t)(nl - buf)) != NULL
	       : memchr(buf + from, 0, end - from) != NULL) {
		nl = NULL;
		if (rs)
			*rs = (struct resp_resume){ end, 0, 1 };
		goto no_end;
	}
	if (!nl) {
		if (rs)
			*rs = (struct resp_resume){ end, 0, 0 };
		goto no_end;
	}
	ll = (size_t)(nl - buf);
	cmd->len = ll + 1;
	if (ll && buf[ll - 1] == '\r')
		ll--;
	for (;;) {
		size_t s, dl;
		bool quoted;
		int rc;
		while (i < ll && resp_blank(buf[i]))
			i++;
		if (i == ll)
			break;
		s = i;
		if ((rc = resp_word(buf, ll, &i, NULL, &dl, &quoted)) != RESP_OK)
			return rc;
		if (argc == RESP_INLINE_ARGS_MAX || argc == lim->argc_max)
			return RESP_EARGC;
		if (dl > lim->bulk_max)
			return RESP_EBULK;
		if (argc < args_cap) {
			args[argc].p = buf + s;
			args[argc].len = dl;
			args[argc].raw_len = quoted ? i - s : 0;
		}
		argc++;
	}
	cmd->argc = argc;
	return argc > args_cap ? RESP_NEED_ARGS : RESP_OK;
no_end:
	if (len > lim->inline_max + 1) {
		if (rs)
			memset(rs, 0, sizeof(*rs)); /* a state only with RESP_NEED_MORE */
		return RESP_EINLINE;
	}
	cmd->need = len + 1;
	return RESP_NEED_MORE;
}

int resp_parse_from(const uint8_t *buf, size_t len, const struct resp_limits *lim,
		    struct resp_cmd *cmd, struct resp_arg *args, uint32_t args_cap,
		    struct resp_resume *rs)
{
	size_t pos = 1;
	uint32_t first = 0;
	int64_t n;
	int rc;

	memset(cmd, 0, sizeof(*cmd));
	if (len == 0) {
		cmd->need = 1;
		goto need_more;
	}
	if (buf[0] != '*')
		return resp_inline(buf, len, lim, cmd, args, args_cap, rs);
	if (rs && rs->pos && rs->pos <= len && rs->done < rs->argc &&
	    rs->argc <= args_cap && rs->argc <= lim->argc_max) {
		/* Arguments [0, done) were whole and checked in buf[0, pos). */
		pos = (size_t)rs->pos;
		first = rs->done;
		cmd->argc = rs->argc;
	} else {
		rc = resp_number(buf, len, &pos, &n);
		if (rc != RESP_OK) {
			cmd->need = len + 1;
			if (rc == RESP_NEED_MORE)
				goto need_more;
			rc = RESP_EARGC; /* not a number: Redis's words */
			goto done;
		}
		if (n <= 0) {
			/* "*0", "*-1": no command, skipped as Redis skips it
			 * (processMultibulkBuffer: ll <= 0), as an empty
			 * inline line is */
			cmd->len = pos;
			rc = RESP_OK;
			goto done;
		}
		if ((uint64_t)n > lim->argc_max) {
			rc = RESP_EARGC;
			goto done;
		}
		cmd->argc = (uint32_t)n;
		if (cmd->argc > args_cap) {
			rc = RESP_NEED_ARGS;
			goto done;
		}
	}
	for (uint32_t i = first; i < cmd->argc; i++) {
		size_t hdr = pos;
		int64_t bl = 0;
		if (pos >= len) {
			cmd->need = pos + 1;
			rc = RESP_NEED_MORE;
		} else if (buf[pos] != '$') {
			rc = RESP_EPROTO;
		} else {
			pos++;
			rc = resp_number(buf, len, &pos, &bl);
			if (rc == RESP_NEED_MORE)
				cmd->need = len + 1;
			else if (rc != RESP_OK || bl < 0)
				rc = RESP_EBULK; /* not a length: Redis's words */
			else if ((uint64_t)bl > lim->bulk_max)
				rc = RESP_EBULK;
			else if (len - pos < (uint64_t)bl + 2) {
				cmd->need = pos + (uint64_t)bl + 2;
				rc = RESP_NEED_MORE;
			} else if (buf[pos + (size_t)bl] != '\r' ||
				   buf[pos + (size_t)bl + 1] != '\n') {
				rc = RESP_EPROTO;
			}
		}
		if (rc == RESP_NEED_MORE) {
			if (rs)
				*rs = (struct resp_resume){ hdr, cmd->argc, i };
			return rc;
		}
		if (rc != RESP_OK)
			goto done;
		args[i].p = buf + pos;
		args[i].len = (uint64_t)bl;
		args[i].raw_len = 0;
		pos += (size_t)bl + 2;
	}
	cmd->len = pos;
	rc = RESP_OK;
	if (first > 0) {
		/* args[0, first) were set by an earlier call, into buf as it
		 * was then: once more from the start, with every check. */
		if (rs)
			memset(rs, 0, sizeof(*rs));
		return resp_parse_from(buf, len, lim, cmd, args, args_cap, NULL);
	}
done:
	if (rs)
		memset(rs, 0, sizeof(*rs));
	return rc;
need_more:
	if (rs)
		memset(rs, 0, sizeof(*rs));
	return RESP_NEED_MORE;
}

int resp_parse(const uint8_t *buf, size_t len, const struct resp_limits *lim,
	       struct resp_cmd *cmd, struct resp_arg *args, uint32_t args_cap)
{
	return resp_parse_from(buf, len, lim, cmd, args, args_cap, NULL);
}

const char *resp_strerror(int code)
{
	switch (code) {
	case RESP_OK: return "ok";
	case RESP_NEED_MORE: return "need more bytes";
	case RESP_NEED_ARGS: return "need a larger argument array";
	case RESP_EPROTO: return "Protocol error: malformed request";
	case RESP_EARGC: return "Protocol error: invalid multibulk length";
	case RESP_EBULK: return "Protocol error: invalid bulk length";
	case RESP_EINLINE: return "Protocol error: too big inline request";
	case RESP_EQUOTES: return "Protocol error: unbalanced quotes in request";
	}
	return "unknown RESP error";
}

size_t resp_enc_simple(uint8_t *out, size_t room, char type, const char *s, size_t len)
{
	size_t need = len + 3;

	if (room < need)
		return need;
	out[0] = (uint8_t)type;
	memcpy(out + 1, s, len);
	out[len + 1] = '\r';
	out[len + 2] = '\n';
	return need;
}

size_t resp_enc_int(uint8_t *out, size_t room, char type, int64_t v)
{
	char tmp[24];
	size_t n = 0;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		tmp[n++] = '-';
	if (room < n + 3)
		return n + 3;
	out[0] = (uint8_t)type;
	for (size_t i = 0; i < n; i++)
		out[1 + i] = (uint8_t)tmp[n - 1 - i];
	out[n + 1] = '\r';
	out[n + 2] = '\n';
	return n + 3;
}
