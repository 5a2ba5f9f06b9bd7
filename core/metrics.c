/*
 * metrics.c - --metrics: /metrics on core/httpd.c, and the text's
 * helpers (metrics.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/httpd.h"
#include "core/metrics.h"

struct tl_mx {
	struct tl_httpd	*h;
};

/* How old the figures are, as this scrape sees them. */
static size_t
age(char *end, size_t cap, double age_s)
{
	int n = snprintf(end, cap, "# HELP tally_metrics_age_seconds How old "
	    "these figures are.\n# TYPE tally_metrics_age_seconds gauge\n"
	    "tally_metrics_age_seconds %.3f\n", age_s);

	return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

static const struct tl_httpd_doc mx_doc = {
	"/metrics", "text/plain; version=0.0.4; charset=utf-8",
	TL_MX_FRESH_MS, TL_MX_WAIT_MS, age, 200
};
static const struct tl_httpd_conf mx_conf = {
	"--metrics", &mx_doc, 1, "GET /metrics\n", NULL
};

int
tl_mx_addr_ok(const char *addr, char *why)
{
	return tl_httpd_addr_ok(mx_conf.flag, addr, why);
}

int
tl_mx_start(const char *addr, struct tl_mx **out, char *why)
{
	struct tl_mx *m;
	int rc;

	*out = NULL;
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return ENOMEM;
	if ((rc = tl_httpd_start(addr, &mx_conf, &m->h, why)) != 0) {
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void
tl_mx_stop(struct tl_mx *m)
{
	if (m == NULL)
		return;
	tl_httpd_stop(m->h);
	free(m);
}

int
tl_mx_fd(const struct tl_mx *m)
{
	return tl_httpd_fd(m->h);
}

int
tl_mx_wanted(struct tl_mx *m)
{
	return tl_httpd_wanted(m->h);
}

void
tl_mx_publish(struct tl_mx *m, char *text, size_t len)
{
	tl_httpd_publish(m->h, 0, text, len);
}

/* --- writing the text ------------------------------------------------ */

const double tl_mx_buckets[TL_MX_NBUCKETS] = {
	0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60
};

void
tl_mx_observe(struct tl_mx_hist *h, double secs)
{
	size_t i;

	h->count++;
	h->sum += secs;
	for (i = 0; i < TL_MX_NBUCKETS; i++)
		if (secs <= tl_mx_buckets[i])
			h->le[i]++;
}

void
tl_mx_vaddf(struct tl_mx_buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	if (b->err)
		return;
	va_copy(aq, ap);
	n = vsnprintf(b->p != NULL ? b->p + b->len : NULL, b->p != NULL ?
	    b->cap - b->len : 0, fmt, aq);
	va_end(aq);
	if (n < 0) {
		b->err = EINVAL;
		return;
	}
	if (b->p == NULL || b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *q;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		if ((q = realloc(b->p, cap)) == NULL) {
			b->err = ENOMEM;
			return;
		}
		b->p = q;
		b->cap = cap;
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

void
tl_mx_addf(struct tl_mx_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tl_mx_vaddf(b, fmt, ap);
	va_end(ap);
}

/*
 * A label value as the format wants it: '\\', '"' and newline escaped.
 * Ours are names (NODE/MODULE, states, kinds) of a few printable bytes;
 * anything else becomes '?', and a value is cut at 200 bytes.
 */
const char *
tl_mx_label(const char *s, char out[512])
{
	size_t o = 0;

	for (; *s != '\0' && o < 400; s++) {
		if (*s == '\\' || *s == '"') {
			out[o++] = '\\';
			out[o++] = *s;
		} else if (*s == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else
			out[o++] = (unsigned char)*s < 0x20 ||
			    (unsigned char)*s == 0x7f ? '?' : *s;
	}
	out[o] = '\0';
	return out;
}

void
tl_mx_head(struct tl_mx_buf *b, const char *name, const char *type, const char *help)
{
	tl_mx_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void
tl_mx_hist_write(struct tl_mx_buf *b, const char *name, const char *label,
    const char *value, const struct tl_mx_hist *h)
{
	char e[512];
	size_t k;

	tl_mx_label(value, e);
	for (k = 0; k < TL_MX_NBUCKETS; k++)
		tl_mx_addf(b, "%s_bucket{%s=\"%s\",le=\"%g\"} %llu\n", name,
		    label, e, tl_mx_buckets[k], (unsigned long long)h->le[k]);
	tl_mx_addf(b, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, label,
	    e, (unsigned long long)h->count);
	tl_mx_addf(b, "%s_sum{%s=\"%s\"} %.6f\n", name, label, e, h->sum);
	tl_mx_addf(b, "%s_count{%s=\"%s\"} %llu\n", name, label, e,
	    (unsigned long long)h->count);
}
