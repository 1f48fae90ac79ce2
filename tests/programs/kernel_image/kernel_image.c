/*
 * A kernel-like image for the tests of kernel data types: freestanding code linked at the
 * kernel's link address (-mcmodel=kernel, text at 0xffffffff81000000) with DWARF and a build
 * id, as a distribution's vmlinux debug file is. Each function makes one field access that the
 * tests name from this source, at its first instruction (no frame pointer: as an ORC kernel).
 */
#include <stdint.h>

struct list_node {
	struct list_node *next, *prev;
};

struct rq_stats {
	uint64_t nr_switches;
	uint64_t nr_wakeups; /* 8 */
};

struct task {
	long state;
	int prio;		/* 8 */
	int cpu;		/* 12 */
	struct list_node tasks; /* 16 */
	uint64_t runtime_ns;	/* 32 */
	struct rq_stats rq;	/* 40: task.rq.nr_wakeups at 48 */
	char comm[16];		/* 56 */
};

extern struct rq_stats global_rq;
struct rq_stats global_rq;

/* extern, so that the compiler keeps each as it is written */
int task_prio(const struct task *t);
void task_account(struct task *t, uint64_t ns);
uint64_t task_wakeups(const struct task *t);
void count_switch(void);
void _stext(void);

/* where the kernel's text starts, as kallsyms names it: first (-fno-toplevel-reorder) */
__attribute__((naked)) void _stext(void)
{
	__asm__ volatile("ret");
}

__attribute__((noinline)) int task_prio(const struct task *t)
{
	return t->prio;
}

__attribute__((noinline)) void task_account(struct task *t, uint64_t ns)
{
	t->runtime_ns = ns;
}

__attribute__((noinline)) uint64_t task_wakeups(const struct task *t)
{
	return t->rq.nr_wakeups;
}

__attribute__((noinline)) void count_switch(void)
{
	global_rq.nr_switches++;
}
