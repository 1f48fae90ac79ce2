/* The symbolization facts `pebsprof probe` reports (see probe_symbolize.h). */
#define _GNU_SOURCE
#include "probe_symbolize.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "symbolize/debug_file.h"
#include "symbolize/demangle.h"
#include "symbolize/kernel_image.h"

struct facts {
	int debug_dir;	  /* /usr/lib/debug exists */
	long build_ids;	  /* ... with this many .build-id/xx folders; -1: none */
	int debuginfod;	  /* libdebuginfod.so.1 loads */
	const char *urls; /* DEBUGINFOD_URLS, or NULL */
	int openat2;	  /* RESOLVE_IN_ROOT opens work (5.6+) */
	int demangler;
	int kernel_image; /* 0: the running kernel's vmlinux with DWARF found, else -errno */
	char kernel_why[1024];
	struct pp_kernel_image kimage;
};

static void gather(struct facts *f)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	char dir[256];
	struct stat st;
	DIR *d;
	void *h;
	long fd;

	memset(f, 0, sizeof(*f));
	f->debug_dir = stat(PP_DEBUG_DIRS_DEFAULT, &st) == 0 && S_ISDIR(st.st_mode);
	f->build_ids = -1;
	snprintf(dir, sizeof(dir), "%s/.build-id", PP_DEBUG_DIRS_DEFAULT);
	d = opendir(dir);
	if (d) {
		struct dirent *e;

		f->build_ids = 0;
		while ((e = readdir(d)))
			f->build_ids += e->d_name[0] != '.';
		closedir(d);
	}
	h = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	f->debuginfod = h != NULL;
	if (h)
		dlclose(h);
	f->urls = getenv("DEBUGINFOD_URLS");
	fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
	f->openat2 = fd >= 0;
	if (fd >= 0)
		close((int)fd);
	f->demangler = pp_demangle_available();
	{
		/* as `record` looks for it by default: the host's debug directory, perf's places */
		struct pp_debug_dirs *dirs = pp_debug_dirs_new(NULL);
		struct pp_kernel_image_opts ko = {.debug_dirs = dirs};

		f->kernel_image =
		    pp_kernel_image_open(&ko, &f->kimage, f->kernel_why, sizeof(f->kernel_why));
		if (f->kimage.fd >= 0)
			close(f->kimage.fd);
		pp_debug_dirs_free(dirs);
	}
}

static void text(FILE *out)
{
	struct facts f;

	gather(&f);
	fprintf(out, "\nsymbolization:\n");
	fprintf(out, "  debug files:   %s%s", PP_DEBUG_DIRS_DEFAULT,
		f.debug_dir ? "" : " (missing: install Debian's *-dbgsym / *-dbg packages)");
	if (f.build_ids >= 0)
		fprintf(out, ", .build-id with %ld folders", f.build_ids);
	fprintf(out, "; more with --debug-dirs\n");
	fprintf(out, "  debuginfod:    libdebuginfod.so.1 %s; DEBUGINFOD_URLS %s%s%s\n",
		f.debuginfod ? "loads" : "missing (Debian libdebuginfod1): --debuginfod refused",
		f.urls && f.urls[0] ? "= \"" : "unset (off unless --debuginfod)",
		f.urls && f.urls[0] ? f.urls : "", f.urls && f.urls[0] ? "\"" : "");
	fprintf(out, "  in containers: %s\n",
		f.openat2 ? "openat2 RESOLVE_IN_ROOT: links stay inside each container's root"
			  : "no openat2 (kernel < 5.6): files in containers are opened by path");
	fprintf(out, "  perf maps:     /tmp/perf-PID.map of each process (--no-perf-maps: off)\n");
	fprintf(out, "  C++ names:     %s\n",
		f.demangler ? "demangled (libstdc++)"
			    : "mangled: libstdc++.so.6 is missing (Debian libstdc++6)");
	if (!f.kernel_image)
		fprintf(out, "  kernel types:  %s (build id %s, the running kernel's)\n",
			f.kimage.path, f.kimage.build_id);
	else
		fprintf(out, "  kernel types:  none: %s\n", f.kernel_why);
}

static void json(FILE *out)
{
	struct facts f;

	gather(&f);
	fprintf(out, "\"symbolization\":{\"debug_dir\":");
	pp_probe_json_string(out, PP_DEBUG_DIRS_DEFAULT);
	fprintf(out, ",\"debug_dir_exists\":%s,\"build_id_folders\":%ld,",
		f.debug_dir ? "true" : "false", f.build_ids);
	fprintf(out, "\"libdebuginfod\":%s,\"debuginfod_urls\":", f.debuginfod ? "true" : "false");
	if (f.urls)
		pp_probe_json_string(out, f.urls);
	else
		fputs("null", out);
	fprintf(out,
		",\"openat2\":%s,\"demangler\":%s,\"kernel_image\":", f.openat2 ? "true" : "false",
		f.demangler ? "true" : "false");
	if (!f.kernel_image)
		pp_probe_json_string(out, f.kimage.path);
	else
		fputs("null", out);
	fprintf(out, ",\"kernel_image_why\":");
	pp_probe_json_string(out, f.kernel_image ? f.kernel_why : "");
	fputs("}", out);
}

const struct pp_probe_extra pp_probe_symbolize = {.text = text, .json = json};
