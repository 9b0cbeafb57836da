/*
 * tpki.h - a throwaway TLS identity for tests that run a real TLS server
 * in-process: a self-signed P-256 certificate for CN=localhost, valid a
 * day, and its key, written as PEM files (test_tls_mem, test_tlshello).
 */
#ifndef KVT_TEST_TPKI_H
#define KVT_TEST_TPKI_H

#include <stdio.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "t.h"

/* Writes dir/cert.pem and dir/key.pem; their paths into cert and key
 * (len bytes each). */
static inline void t_make_pki(const char *dir, char *cert, char *key, size_t len)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *name;
	FILE *f;

	T_ASSERT(pk && x);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, pk);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost",
				   -1, -1, 0);
	X509_set_issuer_name(x, name);
	T_ASSERT(X509_sign(x, pk, EVP_sha256()) > 0);
	snprintf(cert, len, "%s/cert.pem", dir);
	snprintf(key, len, "%s/key.pem", dir);
	T_ASSERT((f = fopen(cert, "w")) != NULL);
	T_ASSERT(PEM_write_X509(f, x) == 1);
	fclose(f);
	T_ASSERT((f = fopen(key, "w")) != NULL);
	T_ASSERT(PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL) == 1);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(pk);
}

#endif
