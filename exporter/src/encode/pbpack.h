/*
 * Exporter-private: serializes a protobuf-c message tree into one malloc'ed buffer, the last
 * step both the pprof and the OTLP encoders share.
 */
#ifndef PP_EXPORTER_PBPACK_H
#define PP_EXPORTER_PBPACK_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Packs msg into a new buffer (at least 1 byte allocated, so an empty message still yields a
 * non-NULL *out the caller frees). Returns 0, -ENOMEM, or -EIO when protobuf-c packs a size
 * other than it computed; *out and *out_len are set only on success.
 */
int pp_pb_pack(const ProtobufCMessage *msg, uint8_t **out, size_t *out_len);

#endif /* PP_EXPORTER_PBPACK_H */
