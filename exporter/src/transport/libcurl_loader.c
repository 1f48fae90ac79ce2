/*
 * libcurl, loaded at its first use: the functions of its API the agent calls, each handing
 * the call to the library dlopen()ed then. Linked at start, libcurl and the 30 libraries it
 * needs (TLS, Kerberos, LDAP, ...) took 27 ms of CPU at every start, mostly their
 * constructors, for a `record` that never exports; an agent that ships profiles, asks the
 * kubelet or fetches debug files pays it once, at the first request.
 *
 * The library is the one the build found (PP_LIBCURL_SONAME); where it cannot be loaded, every
 * call fails as libcurl's own calls fail (NULL, CURLE_FAILED_INIT), and the reason is logged
 * once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include <curl/curl.h>

/* curl.h makes these type-checking macros under GCC: the functions are defined here */
#undef curl_easy_setopt
#undef curl_easy_getinfo

#ifndef PP_LIBCURL_SONAME
#define PP_LIBCURL_SONAME "libcurl.so.4"
#endif

static struct {
	CURLcode (*global_init)(long);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	void (*free)(void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	CURLU *(*url)(void);
	void (*url_cleanup)(CURLU *);
	CURLUcode (*url_get)(CURLU *, CURLUPart, char **, unsigned int);
	CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
	const char *(*url_strerror)(CURLUcode);
	time_t (*getdate)(const char *, const time_t *);
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static int lib_loaded; /* 1 once every function was found; written in load, under lib_once */

static void load(void)
{
	void *h = dlopen(PP_LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
	struct {
		const char *name;
		void **fn;
	} want[] = {
#define FN(f) {"curl_" #f, (void **)&lib.f}
	    FN(global_init),  FN(global_cleanup), FN(easy_init),    FN(easy_setopt),
	    FN(easy_perform), FN(easy_getinfo),	  FN(easy_cleanup), FN(easy_strerror),
	    FN(easy_escape),  FN(free),		  FN(slist_append), FN(slist_free_all),
	    FN(url),	      FN(url_cleanup),	  FN(url_get),	    FN(url_set),
	    FN(url_strerror), FN(getdate),
#undef FN
	};

	if (!h) {
		/* stderr, not the agent's log: this library knows nothing of the collector's */
		fprintf(stderr, "pebsprof: cannot load %s (HTTP requests fail): %s\n",
			PP_LIBCURL_SONAME, dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		*want[i].fn = dlsym(h, want[i].name);
		if (!*want[i].fn) {
			fprintf(stderr, "pebsprof: %s lacks %s (HTTP requests fail)\n",
				PP_LIBCURL_SONAME, want[i].name);
			dlclose(h);
			return;
		}
	}
	lib_loaded = 1; /* the handle stays open for the process's life */
}

static int loaded(void)
{
	pthread_once(&lib_once, load);
	return lib_loaded;
}

CURLcode curl_global_init(long flags)
{
	return loaded() ? lib.global_init(flags) : CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
	if (loaded())
		lib.global_cleanup();
}

CURL *curl_easy_init(void)
{
	return loaded() ? lib.easy_init() : NULL;
}

/*
 * The one value after option has the type the option's number range says (curl.h's
 * CURLOPTTYPE_*): read as that type, and passed on as it.
 */
CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...)
{
	CURLcode ret = CURLE_FAILED_INIT;
	va_list ap;

	if (!loaded())
		return ret;
	va_start(ap, option);
	if (option < CURLOPTTYPE_OBJECTPOINT)
		ret = lib.easy_setopt(curl, option, va_arg(ap, long));
	else if (option < CURLOPTTYPE_FUNCTIONPOINT)
		ret = lib.easy_setopt(curl, option, va_arg(ap, void *));
	else if (option < CURLOPTTYPE_OFF_T)
		ret = lib.easy_setopt(curl, option, va_arg(ap, void (*)(void)));
	else if (option < CURLOPTTYPE_BLOB)
		ret = lib.easy_setopt(curl, option, va_arg(ap, curl_off_t));
	else
		ret = lib.easy_setopt(curl, option, va_arg(ap, struct curl_blob *));
	va_end(ap);
	return ret;
}

CURLcode curl_easy_perform(CURL *curl)
{
	return loaded() ? lib.easy_perform(curl) : CURLE_FAILED_INIT;
}

/* Every CURLINFO takes a pointer to where the answer goes. */
CURLcode curl_easy_getinfo(CURL *curl, CURLINFO info, ...)
{
	CURLcode ret = CURLE_FAILED_INIT;
	va_list ap;

	if (!loaded())
		return ret;
	va_start(ap, info);
	ret = lib.easy_getinfo(curl, info, va_arg(ap, void *));
	va_end(ap);
	return ret;
}

void curl_easy_cleanup(CURL *curl)
{
	if (curl && loaded())
		lib.easy_cleanup(curl);
}

const char *curl_easy_strerror(CURLcode code)
{
	return loaded() ? lib.easy_strerror(code) : "libcurl could not be loaded";
}

char *curl_easy_escape(CURL *curl, const char *string, int length)
{
	return loaded() ? lib.easy_escape(curl, string, length) : NULL;
}

void curl_free(void *p)
{
	if (p && loaded()) /* only libcurl hands out what is freed here */
		lib.free(p);
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *data)
{
	return loaded() ? lib.slist_append(list, data) : NULL;
}

void curl_slist_free_all(struct curl_slist *list)
{
	if (list && loaded())
		lib.slist_free_all(list);
}

CURLU *curl_url(void)
{
	return loaded() ? lib.url() : NULL;
}

void curl_url_cleanup(CURLU *handle)
{
	if (handle && loaded())
		lib.url_cleanup(handle);
}

CURLUcode curl_url_get(CURLU *handle, CURLUPart what, char **part, unsigned int flags)
{
	if (!loaded()) {
		if (part)
			*part = NULL;
		return CURLUE_OUT_OF_MEMORY;
	}
	return lib.url_get(handle, what, part, flags);
}

CURLUcode curl_url_set(CURLU *handle, CURLUPart what, const char *part, unsigned int flags)
{
	return loaded() ? lib.url_set(handle, what, part, flags) : CURLUE_OUT_OF_MEMORY;
}

const char *curl_url_strerror(CURLUcode code)
{
	return loaded() ? lib.url_strerror(code) : "libcurl could not be loaded";
}

time_t curl_getdate(const char *p, const time_t *unused)
{
	return loaded() ? lib.getdate(p, unused) : -1;
}
