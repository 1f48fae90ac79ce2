/*
 * The agent's own CPU time, by thread: what sampling a node costs and which part of the agent
 * pays it (the thread that drains the ring and names frames, the unwinder's worker, the
 * symbol loader, the sender...). Each live thread's time is its schedstat run time (ns), its
 * name its comm without the "pp-" prefix ("main" for the thread whose id is the process's);
 * threads that ended (and any time not seen per thread) count as "exited", from the process's
 * total (getrusage), so the parts add up to it.
 */
#ifndef PP_SELF_CPU_H
#define PP_SELF_CPU_H

#include <stddef.h>
#include <stdint.h>

#define PP_SELF_CPU_MAX_THREADS 16
#define PP_SELF_CPU_NAME_MAX 16

struct pp_thread_cpu {
	char name[PP_SELF_CPU_NAME_MAX];
	uint64_t ns;
};

struct pp_self_cpu {
	uint64_t total_ns; /* the process's user + system time */
	struct pp_thread_cpu threads[PP_SELF_CPU_MAX_THREADS]; /* one per name, summed */
	size_t n;
	uint64_t exited_ns; /* total_ns less the threads': those that ended */
};

/*
 * Read it for this process from task_dir (NULL: /proc/self/task). 0, or -errno where the
 * total could not be had; threads that cannot be read count as exited. Threads past
 * PP_SELF_CPU_MAX_THREADS distinct names are summed into the last.
 */
int pp_self_cpu_read(const char *task_dir, struct pp_self_cpu *out);

/* The run time in ns a schedstat file's text gives (its first field): 0 or -EINVAL. */
int pp_schedstat_run_ns(const char *buf, size_t len, uint64_t *ns);

/* A thread's name as reported, from its comm text (newline ended or not) and whether it is the
 * process's main thread: "main", else the comm less a "pp-" prefix, in out (size >= 2). */
void pp_self_cpu_name(const char *comm, size_t len, int main_thread, char *out, size_t size);

#endif
