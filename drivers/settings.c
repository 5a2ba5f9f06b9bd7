/*
 * settings.c - a driver's declared settings: finding one, and checking a
 * value against its kind (tally assign refuses what does not fit before
 * anything is recorded).  Apart from registry.c, so the helpers every
 * driver calls do not depend on the table that names every driver.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "decl.h"

const struct tl_drv_setting *
tl_drv_setting_find(const struct tl_drv_setting *settings, const char *name)
{
	for (; settings != NULL && settings->name != NULL; settings++)
		if (strcmp(settings->name, name) == 0)
			return settings;
	return NULL;
}

/* The alphabets of TL_DRV_ALPHABET (decl.h): the name's characters. */
static const struct {
	const char	*name;
	const char	*chars;
	int		 every_class;
} alphabets[] = {
	{ "base64url", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789-_", 0 },
	{ "alnum", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789", 0 },
	{ "hex", "0123456789abcdef", 0 },
	{ "symbols", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789-_.~", 1 },
};

const char *
tl_drv_alphabet(const char *name, int *every_class)
{
	size_t i;

	for (i = 0; i < sizeof(alphabets) / sizeof(alphabets[0]); i++)
		if (strcmp(alphabets[i].name, name) == 0) {
			if (every_class != NULL)
				*every_class = alphabets[i].every_class;
			return alphabets[i].chars;
		}
	return NULL;
}

const char *
tl_drv_kind_name(enum tl_drv_kind kind)
{
	switch (kind) {
	case TL_DRV_STRING:	return "string";
	case TL_DRV_PORT:	return "port";
	case TL_DRV_HOST:	return "host";
	case TL_DRV_BOOL:	return "bool";
	case TL_DRV_INT:	return "int";
	case TL_DRV_DURATION:	return "duration";
	case TL_DRV_PATH:	return "path";
	case TL_DRV_TLS_MODE:	return "tls mode";
	case TL_DRV_PEM:	return "PEM file";
	case TL_DRV_PEM_KEY:	return "PEM key";
	case TL_DRV_ALPHABET:	return "alphabet";
	}
	return "?";
}

/* Decimal digits only, at most 18 of them (no sign, no overflow). */
static int
digits(const char *v, size_t n, unsigned long long *out)
{
	unsigned long long x = 0;
	size_t i;

	if (n == 0 || n > 18)
		return -1;
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (unsigned long long)(v[i] - '0');
	}
	*out = x;
	return 0;
}

int
tl_drv_duration(const char *value, uint64_t *seconds)
{
	static const struct { char unit; uint64_t s; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 }
	};
	unsigned long long x;
	uint64_t mul = 1;
	size_t n = strlen(value), i;

	if (n == 0)
		return TL_EINVAL;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (value[n - 1] == units[i].unit) {
			mul = units[i].s;
			n--;
			break;
		}
	/* 18 digits times a day would overflow: a year of days is plenty. */
	if (digits(value, n, &x) != 0 || x == 0 || x > UINT64_MAX / 86400)
		return TL_EINVAL;
	*seconds = (uint64_t)x * mul;
	return 0;
}

static int
bad(char *why, const struct tl_drv_setting *s, const char *value,
    const char *expected)
{
	/* A secret's value is never echoed, even a wrong one. */
	if (s->secret || *value == '\0')
		snprintf(why, TL_WHY_MAX, "%s: %s", s->name, expected);
	else
		snprintf(why, TL_WHY_MAX, "%s=%.64s%s: %s", s->name, value,
		    strlen(value) > 64 ? "..." : "", expected);
	return TL_EINVAL;
}

/*
 * A PEM value: certificates and nothing else, lines of printable ASCII,
 * the first one a BEGIN CERTIFICATE.  Its bytes are never copied into
 * why (a person gave a file: its name is theirs to say).
 */
static int
pem_check(const struct tl_drv_setting *s, const char *value, size_t n,
    char *why)
{
	static const char begin[] = "-----BEGIN CERTIFICATE-----";
	static const char end[] = "-----END CERTIFICATE-----";
	size_t i;

	if (n > TL_DRV_PEM_MAX)
		return bad(why, s, "", "longer than 16384 bytes");
	for (i = 0; i < n; i++)
		if (value[i] != '\n' && ((unsigned char)value[i] < 0x20 ||
		    (unsigned char)value[i] > 0x7e))
			return bad(why, s, "", "not PEM text (a control "
			    "character or a byte past ASCII)");
	if (strncmp(value, begin, sizeof(begin) - 1) != 0 ||
	    strstr(value, end) == NULL)
		return bad(why, s, "", "not a PEM certificate (-----BEGIN "
		    "CERTIFICATE----- ... -----END CERTIFICATE-----)");
	return 0;
}

/*
 * A PEM private key: one unencrypted key block (PRIVATE KEY, EC PRIVATE
 * KEY or RSA PRIVATE KEY), lines of printable ASCII.  Whether it parses
 * and is its certificate's is the TLS library's to say (the CLI asks it
 * at assign, the driver at open); nothing of it reaches why.
 */
static int
pem_key_check(const struct tl_drv_setting *s, const char *value, size_t n,
    char *why)
{
	static const char *const begins[] = { "-----BEGIN PRIVATE KEY-----",
	    "-----BEGIN EC PRIVATE KEY-----",
	    "-----BEGIN RSA PRIVATE KEY-----", NULL };
	size_t i;

	if (n > TL_DRV_KEY_MAX)
		return bad(why, s, "", "longer than 8192 bytes");
	for (i = 0; i < n; i++)
		if (value[i] != '\n' && ((unsigned char)value[i] < 0x20 ||
		    (unsigned char)value[i] > 0x7e))
			return bad(why, s, "", "not PEM text (a control "
			    "character or a byte past ASCII)");
	if (strstr(value, "ENCRYPTED") != NULL ||
	    strstr(value, "Proc-Type:") != NULL)
		return bad(why, s, "", "an encrypted key: tallyd could not "
		    "give its passphrase (openssl pkey -in KEY -out PLAIN)");
	for (i = 0; begins[i] != NULL; i++)
		if (strncmp(value, begins[i], strlen(begins[i])) == 0)
			break;
	if (begins[i] == NULL || strstr(value, "-----END ") == NULL ||
	    strstr(value + 11, "-----BEGIN ") != NULL)
		return bad(why, s, "", "not one PEM private key (-----BEGIN "
		    "PRIVATE KEY----- ... -----END PRIVATE KEY-----)");
	return 0;
}

int
tl_drv_setting_check(const struct tl_drv_setting *s, const char *value,
    char *why)
{
	static const char *const bools[] = { "yes", "no", "true", "false",
	    "on", "off", "1", "0", NULL };
	unsigned long long x;
	uint64_t secs;
	size_t n = strlen(value), i;

	if (n == 0)
		return bad(why, s, value, "empty (--unset removes a setting)");
	if (s->kind == TL_DRV_PEM)
		return pem_check(s, value, n, why);
	if (s->kind == TL_DRV_PEM_KEY)
		return pem_key_check(s, value, n, why);
	if (n > TL_DRV_SETTING_MAX)
		return bad(why, s, value, "longer than 255 bytes");
	/*
	 * Values reach connection parameters, SQL literals and env files:
	 * a newline or another control character is never meant.
	 */
	for (i = 0; i < n; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			return bad(why, s, "", "contains a control character "
			    "(a newline?)");
	switch (s->kind) {
	case TL_DRV_STRING:
		return 0;
	case TL_DRV_PORT:
		if (digits(value, n, &x) != 0 || x < 1 || x > 65535)
			return bad(why, s, value, "expected a port, 1-65535");
		return 0;
	case TL_DRV_HOST:
		if (value[0] == '-' || value[0] == '.')
			return bad(why, s, value, "expected a host name or an "
			    "IP address");
		for (i = 0; i < n; i++)
			if (!((value[i] >= 'a' && value[i] <= 'z') ||
			    (value[i] >= 'A' && value[i] <= 'Z') ||
			    (value[i] >= '0' && value[i] <= '9') ||
			    value[i] == '.' || value[i] == '-' ||
			    value[i] == ':' || value[i] == '_' ||
			    value[i] == '/'))
				return bad(why, s, value, "expected a host "
				    "name or an IP address");
		return 0;
	case TL_DRV_BOOL:
		for (i = 0; bools[i] != NULL; i++)
			if (strcmp(value, bools[i]) == 0)
				return 0;
		return bad(why, s, value, "expected yes or no");
	case TL_DRV_INT:
		if (s->min != 0 || s->max != 0) {
			char range[64];

			snprintf(range, sizeof(range), "expected an integer, "
			    "%llu-%llu", s->min, s->max);
			if (digits(value, n, &x) != 0 || x < s->min ||
			    x > s->max)
				return bad(why, s, value, range);
			return 0;
		}
		if (digits(value, n, &x) != 0)
			return bad(why, s, value, "expected a non-negative "
			    "integer");
		return 0;
	case TL_DRV_DURATION:
		if (tl_drv_duration(value, &secs) != 0)
			return bad(why, s, value, "expected a duration, N "
			    "seconds or N followed by s, m, h or d (90s, 5m)");
		if ((s->min != 0 || s->max != 0) &&
		    (secs < s->min || secs > s->max)) {
			char range[80];

			snprintf(range, sizeof(range), "expected a duration "
			    "of %llu to %llu seconds", s->min, s->max);
			return bad(why, s, value, range);
		}
		return 0;
	case TL_DRV_TLS_MODE:
		if (strcmp(value, "verify") != 0 &&
		    strcmp(value, "require") != 0 && strcmp(value, "off") != 0)
			return bad(why, s, value, "expected verify, require or "
			    "off");
		return 0;
	case TL_DRV_PEM:
	case TL_DRV_PEM_KEY:
		return 0;
	case TL_DRV_ALPHABET:
		if (tl_drv_alphabet(value, NULL) == NULL)
			return bad(why, s, value, "expected base64url, alnum, "
			    "hex or symbols");
		return 0;
	case TL_DRV_PATH:
		if (value[0] != '/' || strstr(value, "/./") != NULL ||
		    strstr(value, "/../") != NULL ||
		    (n >= 2 && strcmp(value + n - 2, "/.") == 0) ||
		    (n >= 3 && strcmp(value + n - 3, "/..") == 0))
			return bad(why, s, value, "expected an absolute path "
			    "without . or .. parts");
		return 0;
	}
	return bad(why, s, value, "unknown kind");
}

int
tl_drv_fence_ours(const struct tl_drv_fence *want,
    const struct tl_drv_fence_held *held)
{
	if (held->epoch == 0 || held->epoch < want->epoch)
		return 1;
	return held->epoch == want->epoch && want->leader != NULL &&
	    strcmp(held->leader, want->leader) == 0;
}

const char *
tl_drv_fencing_name(enum tl_drv_fencing kind)
{
	switch (kind) {
	case TL_DRV_FENCE_ATOMIC:	return "atomic with each change";
	case TL_DRV_FENCE_BEFORE_CALL:	return "checked before each call";
	case TL_DRV_FENCE_EPOCH_CHECK:	return "epoch checked by the control plane";
	case TL_DRV_FENCE_NONE:		break;
	}
	return "none";
}

const char *
tl_drv_tls_name(enum tl_drv_tls mode)
{
	switch (mode) {
	case TL_DRV_TLS_OFF:		return "off";
	case TL_DRV_TLS_REQUIRE:	return "require";
	case TL_DRV_TLS_VERIFY:		return "verify";
	}
	return "?";
}

int
tl_drv_host_loopback(const char *host)
{
	return host != NULL && (strcmp(host, "localhost") == 0 ||
	    strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
	    strcmp(host, "[::1]") == 0);
}

enum tl_drv_tls
tl_drv_tls_mode(const char *const *settings, const char *host)
{
	const char *v = NULL;
	size_t i;

	for (i = 0; settings != NULL && settings[i] != NULL &&
	    settings[i + 1] != NULL; i += 2)
		if (strcmp(settings[i], "tls") == 0)
			v = settings[i + 1];
	if (v != NULL && strcmp(v, "require") == 0)
		return TL_DRV_TLS_REQUIRE;
	if (v != NULL && strcmp(v, "off") == 0)
		return TL_DRV_TLS_OFF;
	if (v != NULL && strcmp(v, "verify") == 0)
		return TL_DRV_TLS_VERIFY;
	return tl_drv_host_loopback(host) ? TL_DRV_TLS_OFF : TL_DRV_TLS_VERIFY;
}

int
tl_drv_url_host(const char *url, int *https, char *host, size_t cap)
{
	const char *a, *e;
	size_t n;

	if (strncmp(url, "https://", 8) == 0) {
		*https = 1;
		a = url + 8;
	} else if (strncmp(url, "http://", 7) == 0) {
		*https = 0;
		a = url + 7;
	} else
		return TL_EINVAL;
	if ((e = strpbrk(a, "/?#@")) != NULL && *e == '@')
		a = e + 1;	/* user info: never the host */
	if (*a == '[') {
		a++;
		if ((e = strchr(a, ']')) == NULL)
			return TL_EINVAL;
	} else
		e = a + strcspn(a, ":/?#");
	n = (size_t)(e - a);
	if (n == 0 || n >= cap)
		return TL_EINVAL;
	memcpy(host, a, n);
	host[n] = '\0';
	return 0;
}

enum tl_drv_tls
tl_drv_reach(const struct tl_drv_decl *d, const char *const *settings,
    const char *host, char *where, size_t cap)
{
	if (d != NULL && d->reach != NULL)
		return d->reach(settings, host, where, cap);
	snprintf(where, cap, "%s", host != NULL ? host : "");
	return tl_drv_tls_mode(settings, host);
}
