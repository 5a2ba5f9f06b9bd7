/*
 * directory_decl.c - the directory driver's declaration (decl.h): its
 * type, settings (and the rule over gid-base and gid-range together),
 * the one field, revocation and fencing, and names and compose, with
 * the pure helpers the operations share (directory-internal.h: a
 * grant's directory name, the settings' numbers).  The operations, on
 * tallyd's own file system, are directory.c's (which states what a
 * grant is and how its name is made).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "core/error.h"
#include "decl.h"
#include "directory-internal.h"
#include "util.h"

/* --- names ------------------------------------------------------------ */

/* A mesh id, or "" (a home made before ids); NULL reads as "". */
int
tl_drv_dir_mesh_valid(const char *m)
{
	return m == NULL || m[0] == '\0' || (strlen(m) == DIR_MESH_HEX &&
	    strspn(m, "0123456789abcdef") == DIR_MESH_HEX);
}

/* The grant's directory name (directory.c's top); TL_EINVAL for no id. */
static int
dir_name(const char *grant, char out[DIR_NAME_MAX + 1], uint64_t *h64)
{
	unsigned char h[16];
	size_t i, n;

	if (grant == NULL || *grant == '\0')
		return TL_EINVAL;
	crypto_generichash(h, sizeof(h), (const unsigned char *)grant,
	    strlen(grant), NULL, 0);
	n = strlen(grant);
	if (n > DIR_READABLE)
		n = DIR_READABLE;
	for (i = 0; i < n; i++) {
		char c = grant[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		out[i] = ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) ?
		    c : '-';
	}
	out[n++] = '_';
	for (i = 0; i < DIR_DIGEST_HEX / 2; i++)
		snprintf(out + n + 2 * i, 3, "%02x", h[i]);
	if (h64 != NULL) {
		*h64 = 0;
		for (i = 0; i < 8; i++)
			*h64 = (*h64 << 8) | h[i];
	}
	return 0;
}

/*
 * Scheme 4's name: READABLE "_m" DIGEST, DIGEST keyed by the mesh id
 * (as drivers/naming.c keys it: its 16 bytes, then zeros).
 */
static int
dir_name_mesh(const char *grant, const char *mesh,
    char out[DIR_NAME_MAX + 1])
{
	uint8_t key[TL_DRV_NAME_KEY_LEN] = { 0 };
	char digest[17];
	size_t n = 0;

	if (grant == NULL || *grant == '\0' || mesh == NULL ||
	    strlen(mesh) != DIR_MESH_HEX || !tl_drv_dir_mesh_valid(mesh) ||
	    dir_name(grant, out, NULL) != 0)
		return TL_EINVAL;
	sodium_hex2bin(key, 16, mesh, DIR_MESH_HEX, NULL, &n, NULL);
	tl_drv_name_digest_keyed(grant, key, digest);
	sodium_memzero(key, sizeof(key));
	n = strcspn(out, "_");
	snprintf(out + n, DIR_NAME_MAX + 1 - n, "_m%s", digest);
	return 0;
}

/* Whether s has the shape dir_name_mesh gives (and is safe as a name). */
static int
mesh_shaped(const char *s)
{
	const char *u;
	size_t n;

	if (s == NULL || (n = strlen(s)) < 3 + DIR_DIGEST_HEX ||
	    n > DIR_NAME_MAX || s[0] == '.' ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-_") != n ||
	    (u = strchr(s, '_')) == NULL || u == s || u[1] != 'm' ||
	    strlen(u + 2) != DIR_DIGEST_HEX ||
	    strspn(u + 2, "0123456789abcdef") != DIR_DIGEST_HEX)
		return 0;
	return 1;
}

int
tl_drv_dir_shaped(const char *s)
{
	const char *u;
	size_t n;

	if (mesh_shaped(s))
		return 1;
	/* READABLE "_" DIGEST: the last "_", 16 hex digits after it. */
	if (s == NULL || (n = strlen(s)) < 2 + DIR_DIGEST_HEX ||
	    (u = strrchr(s, '_')) == NULL || u == s ||
	    strlen(u + 1) != DIR_DIGEST_HEX ||
	    strspn(u + 1, "0123456789abcdef") != DIR_DIGEST_HEX)
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") ==
	    (size_t)(u - s);
}

int
tl_drv_dir_adoptable(const char *s)
{
	size_t n;

	return s != NULL && (n = strlen(s)) > 0 && n <= DIR_NAME_MAX &&
	    s[0] != '.' && strspn(s, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

/*
 * The directory a grant's operations act on: the scheme-4 name the
 * reactors derived (g->resource) when it has that shape, or the one
 * tally adopt took over (g->adopted); else the name of before, from the
 * grant id.  *h64 (may be NULL): where its group's probe starts.
 */
int
tl_drv_dir_grant_dir(const struct tl_drv_grant *g, char out[DIR_NAME_MAX + 1],
    uint64_t *h64)
{
	unsigned char h[16];
	size_t i;

	if (g->adopted && !tl_drv_dir_adoptable(g->resource))
		return TL_EINVAL;
	if (!g->adopted && !mesh_shaped(g->resource))
		return dir_name(g->grant, out, h64);
	if (g->grant == NULL || *g->grant == '\0')
		return TL_EINVAL;
	snprintf(out, DIR_NAME_MAX + 1, "%s", g->resource);
	if (h64 != NULL) {
		crypto_generichash(h, sizeof(h), (const unsigned char *)out,
		    strlen(out), NULL, 0);
		*h64 = 0;
		for (i = 0; i < 8; i++)
			*h64 = (*h64 << 8) | h[i];
	}
	return 0;
}

/*
 * names: scheme 4 (with a mesh id) the mesh's name; any other
 * scheme the name of before (what the directory of such a grant is
 * called).  No owner, no login: there is no credential.
 */
static int
dir_names(const struct tl_drv_name_in *in, struct tl_drv_names *out,
    char *why)
{
	char name[DIR_NAME_MAX + 1];
	int rc;

	memset(out, 0, sizeof(*out));
	if (in->scheme == TL_DRV_NAMING_MESH)
		rc = dir_name_mesh(in->grant, in->mesh, name);
	else
		rc = dir_name(in->grant, name, NULL);
	if (rc != 0)
		return tl_drv_why(why, TL_EINVAL, "a directory grant needs its "
		    "id%s", in->scheme == TL_DRV_NAMING_MESH ? " and the mesh "
		    "id" : "");
	snprintf(out->resource, TL_DRV_NAME_MAX, "%s", name);
	return 0;
}

/* --- settings --------------------------------------------------------- */

int
tl_drv_dir_num_setting(const char *const *sv, const char *name,
    unsigned long long dflt, unsigned long long *out, char *why)
{
	const char *v = tl_drv_setting_get(sv, name);
	char *end;

	*out = dflt;
	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	*out = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || *out == 0 || *out > 0xfffffffeULL)
		return tl_drv_why(why, TL_EINVAL, "%s=%s: expected a number of "
		    "groups, 1-4294967294", name, v);
	return 0;
}

/* gid-base + gid-range must stay group numbers (dir_open refuses them). */
static int
dir_settings_check(const char *const *sv, char *why)
{
	unsigned long long base, range;
	int rc;

	if ((rc = tl_drv_dir_num_setting(sv, "gid-base", 1000000000ULL,
	    &base, why)) != 0 || (rc = tl_drv_dir_num_setting(sv,
	    "gid-range", 1000000000ULL, &range, why)) != 0)
		return rc;
	if (base + range > 0xffffffffULL)
		return tl_drv_why(why, TL_EINVAL, "gid-base %llu + gid-range "
		    "%llu pass 4294967295", base, range);
	return 0;
}

/* --- pure ------------------------------------------------------------- */

/*
 * The one field, path: ROOT/NAME.  Pure (decl.h): root comes from the
 * provider's settings in ep, its trailing slashes dropped as dir_open
 * drops them, so the path is the one the operations act on.
 */
static int
dir_compose(const char *field, const struct tl_drv_endpoint *ep,
    const struct tl_drv_grant *g, char *out, size_t cap)
{
	char name[DIR_NAME_MAX + 1];
	const char *root;
	size_t rl;
	int n;

	out[0] = '\0';
	if (strcmp(field, "path") != 0)
		return TL_ENOTFOUND;
	root = ep != NULL ? tl_drv_setting_get(ep->settings, "root") : NULL;
	if (root == NULL || root[0] != '/' || g->grant == NULL ||
	    tl_drv_dir_grant_dir(g, name, NULL) != 0)
		return TL_EINVAL;
	rl = strlen(root);
	while (rl > 1 && root[rl - 1] == '/')
		rl--;
	n = snprintf(out, cap, "%.*s/%s", rl == 1 ? 0 : (int)rl, root, name);
	if (n < 0 || (size_t)n >= cap) {
		out[0] = '\0';
		return TL_ETOOBIG;
	}
	return 0;
}

static const char *const dir_types[] = { "directory", NULL };

/* The path is the whole connection: there is no credential. */
static const struct tl_drv_field dir_fields[] = {
	{ "path", 0 }, { NULL, 0 }
};
static const char *const dir_tags[] = { "files", NULL };

static const struct tl_drv_revocation dir_revocation = {
	.destroys = 0,
	.retain = 1,
	.revoke = "the directory is made inaccessible (mode 0000)",
	.retain_means = "its files are kept where they are, nobody but root "
	    "able to reach them (tally restore reopens it)",
	.purge = "deletes the directory and everything in it",
};

static const struct tl_drv_setting dir_settings[] = {
	{ "root", NULL, 0, TL_DRV_PATH, "the absolute path under which "
	    "each grant gets its directory", .use = TL_DRV_USE_PLAIN },
	{ "gid-base", "1000000000", 0, TL_DRV_INT, "run as root: the first "
	    "group number given to grants", 1, 0xfffffffeULL,
	    TL_DRV_USE_PLAIN },
	{ "gid-range", "1000000000", 0, TL_DRV_INT, "run as root: how many "
	    "group numbers from gid-base are tally's", 1, 0xfffffffeULL,
	    TL_DRV_USE_PLAIN },
	{ NULL, NULL, 0, TL_DRV_STRING, NULL, 0, 0, TL_DRV_USE_PLAIN }
};

static const struct tl_drv_fence_decl dir_fencing = {
	TL_DRV_FENCE_ATOMIC,
	"a file per mesh under the root (ROOT/.tally-fence-MESH), raised by "
	"compare-and-set under flock(2); every change takes the same lock "
	"and checks it",
	"none: a change and its fence check hold one lock, so a raise comes "
	"wholly before the change (refused) or after it"
};

const struct tl_drv_decl tl_drv_directory_decl = {
	.name = "directory",
	.types = dir_types,
	.tags = dir_tags,
	.settings = dir_settings,
	.settings_check = dir_settings_check,
	.fields = dir_fields,
	.credential = { .kind = TL_DRV_CRED_NONE },
	.revocation = &dir_revocation,
	.fencing = &dir_fencing,
	.caps = TL_DRV_CAP_BIT(TL_DRV_CAP_ADOPT) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_CHECK) |
	    TL_DRV_CAP_BIT(TL_DRV_CAP_SIZE),
	/* Every change is made under the root's fence lock (directory.c). */
	.sessions_max = 1,
	.name_max = DIR_NAME_MAX,
	.names = dir_names,
	.compose = dir_compose,
};
