/*
 * crc.c - CRC32C (Castagnoli) as stored with every part, through ISA-L's
 * crc32_iscsi (SSE4.2/PCLMUL/AVX-512 paths picked at run time).
 *
 * ISA-L's crc32_iscsi takes and returns the raw register: it neither
 * pre- nor post-inverts.  kvt_crc32c follows the common convention (as in
 * iSCSI, ext4, Linux's crc32c()): crc32c("123456789") == 0xE3069283,
 * chained by passing the previous result.
 */
#include <isa-l/crc.h>

#include "kvt_int.h"

uint32_t kvt_crc32c(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;
	crc = ~crc;
	while (len > 0) {
		/* crc32_iscsi takes an int length. */
		int n = len > (1u << 30) ? (1 << 30) : (int)len;
		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}

uint32_t crc_iov(const struct iovec *iov, unsigned n)
{
	uint32_t crc = 0;
	for (unsigned i = 0; i < n; i++)
		crc = kvt_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	return crc;
}
