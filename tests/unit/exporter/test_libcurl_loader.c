/*
 * Unit tests of libcurl loaded at its first use (transport/libcurl_loader.c): each kind of
 * option value (long, pointer, function pointer, curl_off_t) and each answer pass the loader
 * as the caller wrote them, through a file:// transfer; built again with a library name that
 * does not exist (PP_TEST_LIBCURL_ABSENT), every call fails as libcurl's own calls fail and
 * the reason is said once.
 */
#include "check.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PP_TEST_LIBCURL_ABSENT

static size_t count_bytes(char *data, size_t size, size_t n, void *ctx)
{
	(void)data;
	*(size_t *)ctx += size * n;
	return size * n;
}

/* A file of n bytes; its file:// URL in url. */
static char *file_of(size_t n, char *url, size_t urlsize)
{
	char *path = strdup("/tmp/pp-test-curl.XXXXXX");
	int fd = path ? mkstemp(path) : -1;
	char block[1000];

	if (fd < 0) {
		free(path);
		return NULL;
	}
	memset(block, 'x', sizeof(block));
	for (size_t done = 0; done < n; done += sizeof(block))
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
			break;
	close(fd);
	snprintf(url, urlsize, "file://%s", path);
	return path;
}

TEST(every_kind_of_option_reaches_libcurl)
{
	char url[64];
	char *path = file_of(10000, url, sizeof(url));
	size_t got = 0;
	curl_off_t down = -1;
	long code = -1;
	CURL *h;

	REQUIRE(path);
	CHECK_EQ_U64(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
	h = curl_easy_init();
	REQUIRE(h);
	CHECK_EQ_U64(curl_easy_setopt(h, CURLOPT_URL, url), CURLE_OK); /* pointer */
	CHECK_EQ_U64(curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, count_bytes),
		     CURLE_OK); /* function */
	CHECK_EQ_U64(curl_easy_setopt(h, CURLOPT_WRITEDATA, &got), CURLE_OK);
	CHECK_EQ_U64(curl_easy_perform(h), CURLE_OK);
	CHECK_EQ_U64(got, 10000);
	/* long: no body wanted, none written */
	CHECK_EQ_U64(curl_easy_setopt(h, CURLOPT_NOBODY, 1L), CURLE_OK);
	got = 0;
	CHECK_EQ_U64(curl_easy_perform(h), CURLE_OK);
	CHECK_EQ_U64(got, 0);
	CHECK_EQ_U64(curl_easy_setopt(h, CURLOPT_NOBODY, 0L), CURLE_OK);
	/* curl_off_t: the transfer starts where the value says, so it arrived whole */
	CHECK_EQ_U64(curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)9000), CURLE_OK);
	CHECK_EQ_U64(curl_easy_perform(h), CURLE_OK);
	CHECK_EQ_U64(got, 1000);
	CHECK_EQ_U64(curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down), CURLE_OK);
	CHECK_EQ_U64(down, 1000);
	CHECK_EQ_U64(curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code), CURLE_OK);
	CHECK_EQ_U64(code, 0); /* file:// has none */
	/* an option number no kind owns: libcurl's own answer, not a crash */
	CHECK(curl_easy_setopt(h, (CURLoption)9999, 0L) != CURLE_OK);
	curl_easy_cleanup(h);
	curl_global_cleanup();
	unlink(path);
	free(path);
}

TEST(the_rest_of_the_api_answers_as_libcurl)
{
	struct curl_slist *l = curl_slist_append(NULL, "A: 1");
	CURLU *u = curl_url();
	CURL *h = curl_easy_init();
	char *part = NULL, *esc;

	REQUIRE(l && u && h);
	l = curl_slist_append(l, "B: 2");
	REQUIRE(l && l->next);
	CHECK_STR(l->next->data, "B: 2");
	curl_slist_free_all(l);
	CHECK_EQ_U64(curl_url_set(u, CURLUPART_URL, "http://user:pw@127.0.0.1:4040/a?q=1", 0),
		     CURLUE_OK);
	CHECK_EQ_U64(curl_url_get(u, CURLUPART_PORT, &part, 0), CURLUE_OK);
	CHECK_STR(part, "4040");
	curl_free(part);
	CHECK(curl_url_set(u, CURLUPART_URL, "http://[::1", 0) != CURLUE_OK);
	CHECK(strlen(curl_url_strerror(CURLUE_MALFORMED_INPUT)) > 0);
	curl_url_cleanup(u);
	esc = curl_easy_escape(h, "a b/c", 0);
	CHECK_STR(esc, "a%20b%2Fc");
	curl_free(esc);
	CHECK_STR(curl_easy_strerror(CURLE_OK), "No error");
	CHECK_EQ_U64(curl_getdate("Sun, 06 Nov 1994 08:49:37 GMT", NULL), 784111777);
	curl_easy_cleanup(h);
	curl_free(NULL);
	curl_slist_free_all(NULL);
	curl_url_cleanup(NULL);
}

TEST_LIST = {
    {"every_kind_of_option_reaches_libcurl", every_kind_of_option_reaches_libcurl},
    {"the_rest_of_the_api_answers_as_libcurl", the_rest_of_the_api_answers_as_libcurl},
};

#else

TEST(every_call_fails_and_says_why_once)
{
	char path[] = "/tmp/pp-test-curl-err.XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	char said[4096], *part = (char *)path;
	size_t n, times = 0;
	long code = 0;
	FILE *f;

	REQUIRE(fd >= 0 && saved >= 0);
	fflush(stderr);
	dup2(fd, 2);
	CHECK_EQ_U64(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_FAILED_INIT);
	CHECK(curl_easy_init() == NULL);
	CHECK_EQ_U64(curl_easy_setopt(NULL, CURLOPT_URL, "file:///"), CURLE_FAILED_INIT);
	CHECK_EQ_U64(curl_easy_setopt(NULL, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)1),
		     CURLE_FAILED_INIT);
	CHECK_EQ_U64(curl_easy_perform(NULL), CURLE_FAILED_INIT);
	CHECK_EQ_U64(curl_easy_getinfo(NULL, CURLINFO_RESPONSE_CODE, &code), CURLE_FAILED_INIT);
	CHECK(curl_url() == NULL);
	CHECK(curl_url_get(NULL, CURLUPART_URL, &part, 0) != CURLUE_OK);
	CHECK(part == NULL);
	CHECK(curl_url_set(NULL, CURLUPART_URL, "http://x/", 0) != CURLUE_OK);
	CHECK(curl_slist_append(NULL, "A: 1") == NULL);
	CHECK(curl_easy_escape(NULL, "a b", 0) == NULL);
	CHECK(curl_getdate("Sun, 06 Nov 1994 08:49:37 GMT", NULL) == -1);
	CHECK(strlen(curl_easy_strerror(CURLE_OK)) > 0);
	CHECK(strlen(curl_url_strerror(CURLUE_OK)) > 0);
	curl_easy_cleanup(NULL);
	curl_url_cleanup(NULL);
	curl_slist_free_all(NULL);
	curl_free(NULL);
	curl_global_cleanup();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fdopen(fd, "r");
	REQUIRE(f);
	rewind(f);
	n = fread(said, 1, sizeof(said) - 1, f);
	said[n] = '\0';
	fclose(f);
	unlink(path);
	for (const char *p = said; (p = strstr(p, "cannot load")); p++)
		times++;
	CHECK_EQ_U64(times, 1);
	CHECK(strstr(said, PP_LIBCURL_SONAME) != NULL);
}

TEST_LIST = {
    {"every_call_fails_and_says_why_once", every_call_fails_and_says_why_once},
};

#endif

TEST_MAIN()
