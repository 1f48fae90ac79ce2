/*
 * The names under which files were found lately, each naming the table of the file it named
 * then: the side-band's (device, inode, generation), a process's maps line, or a stat of the
 * opened file. Many names may stand for one table: the same CFI in two files (one program
 * built twice, stripped or not; one library in two containers' images) is one table, and each
 * file is found again by its own name without opening it. Bounded: a name not asked for lately
 * makes room for a new one, and a name not found costs an open, never a wrong table.
 */
#ifndef PP_UNWIND_FILE_IDS_H
#define PP_UNWIND_FILE_IDS_H

#include <stdbool.h>
#include <stdint.h>

#define PP_FILE_ID_KEY_MAX 96 /* a name, NUL included; a longer one is never kept */

struct pp_file_ids;

/* What a name stood for when an open last confirmed it. */
struct pp_file_id {
	uint32_t table;	 /* the table's slot */
	uint32_t serial; /* the slot's serial then: another file in the slot since has another */
	uint64_t confirmed_ms;
};

/* Room for about nr names (rounded up to a power of two, at least 64); NULL without memory. */
struct pp_file_ids *pp_file_ids_new(uint32_t nr);
void pp_file_ids_free(struct pp_file_ids *ids);

/* key now names id (an open just confirmed it): kept, or its earlier entry replaced. */
void pp_file_ids_note(struct pp_file_ids *ids, const char *key, const struct pp_file_id *id);

/* What key names, if it is kept: true and *out filled. */
bool pp_file_ids_find(const struct pp_file_ids *ids, const char *key, struct pp_file_id *out);

#endif
