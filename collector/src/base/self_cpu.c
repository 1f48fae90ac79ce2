/* The agent's own CPU time, by thread (self_cpu.h). */
#include "self_cpu.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fsutil.h"

int pp_schedstat_run_ns(const char *buf, size_t len, uint64_t *ns)
{
	uint64_t v = 0;
	size_t i = 0;

	/* "RUN WAIT SLICES\n": digits up to the first space or newline */
	for (; i < len && buf[i] >= '0' && buf[i] <= '9'; i++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(buf[i] - '0');
	}
	if (i == 0 || (i < len && buf[i] != ' ' && buf[i] != '\n'))
		return -EINVAL;
	*ns = v;
	return 0;
}

void pp_self_cpu_name(const char *comm, size_t len, int main_thread, char *out, size_t size)
{
	size_t n = 0;

	if (main_thread) {
		snprintf(out, size, "main");
		return;
	}
	if (len >= 3 && !memcmp(comm, "pp-", 3)) {
		comm += 3;
		len -= 3;
	}
	/* a comm is any bytes a thread set: keep a plain name, or none */
	for (size_t i = 0; i < len && n + 1 < size; i++) {
		char c = comm[i];

		if (c == '\n' || c == '\0')
			break;
		out[n++] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ? c : '_';
	}
	if (!n)
		out[n++] = '_';
	out[n] = '\0';
}

static void add_thread(struct pp_self_cpu *out, const char *name, uint64_t ns)
{
	size_t i;

	for (i = 0; i < out->n; i++)
		if (!strcmp(out->threads[i].name, name))
			break;
	if (i == out->n) {
		if (out->n == PP_SELF_CPU_MAX_THREADS)
			i = out->n - 1; /* the rest summed into the last */
		else
			snprintf(out->threads[out->n++].name, PP_SELF_CPU_NAME_MAX, "%s", name);
	}
	out->threads[i].ns += ns;
}

int pp_self_cpu_read(const char *task_dir, struct pp_self_cpu *out)
{
	const char *dir = task_dir ? task_dir : "/proc/self/task";
	pid_t pid = getpid();
	uint64_t threads_ns = 0;
	struct rusage ru;
	struct dirent *de;
	DIR *d;

	memset(out, 0, sizeof(*out));
	if (getrusage(RUSAGE_SELF, &ru))
		return -errno;
	out->total_ns =
	    ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
	    ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		char path[512], buf[128], comm[32], name[PP_SELF_CPU_NAME_MAX];
		char *end;
		long tid = strtol(de->d_name, &end, 10);
		ssize_t len, clen;
		uint64_t ns;

		if (*end || tid <= 0)
			continue;
		pp_pathf(path, sizeof(path), "%s/%s/schedstat", dir, de->d_name);
		len = pp_read_small_file(path, buf, sizeof(buf));
		if (len <= 0 || pp_schedstat_run_ns(buf, (size_t)len, &ns))
			continue;
		pp_pathf(path, sizeof(path), "%s/%s/comm", dir, de->d_name);
		clen = pp_read_small_file(path, comm, sizeof(comm));
		pp_self_cpu_name(comm, clen > 0 ? (size_t)clen : 0, tid == pid, name, sizeof(name));
		add_thread(out, name, ns);
		threads_ns += ns;
	}
	if (d)
		closedir(d);
	out->exited_ns = out->total_ns > threads_ns ? out->total_ns - threads_ns : 0;
	return 0;
}
