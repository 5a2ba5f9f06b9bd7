/*
 * util.c - the helpers every driver shares (util.h).  Below every
 * driver: it calls core/ only, never registry.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "decl.h"
#include "util.h"

int
tl_drv_why(char *why, int rc, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL)
		return rc;
	va_start(ap, fmt);
	vsnprintf(why, TL_WHY_MAX, fmt, ap);
	va_end(ap);
	return rc;
}

void
tl_drv_why_add(char *why, const char *fmt, ...)
{
	size_t n = strlen(why);
	va_list ap;

	if (n + 3 >= TL_WHY_MAX)
		return;
	if (n > 0) {
		memcpy(why + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(why + n, TL_WHY_MAX - n, fmt, ap);
	va_end(ap);
}

int
tl_drv_vsqlf(char *buf, size_t n, char *why, const char *fmt, va_list ap)
{
	int k = vsnprintf(buf, n, fmt, ap);

	if (k < 0 || (size_t)k >= n)
		return tl_drv_why(why, TL_EINVAL, "statement too long");
	return 0;
}

int
tl_drv_sqlf(char *buf, size_t n, char *why, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = tl_drv_vsqlf(buf, n, why, fmt, ap);
	va_end(ap);
	return rc;
}

const char *
tl_drv_setting_get(const char *const *sv, const char *name)
{
	for (; sv != NULL && sv[0] != NULL && sv[1] != NULL; sv += 2)
		if (strcmp(sv[0], name) == 0)
			return sv[1];
	return NULL;
}

/* --- a requirement's params ------------------------------------------ */

const struct tl_drv_param *
tl_drv_param_find(const struct tl_drv_decl *d, const char *name)
{
	const struct tl_drv_param *p;

	for (p = d != NULL ? d->params : NULL; p != NULL && p->name != NULL;
	    p++)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

/* One item: UTF-8 is jansson's and the provider's; no control byte. */
static int
param_item(const struct tl_drv_param *p, const char *v, size_t len,
    char *why)
{
	const char *const *a;
	size_t i;

	if (len == 0)
		return tl_drv_why(why, TL_EINVAL, "%s: an empty value",
		    p->name);
	if (len > TL_DRV_PARAM_VALUE_MAX)
		return tl_drv_why(why, TL_EINVAL, "%s: a value of %zu bytes "
		    "(at most %d)", p->name, len, TL_DRV_PARAM_VALUE_MAX);
	for (i = 0; i < len; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return tl_drv_why(why, TL_EINVAL, "%s: a value with a "
			    "control character", p->name);
	if (p->allowed == NULL)
		return 0;
	for (a = p->allowed; *a != NULL; a++)
		if (strlen(*a) == len && memcmp(*a, v, len) == 0)
			return 0;
	return tl_drv_why(why, TL_EINVAL, "%s: '%.*s' is not one of the "
	    "values it takes (%s)", p->name, (int)(len > 64 ? 64 : len), v,
	    p->description);
}

int
tl_drv_params_check(const struct tl_drv_decl *d, const char *const *pairs,
    char *why)
{
	const char *const *pv;
	int rc;

	for (pv = pairs; pv != NULL && pv[0] != NULL && pv[1] != NULL;
	    pv += 2) {
		const struct tl_drv_param *p = tl_drv_param_find(d, pv[0]);
		const char *v = pv[1], *nl;
		size_t items = 0;

		if (p == NULL)
			return tl_drv_why(why, TL_EINVAL, "%s is not a "
			    "property the %s driver takes", pv[0], d->name);
		if (tl_drv_setting_get(pairs, pv[0]) != v)
			return tl_drv_why(why, TL_EINVAL, "%s is declared "
			    "twice", pv[0]);
		do {
			nl = strchr(v, '\n');
			if (!p->list && nl != NULL)
				return tl_drv_why(why, TL_EINVAL, "%s takes one "
				    "value, not a list", p->name);
			if (++items > TL_DRV_PARAM_ITEMS)
				return tl_drv_why(why, TL_EINVAL, "%s: more "
				    "than %d values", p->name,
				    TL_DRV_PARAM_ITEMS);
			if ((rc = param_item(p, v, nl != NULL ?
			    (size_t)(nl - v) : strlen(v), why)) != 0)
				return rc;
			v = nl != NULL ? nl + 1 : NULL;
		} while (v != NULL);
	}
	return d->params_check != NULL ? d->params_check(pairs, why) : 0;
}

int
tl_drv_params_pack(const char *const *pairs, char *buf, size_t cap)
{
	size_t off = 0, n;

	for (; pairs != NULL && pairs[0] != NULL && pairs[1] != NULL;
	    pairs += 2) {
		n = strlen(pairs[0]) + strlen(pairs[1]) + 2;
		if (off + n + 1 > cap)
			return TL_ETOOBIG;
		memcpy(buf + off, pairs[0], strlen(pairs[0]) + 1);
		off += strlen(pairs[0]) + 1;
		memcpy(buf + off, pairs[1], strlen(pairs[1]) + 1);
		off += strlen(pairs[1]) + 1;
	}
	if (off + 1 > cap)
		return TL_ETOOBIG;
	buf[off] = '\0';
	return 0;
}

const char *const *
tl_drv_params_unpack(const char *buf, const char **sv, size_t n)
{
	size_t i = 0;

	while (buf != NULL && buf[0] != '\0' && i + 3 <= n) {
		sv[i++] = buf;
		buf += strlen(buf) + 1;
		sv[i++] = buf;
		buf += strlen(buf) + 1;
	}
	sv[i] = NULL;
	return sv;
}

int
tl_drv_pct_append(char *out, size_t cap, size_t *off, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			if (*off + 1 >= cap)
				return TL_ETOOBIG;
			out[(*off)++] = (char)c;
		} else {
			if (*off + 3 >= cap)
				return TL_ETOOBIG;
			out[(*off)++] = '%';
			out[(*off)++] = hex[c >> 4];
			out[(*off)++] = hex[c & 15];
		}
	}
	out[*off] = '\0';
	return 0;
}

int
tl_drv_grant_named(const struct tl_drv_grant *g)
{
	return g->grant != NULL && *g->grant != '\0';
}

char *
tl_drv_secret_dup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d;

	if ((d = tl_secret_alloc(n)) != NULL)
		memcpy(d, s, n);
	return d;
}

enum tl_drv_tls
tl_drv_consumer_tls(const struct tl_drv_decl *d,
    const struct tl_drv_endpoint *ep)
{
	const char *const *sv = ep != NULL ? ep->settings : NULL;
	const struct tl_drv_setting *s;
	const char *h = NULL, *t, *ca;
	enum tl_drv_tls mode;
	char where[256];
	size_t i;

	/* d's own table (decl.c would make a call circle through it). */
	for (i = 0, s = d->settings; s != NULL && s[i].name != NULL; i++)
		if (s[i].use == TL_DRV_USE_ADMIN_HOST &&
		    (h = tl_drv_setting_get(sv, s[i].name)) != NULL &&
		    *h != '\0')
			break;
	if (h == NULL || *h == '\0')
		h = ep != NULL && ep->host != NULL ? ep->host : "";
	mode = tl_drv_reach(d, sv, h, where, sizeof(where));
	t = tl_drv_setting_get(sv, "tls");
	ca = tl_drv_setting_get(sv, "ca");
	if (mode == TL_DRV_TLS_VERIFY && (t == NULL || *t == '\0') &&
	    (ca == NULL || *ca == '\0') && !d->tls_system_ca)
		return TL_DRV_TLS_OFF;
	return mode;
}

int
tl_drv_compose_ca(const struct tl_drv_endpoint *ep, char *out, size_t cap)
{
	const char *v = ep != NULL && ep->ca_path != NULL ? ep->ca_path : "";

	if (cap == 0)
		return TL_ETOOBIG;
	if (strlen(v) >= cap) {
		out[0] = '\0';
		return TL_ETOOBIG;
	}
	memcpy(out, v, strlen(v) + 1);
	return 0;
}

_Static_assert(TL_DRV_PASSWORD_MAX == TL_PASSWORD_MAX,
    "a policy's longest password is what the buffers hold");

int
tl_drv_password(const struct tl_drv_decl *d, const char *const *settings,
    char *out, char *why)
{
	const struct tl_drv_setting *ls = NULL, *as = NULL;
	const char *lv, *av, *chars;
	int every = 0, rc;

	out[0] = '\0';
	if (d != NULL) {
		ls = tl_drv_setting_find(d->settings, "password-length");
		as = tl_drv_setting_find(d->settings, "password-alphabet");
	}
	if (ls == NULL || as == NULL) {
		tl_secret_password(out);
		return 0;
	}
	lv = tl_drv_setting_get(settings, ls->name);
	av = tl_drv_setting_get(settings, as->name);
	if (lv == NULL || *lv == '\0')
		lv = ls->dflt;
	if (av == NULL || *av == '\0')
		av = as->dflt;
	/* The kinds' checks: the driver's range, a known alphabet. */
	if ((rc = tl_drv_setting_check(ls, lv, why)) != 0 ||
	    (rc = tl_drv_setting_check(as, av, why)) != 0)
		return rc;
	chars = tl_drv_alphabet(av, &every);
	return tl_secret_password_of(out, (size_t)strtoull(lv, NULL, 10),
	    chars, every);
}
