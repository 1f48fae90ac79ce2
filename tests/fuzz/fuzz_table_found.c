/*
 * Fuzz target for the table cache's found-FDEs file parser (unwind/table_cache.h): any bytes
 * give addresses or -EBADMSG / -EPROTO, never a read past them nor more addresses than the
 * bytes hold or PP_TABLE_FOUND_MAX; each input is tried as it is and behind the header the
 * stamp and the file's identity ask for, so that mutations reach the count and addresses.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "unwind/table_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char g_stamp[PP_TABLE_IDENTITY_STAMP_SIZE] = "fuzz-compiler fuzz-boot";
/* magic, stamp, then dev, ino, ctime s and ns, size: the identity of g_file */
#define HEAD (8 + PP_TABLE_IDENTITY_STAMP_SIZE)
#define IDENTITY_BYTES (5 * 8)

static struct stat g_file;
static uint64_t g_out[PP_TABLE_FOUND_MAX];

static void one(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	size_t n = 7;
	int err;

	if (!copy)
		return;
	memcpy(copy, data, size); /* exactly size bytes: a read past them is a finding */
	err = pp_table_found_parse(copy, size, g_stamp, &g_file, g_out, &n);
	if (err && err != -EBADMSG && err != -EPROTO)
		__builtin_trap();
	if (err ? n != 0 : (n > PP_TABLE_FOUND_MAX || size != HEAD + IDENTITY_BYTES + 8 + n * 8))
		__builtin_trap();
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint64_t id[5] = {0x801, 4242, 1700000000, 123456789, 65536};
	uint8_t *framed;

	g_file.st_dev = (dev_t)id[0];
	g_file.st_ino = (ino_t)id[1];
	g_file.st_ctim.tv_sec = (time_t)id[2];
	g_file.st_ctim.tv_nsec = (long)id[3];
	g_file.st_size = (off_t)id[4];
	one(data, size);
	framed = malloc(HEAD + IDENTITY_BYTES + size);
	if (!framed)
		return 0;
	memcpy(framed, "PPFDES01", 8);
	memcpy(framed + 8, g_stamp, PP_TABLE_IDENTITY_STAMP_SIZE);
	for (int i = 0; i < 5; i++)
		for (int b = 0; b < 8; b++)
			framed[HEAD + 8 * i + b] = (uint8_t)(id[i] >> (8 * b));
	memcpy(framed + HEAD + IDENTITY_BYTES, data, size);
	one(framed, HEAD + IDENTITY_BYTES + size);
	free(framed);
	return 0;
}
