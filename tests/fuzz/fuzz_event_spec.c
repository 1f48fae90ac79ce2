/*
 * Fuzz target for the event-spec and sysfs parsers: the -e spec (modifiers, raw and named
 * events), CPU lists, format specs, perf term lists encoded against a Skylake-like core PMU
 * built in memory, and /proc/cpuinfo. The first byte picks the parser so one corpus covers
 * all of them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/events.h"
#include "sampling/pmu.h"
#include "sampling/sysinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fmt_names[] = {"event", "umask", "inv", "cmask", "ldlat", "split"};
static const char *const fmt_specs[] = {"config:0-7",	"config:8-15",	"config:23",
					"config:24-31", "config1:0-15", "config:0-3,32-35"};

static void encode(const char *buf, size_t len)
{
	struct pp_pmu_format formats[6];
	struct pp_pmu_event events[2] = {
	    {"mem-loads", "event=0xcd,umask=0x1,ldlat=3"},
	    {"selfref", "selfref,event=1"}, /* an alias naming itself must not recurse */
	};
	struct pp_pmu pmu;
	uint64_t cfg[3] = {0, 0, 0};
	char err[128];

	memset(&pmu, 0, sizeof(pmu));
	strcpy(pmu.name, "cpu");
	for (size_t i = 0; i < 6; i++) {
		strcpy(formats[i].name, fmt_names[i]);
		if (pp_pmu_format_parse(fmt_specs[i], strlen(fmt_specs[i]), &formats[i]))
			abort();
	}
	pmu.formats = formats;
	pmu.nr_formats = 6;
	pmu.events = events;
	pmu.nr_events = 2;
	pp_pmu_encode(&pmu, buf, len, cfg, err, sizeof(err));
	if (memchr(err, '\0', sizeof(err)) == NULL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_event_spec spec;
	struct pp_pmu_format f;
	char err[256];
	int *cpus, fam, model;
	size_t n;
	char *buf, vendor[16];

	if (size < 1)
		return 0;
	/* copy without a terminator so reads past the length are caught by ASan */
	buf = malloc(size - 1 ? size - 1 : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	switch (data[0] % 5) {
	case 0:
		if (pp_event_spec_parse(buf, size - 1, &spec, err, sizeof(err)) == 0 &&
		    (!memchr(spec.text, '\0', sizeof(spec.text)) ||
		     !memchr(spec.terms, '\0', sizeof(spec.terms)) ||
		     (spec.exclude_user && spec.exclude_kernel)))
			abort();
		break;
	case 4:
		if (pp_sys_parse_cpuinfo(buf, size - 1, vendor, sizeof(vendor), &fam, &model) ==
			0 &&
		    (!memchr(vendor, '\0', sizeof(vendor)) || fam < 0 || model < 0))
			abort();
		break;
	case 1:
		if (pp_cpulist_parse(buf, size - 1, &cpus, &n) == 0) {
			for (size_t i = 1; i < n; i++)
				if (cpus[i] <= cpus[i - 1])
					abort(); /* must come back sorted and unique */
			free(cpus);
		}
		break;
	case 2:
		pp_pmu_format_parse(buf, size - 1, &f);
		break;
	default:
		encode(buf, size - 1);
		break;
	}
	free(buf);
	return 0;
}
