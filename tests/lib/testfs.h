/*
 * File and directory helpers the unit tests share: whole files read into memory, directory
 * trees laid out as cgroup hierarchies (a plain tree stands in for cgroupfs: ids are inode
 * numbers), and their removal.
 */
#ifndef PP_TEST_TESTFS_H
#define PP_TEST_TESTFS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The whole regular file at path, NUL-terminated, malloc'ed; NULL when it cannot be read. */
static inline char *pp_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = n < 0 ? NULL : malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		*len = (size_t)n;
	}
	return buf;
}

/* Makes root/rel and every directory above it; returns its inode number, 0 on failure. */
static inline uint64_t pp_test_mkdirs(const char *root, const char *rel)
{
	char path[1024], *p;
	struct stat st;

	mkdir(root, 0755);
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	mkdir(path, 0755);
	if (stat(path, &st))
		return 0;
	return st.st_ino;
}

/* Removes the tree at root: 0, or -1 after saying it could not. */
static inline int pp_test_rm_tree(const char *root)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0) {
		fprintf(stderr, "could not remove %s\n", root);
		return -1;
	}
	return 0;
}

#endif /* PP_TEST_TESTFS_H */
