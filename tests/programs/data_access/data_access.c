/*
 * Field accesses of known structs, for the data-type resolver's tests: each function below
 * makes one access the test names from this source (the type and field), on the heap through
 * a pointer held only in a register, in a nested struct, in an array of structs, in globals,
 * and in a struct on the stack. Run, it walks a table of connections (a struct-walking workload).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct header {
	uint16_t kind;
	uint16_t len; /* offset 2: conn.hdr.len at 6 */
	uint32_t crc;
};

struct slot {
	long key;
	long value;
};

struct conn {
	int fd;
	struct header hdr;    /* 4 */
	long rx_bytes;	      /* 16 */
	long tx_bytes;	      /* 24 */
	char name[16];	      /* 32 */
	struct slot slots[4]; /* 48 */
};

struct stats {
	long hits;
	long misses; /* 8 */
};

extern struct stats g_stats;
extern struct conn g_table[8];
struct stats g_stats;
struct conn g_table[8];

/* extern, so that the compiler keeps each as it is written (no clones of static functions) */
long read_rx(const struct conn *c);
void write_tx(struct conn *c, long v);
unsigned read_hdr_len(const struct conn *c);
long read_slot_value(const struct conn *c, long i);
void count_miss(void);
long read_table_tx(long i);
void consume(struct conn *c);
long stack_conn(long v);

__attribute__((noinline)) long read_rx(const struct conn *c)
{
	return c->rx_bytes;
}

__attribute__((noinline)) void write_tx(struct conn *c, long v)
{
	c->tx_bytes = v;
}

__attribute__((noinline)) unsigned read_hdr_len(const struct conn *c)
{
	return c->hdr.len;
}

__attribute__((noinline)) long read_slot_value(const struct conn *c, long i)
{
	return c->slots[i].value;
}

__attribute__((noinline)) void count_miss(void)
{
	g_stats.misses++;
}

__attribute__((noinline)) long read_table_tx(long i)
{
	return g_table[i].tx_bytes;
}

__attribute__((noinline)) void consume(struct conn *c)
{
	__asm__ volatile("" : : "r"(c) : "memory");
}

/* A struct on the stack (its address escapes, so it lives in the frame, not in registers) */
__attribute__((noinline)) long stack_conn(long v)
{
	struct conn c;

	memset(&c, 0, sizeof(c));
	consume(&c);
	c.tx_bytes = v;
	consume(&c);
	return c.rx_bytes;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000, sum = 0;
	struct conn *conns = calloc(64, sizeof(*conns));

	if (!conns)
		return 1;
	for (long i = 0; i < n; i++) {
		struct conn *c = &conns[i % 64];

		write_tx(c, i);
		write_tx(&g_table[i % 8], i);
		sum +=
		    read_rx(c) + read_hdr_len(c) + read_slot_value(c, i % 4) + read_table_tx(i % 8);
		if (sum & 1)
			count_miss();
	}
	printf("%ld %ld\n", sum, g_stats.misses);
	free(conns);
	return 0;
}
