/* test_err.c - every result code has its own text; errno values pass through. */
#include <errno.h>

#include "t.h"

int main(void)
{
	static const int codes[] = {
		KVT_OK, KVT_MISS, KVT_EXISTS, KVT_ENULL, KVT_EBADLEN, KVT_ENONS,
		KVT_EKEYLEN, KVT_EPIN, KVT_ECLOSED, KVT_ESTATE, KVT_EOPTION,
		KVT_EOPTVAL, KVT_ETOOBIG, KVT_EFULL, KVT_ECORRUPT, KVT_ELOCKED,
		KVT_EBADOP, KVT_ERANGE, KVT_EBUFSMALL, KVT_EFORK, KVT_EVERSION,
		KVT_EBUSY, KVT_EDESC,
	};
	size_t n = sizeof(codes) / sizeof(codes[0]);

	for (size_t i = 0; i < n; i++) {
		const char *a = kvt_strerror(codes[i]);
		T_ASSERT(a != NULL);
		T_ASSERT(strcmp(a, "unknown result code") != 0);
		if (codes[i] < 0) {
			T_LE_INT(codes[i], -5000);
			T_GE_INT(codes[i], -5999);
		}
		/* Distinct codes, distinct texts. */
		for (size_t j = 0; j < i; j++) {
			T_NE_INT(codes[i], codes[j]);
			if (strcmp(a, kvt_strerror(codes[j])) == 0)
				T_FAIL("codes %d and %d share the text \"%s\"", codes[i], codes[j], a);
		}
	}
	T_EQ_STR(kvt_strerror(-ENOMEM), "Cannot allocate memory");
	T_EQ_STR(kvt_strerror(-ECANCELED), "Operation canceled");
	T_EQ_STR(kvt_strerror(-4999), "unknown result code");
	T_EQ_STR(kvt_strerror(12345), "unknown result code");
	T_EQ_STR(kvt_tier_name(KVT_TIER_DRAM), "dram");
	T_EQ_STR(kvt_tier_name(99), "none");
	T_EQ_STR(kvt_version(), KVTIER_VERSION_STRING);
	{
		char v[32];
		snprintf(v, sizeof(v), "%d.%d.%d", KVTIER_VERSION_MAJOR, KVTIER_VERSION_MINOR,
			 KVTIER_VERSION_PATCH);
		T_EQ_STR(kvt_version(), v);
	}
	/* CRC32C check value of the standard test string. */
	T_EQ_U64(kvt_crc32c(0, "123456789", 9), 0xE3069283u);
	/* Chaining gives the same result as one pass. */
	T_EQ_U64(kvt_crc32c(kvt_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	T_EQ_U64(kvt_crc32c(0, "", 0), 0);
	return 0;
}
