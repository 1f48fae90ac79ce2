/*
 * Tests of kernel_image.c: the running kernel's build id read from a notes file laid out as
 * /sys/kernel/notes is (the Xen and Linux notes around the GNU one), and the search for its
 * image with DWARF in a root laid out as a host with Debian's -dbg package installed. The image
 * is tests/programs/kernel_image, linked at the kernel's address; its build id and _stext are
 * read here with readelf and nm (binutils), not with the code under test. A debuginfod client
 * is stood in for by a scripted fetch function (the real one has tests of its own).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kernel_notes.h"
#include "symbolize/debug_file.h"
#include "symbolize/kernel_image.h"
#include "testsh.h"

#define IMAGE PP_TEST_BUILD_DIR "/pp_kernel_image"
#define RELEASE "6.1.0-99-amd64"

static void image_id(char *out, size_t size)
{
	pp_test_sh_line("readelf -n " IMAGE " | sed -n 's/.*Build ID: *//p'", out, size);
}

static uint64_t image_stext(void)
{
	char line[64];

	pp_test_sh_line("nm " IMAGE " | awk '$3 == \"_stext\" { print $1 }'", line, sizeof(line));
	return strtoull(line, NULL, 16);
}

TEST(build_id_from_notes_among_other_notes)
{
	char dir[4096], id[128], got[129];

	REQUIRE(pp_test_scratch_dir(dir, sizeof(dir), "pp-kimage-notes") == 0);
	image_id(id, sizeof(id));
	REQUIRE(strlen(id) == 40);
	REQUIRE(pp_test_write_kernel_notes(dir, id) == 0);
	CHECK(pp_kernel_build_id(dir, got, sizeof(got)) == 0);
	CHECK_STR(got, id);
	CHECK(pp_kernel_build_id(dir, got, 20) == -ENOSPC);
	REQUIRE(pp_test_write_kernel_notes(dir, "") == 0);
	CHECK(pp_kernel_build_id(dir, got, sizeof(got)) == -ENOENT);
	CHECK(pp_kernel_build_id("/nonexistent", got, sizeof(got)) == -ENOENT);
	/* the running kernel's, where it has one: 20 bytes of SHA-1 */
	if (access("/sys/kernel/notes", R_OK) == 0 &&
	    pp_kernel_build_id(NULL, got, sizeof(got)) == 0)
		CHECK(strlen(got) == 40);
}

struct fixture {
	char dir[4096], root[4200], sys[4200];
	char id[128];
};

/* A host root without an image and a sysfs whose notes hold the image's build id. */
static void fixture_init(struct fixture *f, const char *name)
{
	REQUIRE(pp_test_scratch_dir(f->dir, sizeof(f->dir), name) == 0);
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	snprintf(f->sys, sizeof(f->sys), "%s/sys", f->dir);
	image_id(f->id, sizeof(f->id));
	REQUIRE(strlen(f->id) == 40);
	REQUIRE(pp_test_write_kernel_notes(f->sys, f->id) == 0);
	REQUIRE(pp_test_sh("mkdir -p '%s'", f->root) == 0);
}

static int open_in(const struct fixture *f, const char *path, const struct pp_debug_dirs *dirs,
		   struct pp_kernel_image *img, char *why, size_t why_size)
{
	struct pp_kernel_image_opts o = {
	    .path = path,
	    .root = f->root,
	    .sys_root = f->sys,
	    .release = RELEASE,
	    .debug_dirs = dirs,
	};

	return pp_kernel_image_open(&o, img, why, why_size);
}

/* Debian's linux-image-RELEASE-dbg: /usr/lib/debug/boot/vmlinux-RELEASE. */
TEST(found_where_debian_installs_it)
{
	struct pp_kernel_image img;
	struct fixture f;
	char why[1024];

	fixture_init(&f, "pp-kimage-debian");
	CHECK(open_in(&f, NULL, NULL, &img, why, sizeof(why)) == -ENOENT);
	CHECK(strstr(why, "linux-image-" RELEASE "-dbg") != NULL);
	CHECK(strstr(why, f.id) != NULL);
	CHECK(img.fd == -1);

	REQUIRE(pp_test_sh("mkdir -p '%s/usr/lib/debug/boot' && cp " IMAGE
			   " '%s/usr/lib/debug/boot/vmlinux-" RELEASE "'",
			   f.root, f.root) == 0);
	REQUIRE(open_in(&f, NULL, NULL, &img, why, sizeof(why)) == 0);
	CHECK(img.fd >= 0);
	CHECK_STR(img.build_id, f.id);
	CHECK_EQ_U64(img.stext, image_stext());
	CHECK(img.stext >= 0xffffffff81000000ull);
	CHECK(strstr(img.path, "/usr/lib/debug/boot/vmlinux-" RELEASE) != NULL);
	close(img.fd);
}

/* A kernel tree's build/vmlinux, reached by the usual link to the sources, in the root. */
TEST(found_through_the_build_link_inside_the_root)
{
	struct pp_kernel_image img;
	struct fixture f;
	char why[1024];

	fixture_init(&f, "pp-kimage-build");
	REQUIRE(pp_test_sh("mkdir -p '%s/usr/src/linux-" RELEASE "' '%s/lib/modules/" RELEASE
			   "' && cp " IMAGE " '%s/usr/src/linux-" RELEASE "/vmlinux' && "
			   "ln -s /usr/src/linux-" RELEASE " '%s/lib/modules/" RELEASE "/build'",
			   f.root, f.root, f.root, f.root) == 0);
	REQUIRE(open_in(&f, NULL, NULL, &img, why, sizeof(why)) == 0);
	CHECK_STR(img.build_id, f.id);
	close(img.fd);
}

/* Another build of the same release, and an image stripped of its DWARF: neither is taken. */
TEST(another_build_or_no_dwarf_is_refused)
{
	struct pp_kernel_image img;
	struct fixture f;
	char why[1024], path[4400];

	fixture_init(&f, "pp-kimage-refused");
	REQUIRE(pp_test_sh("mkdir -p '%s/boot' && cp " IMAGE " '%s/boot/vmlinux-" RELEASE "'",
			   f.root, f.root) == 0);
	REQUIRE(pp_test_write_kernel_notes(f.sys, "00112233445566778899aabbccddeeff00112233") == 0);
	CHECK(open_in(&f, NULL, NULL, &img, why, sizeof(why)) == -ENOENT);
	CHECK(img.fd == -1);
	/* given by path, the wrong build is said as such */
	snprintf(path, sizeof(path), "%s/boot/vmlinux-" RELEASE, f.root);
	CHECK(open_in(&f, path, NULL, &img, why, sizeof(why)) == -ESTALE);
	CHECK(strstr(why, "not the running kernel's build") != NULL);

	REQUIRE(pp_test_write_kernel_notes(f.sys, f.id) == 0);
	REQUIRE(pp_test_sh("strip --strip-debug '%s'", path) == 0);
	REQUIRE(pp_test_sh("readelf -S '%s' | grep -q debug_info", path) != 0);
	CHECK(open_in(&f, NULL, NULL, &img, why, sizeof(why)) == -ENODATA);
	CHECK(strstr(why, "no image with DWARF") != NULL);
	CHECK(open_in(&f, path, NULL, &img, why, sizeof(why)) == -ENODATA);
}

/* DIR/.build-id/ab/cdef....debug of a debug directory, as -dbg packages also install it. */
TEST(found_by_build_id_in_a_debug_directory)
{
	struct pp_kernel_image img;
	struct pp_debug_dirs *dirs;
	struct fixture f;
	char why[1024], dbg[4400];

	fixture_init(&f, "pp-kimage-buildid");
	snprintf(dbg, sizeof(dbg), "%s/debug", f.dir);
	REQUIRE(pp_test_sh("mkdir -p '%s/.build-id/%.2s' && cp " IMAGE
			   " '%s/.build-id/%.2s/%s.debug'",
			   dbg, f.id, dbg, f.id, f.id + 2) == 0);
	dirs = pp_debug_dirs_new(dbg);
	REQUIRE(dirs != NULL);
	CHECK(open_in(&f, NULL, NULL, &img, why, sizeof(why)) == -ENOENT);
	REQUIRE(open_in(&f, NULL, dirs, &img, why, sizeof(why)) == 0);
	CHECK_STR(img.build_id, f.id);
	CHECK_EQ_U64(img.stext, image_stext());
	close(img.fd);
	pp_debug_dirs_free(dirs);
}

/* A debuginfod client as the fetcher is: answers by script, the asked build ids kept. */
struct fake_fetch {
	int answers[4]; /* an errno (negative), or 1: open the file */
	const char *file;
	int calls;
	char asked[PP_BUILD_ID_HEX_SIZE];
};

static int fake_fetch(void *ctx, const char *build_id)
{
	struct fake_fetch *ff = ctx;
	int a = ff->answers[ff->calls < 4 ? ff->calls : 3];

	ff->calls++;
	snprintf(ff->asked, sizeof(ff->asked), "%s", build_id);
	return a == 1 ? open(ff->file, O_RDONLY | O_CLOEXEC) : a;
}

static int open_fetching(const struct fixture *f, struct fake_fetch *ff,
			 struct pp_kernel_image *img, char *why, size_t why_size)
{
	struct pp_kernel_image_opts o = {
	    .root = f->root,
	    .sys_root = f->sys,
	    .release = RELEASE,
	    .fetch = fake_fetch,
	    .fetch_ctx = ff,
	};

	return pp_kernel_image_open(&o, img, why, why_size);
}

/*
 * Nothing on the node: the servers are asked for the running build id, "in progress" while
 * they fetch, then the image is taken; what they have of another build or without DWARF is
 * refused, a miss is said, and a failure (a server down) stays "in progress".
 */
TEST(fetched_from_debuginfod_by_the_running_build_id)
{
	struct fake_fetch ff = {.answers = {-EAGAIN, -EAGAIN, 1}, .file = IMAGE};
	struct pp_kernel_image img;
	struct fixture f;
	char why[1024], stripped[4400];

	fixture_init(&f, "pp-kimage-debuginfod");
	CHECK(open_fetching(&f, &ff, &img, why, sizeof(why)) == -EINPROGRESS);
	CHECK_STR(ff.asked, f.id);
	CHECK(strstr(why, "asked the debuginfod servers") != NULL);
	CHECK(img.fd == -1);
	CHECK(open_fetching(&f, &ff, &img, why, sizeof(why)) == -EINPROGRESS);
	REQUIRE(open_fetching(&f, &ff, &img, why, sizeof(why)) == 0);
	CHECK_EQ_U64(ff.calls, 3);
	CHECK_STR(img.build_id, f.id);
	CHECK_EQ_U64(img.stext, image_stext());
	CHECK(strstr(img.path, "debuginfod") != NULL);
	close(img.fd);

	/* found on the node: the servers are not asked */
	REQUIRE(pp_test_sh("mkdir -p '%s/usr/lib/debug/boot' && cp " IMAGE
			   " '%s/usr/lib/debug/boot/vmlinux-" RELEASE "'",
			   f.root, f.root) == 0);
	ff = (struct fake_fetch){.answers = {1}, .file = IMAGE};
	REQUIRE(open_fetching(&f, &ff, &img, why, sizeof(why)) == 0);
	CHECK_EQ_U64(ff.calls, 0);
	close(img.fd);
	REQUIRE(pp_test_sh("rm -r '%s/usr/lib/debug'", f.root) == 0);

	/* a server's file of another build is refused */
	REQUIRE(pp_test_write_kernel_notes(f.sys, "00112233445566778899aabbccddeeff00112233") == 0);
	ff = (struct fake_fetch){.answers = {1}, .file = IMAGE};
	CHECK(open_fetching(&f, &ff, &img, why, sizeof(why)) == -ENOENT);
	CHECK(strstr(why, "another build") != NULL);
	CHECK(img.fd == -1);
	REQUIRE(pp_test_write_kernel_notes(f.sys, f.id) == 0);

	/* and one without DWARF */
	snprintf(stripped, sizeof(stripped), "%s/stripped", f.dir);
	REQUIRE(pp_test_sh("strip --strip-debug -o '%s' " IMAGE, stripped) == 0);
	ff = (struct fake_fetch){.answers = {1}, .file = stripped};
	CHECK(open_fetching(&f, &ff, &img, why, sizeof(why)) == -ENODATA);
	CHECK(strstr(why, "no DWARF or code") != NULL);

	ff = (struct fake_fetch){.answers = {-ENOENT}};
	CHECK(open_fetching(&f, &ff, &img, why, sizeof(why)) == -ENOENT);
	CHECK(strstr(why, "no debuginfod server has it") != NULL);
	/* a server down: not given up, the client asks again later */
	ff = (struct fake_fetch){.answers = {-EIO}};
	CHECK(open_fetching(&f, &ff, &img, why, sizeof(why)) == -EINPROGRESS);
	CHECK(strstr(why, "asking the debuginfod servers failed; asked again later") != NULL);
}

/* Without the running kernel's build id nothing found by searching is trusted; a path is. */
TEST(no_running_build_id_takes_only_a_given_path)
{
	struct pp_kernel_image img;
	struct fixture f;
	char why[1024];

	fixture_init(&f, "pp-kimage-noid");
	REQUIRE(pp_test_write_kernel_notes(f.sys, "") == 0);
	REQUIRE(pp_test_sh("mkdir -p '%s/usr/lib/debug/boot' && cp " IMAGE
			   " '%s/usr/lib/debug/boot/vmlinux-" RELEASE "'",
			   f.root, f.root) == 0);
	CHECK(open_in(&f, NULL, NULL, &img, why, sizeof(why)) == -ENOENT);
	CHECK(strstr(why, "build id is unknown") != NULL);
	REQUIRE(open_in(&f, IMAGE, NULL, &img, why, sizeof(why)) == 0);
	CHECK_STR(img.build_id, f.id);
	close(img.fd);
}

TEST_LIST = {
    {"build_id_from_notes_among_other_notes", build_id_from_notes_among_other_notes},
    {"found_where_debian_installs_it", found_where_debian_installs_it},
    {"fetched_from_debuginfod_by_the_running_build_id",
     fetched_from_debuginfod_by_the_running_build_id},
    {"found_through_the_build_link_inside_the_root", found_through_the_build_link_inside_the_root},
    {"another_build_or_no_dwarf_is_refused", another_build_or_no_dwarf_is_refused},
    {"found_by_build_id_in_a_debug_directory", found_by_build_id_in_a_debug_directory},
    {"no_running_build_id_takes_only_a_given_path", no_running_build_id_takes_only_a_given_path},
};

TEST_MAIN()
