/*
 * cconf.c - HOME/cluster.json (cconf.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/log.h"
#include "core/secret.h"
#include "cconf.h"

void
tl_cconf_init(struct tl_cconf *c)
{
	memset(c, 0, sizeof(*c));
	c->ttl = TL_CCONF_TTL;
	c->margin_ms = TL_CCONF_MARGIN_MS;
	c->keep = TL_CCONF_KEEP;
	c->max_request = TL_CCONF_MAX_REQUEST;
	c->max_ops = TL_CCONF_MAX_OPS;
	/* Same shape as a mesh id: 16 random bytes in hex. */
	tl_secret_mesh_id(c->id);
}

int
tl_cconf_check(const struct tl_cconf *c, char *why)
{
	if (c->ttl < 2 || c->ttl > 300) {
		snprintf(why, TL_WHY_MAX, "lease-ttl %u: 2 to 300 s", c->ttl);
		return TL_EINVAL;
	}
	if (c->margin_ms < 500 || c->margin_ms >= c->ttl * 1000u / 2) {
		snprintf(why, TL_WHY_MAX, "lease-margin %u ms: from 500 ms to "
		    "less than half the lease (%u s)", c->margin_ms, c->ttl);
		return TL_EINVAL;
	}
	if (c->max_ops < 8 || c->max_request < 65536) {
		snprintf(why, TL_WHY_MAX, "max-txn-ops %u / max-request-bytes "
		    "%u: at least 8 and 65536", c->max_ops, c->max_request);
		return TL_EINVAL;
	}
	if (c->endpoints[0] == '\0') {
		snprintf(why, TL_WHY_MAX, "no etcd endpoint");
		return TL_EINVAL;
	}
	return 0;
}

static int
str_field(json_t *o, const char *name, char *out, size_t cap, int need,
    const char *path, char *why)
{
	json_t *v = json_object_get(o, name);

	if (v == NULL && !need)
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= cap) {
		snprintf(why, TL_WHY_MAX, "%.150s: field \"%.30s\": %s", path,
		    name,
		    v == NULL ? "missing" : "not a string of the right size");
		return TL_EMANIFEST;
	}
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int
num_field(json_t *o, const char *name, uint64_t *out, const char *path,
    char *why)
{
	json_t *v = json_object_get(o, name);

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		snprintf(why, TL_WHY_MAX, "%.150s: field \"%.30s\": not a "
		    "count", path, name);
		return TL_EMANIFEST;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int
tl_cconf_load(const char *home, struct tl_cconf *c, char *why)
{
	char path[1200], cwhy[TL_WHY_MAX];
	json_error_t je;
	json_t *o;
	uint64_t ttl, margin, keep, mreq, mops;
	int rc;

	why[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", home, TL_CLUSTER_FILE);
	if (access(path, F_OK) != 0)
		return errno == ENOENT ? TL_ENOTFOUND : errno;
	tl_cconf_init(c);
	if ((o = json_load_file(path, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		snprintf(why, TL_WHY_MAX, "%.150s:%d: %.90s", path, je.line,
		    je.text);
		return TL_EMANIFEST;
	}
	ttl = c->ttl;
	margin = c->margin_ms;
	keep = c->keep;
	mreq = c->max_request;
	mops = c->max_ops;
	c->id[0] = '\0';
	if ((rc = str_field(o, "endpoints", c->endpoints,
	    sizeof(c->endpoints), 1, path, why)) != 0 ||
	    (rc = str_field(o, "ca", c->ca, sizeof(c->ca), 0, path, why)) ||
	    (rc = str_field(o, "cert", c->cert, sizeof(c->cert), 0, path,
	    why)) ||
	    (rc = str_field(o, "key", c->key, sizeof(c->key), 0, path, why)) ||
	    (rc = str_field(o, "mesh", c->mesh, sizeof(c->mesh), 1, path,
	    why)) ||
	    (rc = str_field(o, "id", c->id, sizeof(c->id), 1, path, why)) ||
	    (rc = num_field(o, "lease-ttl", &ttl, path, why)) ||
	    (rc = num_field(o, "lease-margin-ms", &margin, path, why)) ||
	    (rc = num_field(o, "keep", &keep, path, why)) ||
	    (rc = num_field(o, "max-request-bytes", &mreq, path, why)) ||
	    (rc = num_field(o, "max-txn-ops", &mops, path, why))) {
		json_decref(o);
		return rc;
	}
	json_decref(o);
	if (ttl > 300 || margin > 300000 || mreq > (1u << 30) ||
	    mops > 100000) {
		snprintf(why, TL_WHY_MAX, "%.200s: a number out of range",
		    path);
		return TL_EMANIFEST;
	}
	c->ttl = (unsigned)ttl;
	c->margin_ms = (unsigned)margin;
	c->keep = keep;
	c->max_request = (unsigned)mreq;
	c->max_ops = (unsigned)mops;
	if (strlen(c->id) != TL_CCONF_ID_LEN ||
	    strspn(c->id, "0123456789abcdef") != TL_CCONF_ID_LEN ||
	    strlen(c->mesh) != 32 ||
	    strspn(c->mesh, "0123456789abcdef") != 32) {
		snprintf(why, TL_WHY_MAX, "%.180s: field \"id\" or \"mesh\": "
		    "not 32 hex digits", path);
		return TL_EMANIFEST;
	}
	if (tl_cconf_check(c, cwhy) != 0) {
		snprintf(why, TL_WHY_MAX, "%.90s: %.150s", path, cwhy);
		return TL_EMANIFEST;
	}
	return 0;
}

int
tl_cconf_write(const char *home, const struct tl_cconf *c)
{
	char path[1200];
	json_t *o;
	char *s;
	size_t n;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", home, TL_CLUSTER_FILE);
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I}",
	    "endpoints", c->endpoints, "ca", c->ca, "cert", c->cert,
	    "key", c->key, "mesh", c->mesh, "id", c->id,
	    "lease-ttl", (json_int_t)c->ttl,
	    "lease-margin-ms", (json_int_t)c->margin_ms,
	    "keep", (json_int_t)c->keep,
	    "max-request-bytes", (json_int_t)c->max_request,
	    "max-txn-ops", (json_int_t)c->max_ops);
	if (o == NULL)
		return ENOMEM;
	s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (s == NULL)
		return ENOMEM;
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600)) < 0) {
		rc = errno == EEXIST ? TL_EEXIST : errno;
		free(s);
		return rc;
	}
	n = strlen(s);
	s[n] = '\0';
	if (write(fd, s, n) != (ssize_t)n || write(fd, "\n", 1) != 1 ||
	    fsync(fd) != 0)
		rc = errno ? errno : EIO;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	free(s);
	if (rc != 0)
		unlink(path);
	return rc;
}
