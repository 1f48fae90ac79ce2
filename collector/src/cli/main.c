/* pebsprof: one binary, subcommands. Exit codes: 0 ok, 1 runtime failure, 2 usage error. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "cmd_record.h"
#include "cmd_run.h"
#include "probe_symbolize.h"
#include "sampling/probe.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: pebsprof <command> [options]\n"
		   "\n"
		   "A continuous, precise profiler for Linux: eBPF on perf events (Intel PEBS,\n"
		   "AMD IBS, or plain sampling), symbolized and aggregated profiles.\n"
		   "\n"
		   "commands:\n"
		   "  probe    what this machine can sample and why\n"
		   "  record   a bounded capture written to pprof, OTLP, folded or SVG files\n"
		   "  run      the node agent: continuous profiles to an OTLP or Pyroscope\n"
		   "           endpoint, or to local files\n"
		   "\n"
		   "`pebsprof <command> --help` describes each command.\n");
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (!cmd) {
		usage(stderr);
		return PP_EXIT_USAGE;
	}
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return PP_EXIT_OK;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
		printf("pebsprof %s\n", PP_VERSION);
		return PP_EXIT_OK;
	}
	if (!strcmp(cmd, "record"))
		return pp_cmd_record(argc - 1, argv + 1);
	if (!strcmp(cmd, "probe"))
		return pp_probe_run(argc - 1, argv + 1, &pp_probe_symbolize);
	if (!strcmp(cmd, "run"))
		return pp_cmd_run(argc - 1, argv + 1);
	fprintf(stderr,
		"pebsprof: unknown command '%s'; the commands are probe, record and run (see "
		"pebsprof --help)\n",
		cmd);
	return PP_EXIT_USAGE;
}
