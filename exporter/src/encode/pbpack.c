/*
 * One place for the size-then-pack dance of protobuf-c (see pbpack.h), so each encoder ends in
 * a single call.
 */
#include "pbpack.h"

#include <errno.h>
#include <stdlib.h>

int pp_pb_pack(const ProtobufCMessage *msg, uint8_t **out, size_t *out_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(len ? len : 1);

	if (!buf)
		return -ENOMEM;
	if (protobuf_c_message_pack(msg, buf) != len) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	*out_len = len;
	return 0;
}
