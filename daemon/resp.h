/*
 * resp.h - a pure codec for RESP2, the Redis serialization protocol, as
 * kvtierd's --resp listener reads it (doc/resp.md).
 *
 * Requests are arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
 * as every Redis client sends them, or inline commands ("PING\r\n", words
 * separated by blanks, for telnet users; quoted as Redis quotes them:
 * "a b\x41\n" and 'it\'s').  The parser never allocates and never does
 * I/O: it points the caller's argument array into the caller's buffer (an
 * inline argument with quotes: at its bytes as sent, which resp_unquote
 * decodes).  "Need more bytes" is a normal, positive result.  Every length
 * is bounded by struct resp_limits before it is used.
 *
 * Replies are written by the small encoders below into a caller's buffer.
 *
 * Threads: any; no state outside the arguments.
 */
#ifndef KVTD_RESP_H
#define KVTD_RESP_H

#include <stddef.h>
#include <stdint.h>

/* Results of resp_parse. */
#define RESP_OK 0
#define RESP_NEED_MORE 1     /* positive: a complete command needs more bytes */
#define RESP_NEED_ARGS 2     /* positive: cmd->argc arguments; args_cap was smaller */
#define RESP_EPROTO (-7101)  /* not RESP: bad type byte, missing CRLF */
#define RESP_EARGC (-7102)   /* an argument count that is not a number as Redis's
			      * string2ll reads one (a sign, a blank, a leading
			      * zero), or over limits.argc_max */
#define RESP_EBULK (-7103)   /* a bulk length that is not such a number, < 0, or
			      * over limits.bulk_max */
#define RESP_EINLINE (-7104) /* an inline command line longer than limits.inline_max */
#define RESP_EQUOTES (-7105) /* an inline command's quotes unbalanced, or a closing
			      * quote followed by other than a blank */

#define RESP_INLINE_ARGS_MAX 64 /* words in one inline command */

struct resp_limits {
	uint32_t argc_max;   /* arguments of one command, >= 1 */
	uint64_t bulk_max;   /* bytes of one argument */
	uint32_t inline_max; /* bytes of one inline command line */
};

struct resp_arg {
	const uint8_t *p;    /* into the parsed buffer */
	uint64_t len;        /* bytes of the argument */
	uint64_t raw_len;    /* 0: the argument is p[0, len); else an inline
			      * argument with quotes: its raw_len bytes at p as
			      * sent, which resp_unquote decodes into len */
};

/*
 * An inline argument's bytes as sent (arg->raw_len of them at arg->p),
 * quotes and escapes decoded into dst: arg->len bytes.  dst may be the
 * bytes at arg->p themselves (the decoding never overtakes what it
 * reads).  Only for an argument resp_parse returned with raw_len != 0:
 * it checked them.
 */
void resp_unquote(uint8_t *dst, const struct resp_arg *arg);

struct resp_cmd {
	uint32_t argc;       /* RESP_OK, RESP_NEED_ARGS: arguments */
	uint64_t len;        /* RESP_OK: bytes of the command, from buf */
	uint64_t need;       /* RESP_NEED_MORE: the buffer must hold at least this
			      * many bytes (a lower bound; 0 if unknown) */
};

/*
 * Parse one command from buf[0, len).  On RESP_OK, args[0..argc) point into
 * buf and cmd->len is the command's length (the next command starts
 * there).  RESP_NEED_MORE: incomplete (cmd->need says how much at least).
 * RESP_NEED_ARGS: complete enough to know cmd->argc, which exceeds
 * args_cap; call again with room.  Negative: RESP_E*; the stream cannot be
 * resynchronized.  An empty inline line (or one of blanks only) and an
 * array of no arguments ("*0", "*-1": any count <= 0, as Redis's
 * processMultibulkBuffer takes it) are skipped: RESP_OK with argc 0 and
 * cmd->len their bytes.
 * An inline line is split as Redis's sdssplitargs splits it: outside
 * quotes a word ends at a space, \t or \r, and blanks (those, \v, \f)
 * between words are skipped; "..." takes \xHH, \n, \r, \t,
 * \b, \a and \ before any other byte as that byte; '...' takes \' as ';
 * a quote may open mid-word (a"b c" is one argument, ab c) and a closing
 * one must be followed by a blank or the line's end (else RESP_EQUOTES);
 * a NUL byte is a byte like any other (Redis 7 looks for the line's end
 * with strchr, and never answers a line with a NUL in it).
 */
int resp_parse(const uint8_t *buf, size_t len, const struct resp_limits *lim,
	       struct resp_cmd *cmd, struct resp_arg *args, uint32_t args_cap);

/*
 * Where a command still arriving was left: resp_parse_from carries on
 * from there, so that a command of many arguments received in many reads
 * costs one pass over its argument headers per byte received, not one
 * per read (a command of 65536 arguments re-parsed whole on every
 * 70-byte segment held a loop ~1 ms a read: test_hostile resp_reparse).
 * Zeroed: start at the command's first byte.
 */
struct resp_resume {
	uint64_t pos;  /* the header of the first argument not yet whole; 0: none;
			* an inline command's (argc 0): its bytes searched for the
			* line's end */
	uint32_t argc; /* the command's argument count ("*N"); 0: inline */
	uint32_t done; /* arguments before pos, checked */
};

/*
 * resp_parse, resumed at *rs when it is set.  The caller keeps buf's bytes
 * from the command's start unchanged between the calls (they may move:
 * pos counts from buf), and zeroes *rs when it drops them.  On
 * RESP_NEED_MORE *rs says where this call stopped; on any other result it
 * is zeroed.  A command completed after a resume is parsed once more from
 * its start, so args and every check are as resp_parse's.
 */
int resp_parse_from(const uint8_t *buf, size_t len, const struct resp_limits *lim,
		    struct resp_cmd *cmd, struct resp_arg *args, uint32_t args_cap,
		    struct resp_resume *rs);

const char *resp_strerror(int code);

/*
 * Encoders: write into out (room bytes) and return the length written, or
 * the length needed if room is too small (nothing useful written then).
 * The longest header is RESP_HDR_MAX bytes.
 */
#define RESP_HDR_MAX 24
size_t resp_enc_simple(uint8_t *out, size_t room, char type, const char *s, size_t len);
size_t resp_enc_int(uint8_t *out, size_t room, char type, int64_t v); /* ":n", "*n", "$n" */

#endif
