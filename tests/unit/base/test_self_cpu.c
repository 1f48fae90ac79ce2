/*
 * Tests of the agent's CPU time by thread (base/self_cpu.h): a thread that burned CPU shows
 * under its name less "pp-", the main thread as "main", and once it ended its time is
 * "exited"; the parts never add up to more than the process's total; schedstat's text and
 * hostile thread names are read as they should be.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/self_cpu.h"
#include "check.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int burned, may_end;

/* burns 30 ms of its own CPU, says so, and waits to be let go */
static void *spin(void *arg)
{
	volatile uint64_t x = 0;
	uint64_t until = thread_cpu_ns() + 30000000u;

	(void)arg;
	while (thread_cpu_ns() < until)
		x++;
	pthread_mutex_lock(&lock);
	burned = 1;
	pthread_cond_broadcast(&cond);
	while (!may_end)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static const struct pp_thread_cpu *named(const struct pp_self_cpu *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->threads[i].name, name))
			return &c->threads[i];
	return NULL;
}

static uint64_t parts(const struct pp_self_cpu *c)
{
	uint64_t sum = c->exited_ns;

	for (size_t i = 0; i < c->n; i++)
		sum += c->threads[i].ns;
	return sum;
}

TEST(a_threads_cpu_shows_under_its_name_then_as_exited)
{
	struct pp_self_cpu live, after;
	const struct pp_thread_cpu *t;
	pthread_t th;

	REQUIRE(pthread_create(&th, NULL, spin, NULL) == 0);
	pthread_setname_np(th, "pp-spinner");
	pthread_mutex_lock(&lock);
	while (!burned)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);

	REQUIRE(pp_self_cpu_read(NULL, &live) == 0);
	t = named(&live, "spinner");
	REQUIRE(t != NULL);
	CHECK(t->ns >= 25000000u);
	CHECK(named(&live, "main") != NULL);
	/* rusage and schedstat round differently: within a tick of each other */
	CHECK(parts(&live) <= live.total_ns + 10000000u);
	CHECK(live.total_ns >= t->ns - 10000000u);

	pthread_mutex_lock(&lock);
	may_end = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	pthread_join(th, NULL);
	REQUIRE(pp_self_cpu_read(NULL, &after) == 0);
	CHECK(named(&after, "spinner") == NULL);
	CHECK(after.exited_ns >= 20000000u);
}

TEST(schedstat_text)
{
	uint64_t ns = 7;

	CHECK(pp_schedstat_run_ns("123 456 7\n", 10, &ns) == 0);
	CHECK_EQ_U64(ns, 123);
	CHECK(pp_schedstat_run_ns("42\n", 3, &ns) == 0);
	CHECK_EQ_U64(ns, 42);
	CHECK(pp_schedstat_run_ns("42", 2, &ns) == 0);
	CHECK(pp_schedstat_run_ns("", 0, &ns) == -EINVAL);
	CHECK(pp_schedstat_run_ns(" 1 2", 4, &ns) == -EINVAL);
	CHECK(pp_schedstat_run_ns("12x 1", 5, &ns) == -EINVAL);
	CHECK(pp_schedstat_run_ns("99999999999999999999999 1", 25, &ns) == -EINVAL);
	/* only len bytes are read: the digits past it are not the number's */
	CHECK(pp_schedstat_run_ns("1234 5", 2, &ns) == 0);
	CHECK_EQ_U64(ns, 12);
}

TEST(thread_names)
{
	static const struct {
		const char *comm;
		int main_thread;
		size_t size;
		const char *want;
	} cases[] = {
	    {"pebsprof\n", 1, PP_SELF_CPU_NAME_MAX, "main"},
	    {"pp-unwinder\n", 0, PP_SELF_CPU_NAME_MAX, "unwinder"},
	    {"pp-k8s-meta\n", 0, PP_SELF_CPU_NAME_MAX, "k8s-meta"},
	    /* what a thread may set itself: no label breaks, no escapes */
	    {"a\"b\x1b[1m{}\n", 0, PP_SELF_CPU_NAME_MAX, "a_b__1m__"},
	    {"", 0, PP_SELF_CPU_NAME_MAX, "_"},
	    {"pp-", 0, PP_SELF_CPU_NAME_MAX, "_"},
	    {"abcdefghijklmnopqrstuvwxyz", 0, 8, "abcdefg"},
	};
	char out[PP_SELF_CPU_NAME_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pp_self_cpu_name(cases[i].comm, strlen(cases[i].comm), cases[i].main_thread, out,
				 cases[i].size);
		CHECK_STR(out, cases[i].want);
	}
}

TEST_LIST = {
    {"a_threads_cpu_shows_under_its_name_then_as_exited",
     a_threads_cpu_shows_under_its_name_then_as_exited},
    {"schedstat_text", schedstat_text},
    {"thread_names", thread_names},
};
TEST_MAIN()
