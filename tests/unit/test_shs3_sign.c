/*
 * test_shs3_sign.c - the SigV4 signer of the S3 backend (lib/shs3.c)
 * against AWS's published examples, and the credentials loader.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "shs3.h"
#include "t.h"

/* Amazon S3 API reference, "Signature Calculations for the Authorization
 * Header: Transferring Payload in a Single Chunk", example GET Object. */
static void test_s3_get_example(void)
{
	const char *empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	struct shs3_hdr h[] = {
		{ "host", "examplebucket.s3.amazonaws.com" },
		{ "range", "bytes=0-9" },
		{ "x-amz-content-sha256", empty },
		{ "x-amz-date", "20130524T000000Z" },
	};
	char auth[512], creq[65];
	T_OK(shs3_sign("GET", "/test.txt", "", h, 4, empty, "20130524T000000Z", "us-east-1", "s3",
		       "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", auth,
		       sizeof(auth), creq));
	T_EQ_STR(creq, "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
	T_EQ_STR(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
		       "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
		       "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	/* Too small an output buffer is an error, not a truncated header. */
	T_RC(shs3_sign("GET", "/test.txt", "", h, 4, empty, "20130524T000000Z", "us-east-1", "s3",
		       "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", auth, 40,
		       NULL),
	     KVT_EBADLEN);
}

/* AWS General Reference, "Signed Signature Version 4 Requests Examples":
 * the IAM ListUsers POST. */
static void test_iam_post_example(void)
{
	const char *body = "Action=ListUsers&Version=2010-05-08";
	struct shs3_hdr h[] = {
		{ "content-type", "application/x-www-form-urlencoded; charset=utf-8" },
		{ "host", "iam.amazonaws.com" },
		{ "x-amz-date", "20110909T233600Z" },
	};
	char auth[512], ph[65];
	uint8_t d[32];
	unsigned dl;
	EVP_Digest(body, strlen(body), d, &dl, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(ph + 2 * i, 3, "%02x", d[i]);
	T_OK(shs3_sign("POST", "/", "", h, 3, ph, "20110909T233600Z", "us-east-1", "iam",
		       "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", auth, sizeof(auth),
		       NULL));
	T_ASSERT(strstr(auth, "SignedHeaders=content-type;host;x-amz-date, "));
	T_ASSERT(strstr(auth,
			"Signature=ced6826de92d2bdeed8f846f0bf508e8559e98e4b0199114b84c54174deb456c"));
}

static void test_creds(void)
{
	char *dir = t_mkdtemp(), path[512];
	struct shs3_creds c;
	int fd;
	snprintf(path, sizeof(path), "%s/creds", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	T_ASSERT(fd >= 0);
	const char *txt = "# test\naccess_key = AK123\n secret_key=SEC/ret+456 \nregion = eu-west-1\n";
	T_EQ_INT(write(fd, txt, strlen(txt)), (long long)strlen(txt));
	close(fd);
	T_OK(shs3_creds_load(&c, path));
	T_EQ_STR(c.access_key, "AK123");
	T_EQ_STR(c.secret_key, "SEC/ret+456");
	T_EQ_STR(c.region, "eu-west-1");
	chmod(path, 0644); /* others may read it: refused */
	T_RC(shs3_creds_load(&c, path), KVT_EOPTVAL);
	T_EQ_STR(c.secret_key, "");
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
	unsetenv("AWS_REGION");
	T_OK(shs3_creds_load(&c, NULL));
	T_EQ_STR(c.access_key, "ENVKEY");
	T_EQ_STR(c.region, "us-east-1");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	T_RC(shs3_creds_load(&c, NULL), KVT_EOPTVAL);
	t_rmtree(dir);
	free(dir);
}

int main(void)
{
	test_s3_get_example();
	test_iam_post_example();
	test_creds();
	printf("test_shs3_sign: ok\n");
	return 0;
}
