/* Store a prompt's KV blocks, find its cached prefix, read a block back. */
#include <kvtier.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	struct kvt_ns_desc desc = { .model = "meta-llama/Llama-3.1-8B", .dtype = "bf16",
		.layout = "vllm-flash-nhd", .block_tokens = 16, .tp_size = 1, .pp_size = 1 };
	static uint8_t kv[64 << 10], out[64 << 10]; /* one block's KV bytes */
	uint32_t tokens[64], ns;
	uint8_t digest[32];
	struct kvt_key keys[4];
	struct kvt_store *st;
	uint64_t len = 0;

	for (int i = 0; i < 64; i++)
		tokens[i] = 1000 + i;
	memset(kv, 0x5a, sizeof kv);

	kvt_store_create(&st);
	kvt_store_set_option(st, "dram.capacity", "64M");
	if (kvt_store_open(st) < 0 || kvt_ns_register(st, &desc, &ns) < 0)
		return 1;
	kvt_ns_digest(&desc, digest, NULL, 0);
	int64_t n = kvt_key_chain_prompt(digest, tokens, 64, 16, 0, NULL, 0, keys, 4);
	for (int i = 0; i < 3; i++) /* cache blocks 0..2 of 4 */
		kvt_put(st, ns, &keys[i], &(struct iovec){ kv, sizeof kv }, 1);
	int64_t hit = kvt_lookup_prefix(st, ns, keys, n, NULL); /* 3 */
	int rc = kvt_get(st, ns, &keys[2], out, sizeof out, &len);
	printf("%lld of %lld blocks cached; get: %s, %llu bytes\n", (long long)hit,
	       (long long)n, kvt_strerror(rc), (unsigned long long)len);
	kvt_store_close(st);
	kvt_store_destroy(st);
	return hit == 3 && rc == KVT_OK && memcmp(out, kv, sizeof kv) == 0 ? 0 : 1;
}
