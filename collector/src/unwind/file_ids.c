/* The names under which files were found lately, and their tables (file_ids.h). */
#include "file_ids.h"

#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

/* Names in sets of WAYS by their hash: a full set loses the name confirmed longest ago. */
#define WAYS 4

struct entry {
	uint64_t hash; /* 0: empty */
	struct pp_file_id id;
	char key[PP_FILE_ID_KEY_MAX];
};

struct pp_file_ids {
	uint32_t set_mask;
	struct entry *entries; /* (set_mask + 1) * WAYS */
};

/* Never 0 (the empty entry's). */
static uint64_t key_hash(const char *key)
{
	uint64_t h = pp_hash_str(key);

	return h ? h : 1;
}

struct pp_file_ids *pp_file_ids_new(uint32_t nr)
{
	struct pp_file_ids *ids = calloc(1, sizeof(*ids));
	uint32_t sets = 16;

	if (!ids)
		return NULL;
	while (sets * WAYS < nr && sets < (1u << 24))
		sets <<= 1;
	ids->set_mask = sets - 1;
	ids->entries = calloc((size_t)sets * WAYS, sizeof(*ids->entries));
	if (!ids->entries) {
		free(ids);
		return NULL;
	}
	return ids;
}

void pp_file_ids_free(struct pp_file_ids *ids)
{
	if (!ids)
		return;
	free(ids->entries);
	free(ids);
}

static struct entry *set_of(const struct pp_file_ids *ids, uint64_t h)
{
	return &ids->entries[(size_t)((h >> 17) & ids->set_mask) * WAYS];
}

void pp_file_ids_note(struct pp_file_ids *ids, const char *key, const struct pp_file_id *id)
{
	uint64_t h;
	struct entry *set, *e = NULL;

	if (!ids || !key || strlen(key) >= PP_FILE_ID_KEY_MAX)
		return;
	h = key_hash(key);
	set = set_of(ids, h);
	for (int w = 0; w < WAYS && !e; w++)
		if (set[w].hash == h && !strcmp(set[w].key, key))
			e = &set[w];
	for (int w = 0; w < WAYS && !e; w++)
		if (!set[w].hash)
			e = &set[w];
	if (!e) {
		e = &set[0];
		for (int w = 1; w < WAYS; w++)
			if (set[w].id.confirmed_ms < e->id.confirmed_ms)
				e = &set[w];
	}
	e->hash = h;
	e->id = *id;
	strcpy(e->key, key);
}

bool pp_file_ids_find(const struct pp_file_ids *ids, const char *key, struct pp_file_id *out)
{
	uint64_t h;
	const struct entry *set;

	if (!ids || !key)
		return false;
	h = key_hash(key);
	set = set_of(ids, h);
	for (int w = 0; w < WAYS; w++)
		if (set[w].hash == h && !strcmp(set[w].key, key)) {
			*out = set[w].id;
			return true;
		}
	return false;
}
