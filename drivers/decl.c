/*
 * decl.c - the table of declarations, and reading one.
 *
 * What every program may ask of a driver without a session: it links
 * the declarations (drivers/NAME_decl.c) and no provider client.  The
 * operations' table is registry.c's, linked only by tallyd.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "decl.h"

extern const struct tl_drv_decl tl_drv_postgres_decl;
extern const struct tl_drv_decl tl_drv_directory_decl;
extern const struct tl_drv_decl tl_drv_rabbitmq_decl;
extern const struct tl_drv_decl tl_drv_mariadb_decl;
extern const struct tl_drv_decl tl_drv_redis_decl;
extern const struct tl_drv_decl tl_drv_ceph_rgw_decl;
extern const struct tl_drv_decl tl_drv_oidc_decl;
extern const struct tl_drv_decl tl_drv_ca_decl;

static const struct tl_drv_decl *const decls[] = {
	&tl_drv_postgres_decl,
	&tl_drv_directory_decl,
	&tl_drv_rabbitmq_decl,
	&tl_drv_mariadb_decl,
	&tl_drv_redis_decl,
	&tl_drv_ceph_rgw_decl,
	&tl_drv_oidc_decl,
	&tl_drv_ca_decl,
	NULL
};

static const char *const names[] = { "postgres", "directory", "rabbitmq",
	"mariadb", "redis", "ceph-rgw", "oidc", "ca", NULL };

const struct tl_drv_decl *
tl_drv_decl_find(const char *name)
{
	size_t i;

	for (i = 0; decls[i] != NULL; i++)
		if (strcmp(decls[i]->name, name) == 0)
			return decls[i];
	return NULL;
}

const struct tl_drv_decl *
tl_drv_decl_for_type(const char *type)
{
	size_t i, j;

	for (i = 0; decls[i] != NULL; i++)
		for (j = 0; decls[i]->types[j] != NULL; j++)
			if (strcmp(decls[i]->types[j], type) == 0)
				return decls[i];
	return NULL;
}

const char *const *
tl_drv_names(void)
{
	return names;
}

uint64_t
tl_drv_naming(const struct tl_drv_decl *d)
{
	return d != NULL && d->keyed_names ? TL_DRV_NAMING_KEYED :
	    TL_DRV_NAMING;
}

int
tl_drv_name(const struct tl_drv_decl *d, const struct tl_drv_name_in *in,
    struct tl_drv_names *out, char *why)
{
	if (d != NULL && d->names != NULL)
		return d->names(in, out, why);
	tl_drv_name_scheme(in, d != NULL && d->name_max != 0 ? d->name_max :
	    TL_DRV_NAME_MAX - 1, out);
	return 0;
}

int
tl_drv_compose(const struct tl_drv_decl *d, const char *field,
    const struct tl_drv_endpoint *ep, const struct tl_drv_grant *g,
    char *out, size_t cap)
{
	const char *v = NULL;

	if (d != NULL && d->compose != NULL)
		return d->compose(field, ep, g, out, cap);
	if (cap > 0)
		out[0] = '\0';
	if (strcmp(field, "host") == 0)
		v = ep->host;
	else if (strcmp(field, "port") == 0)
		v = ep->port;
	if (v == NULL)
		return TL_ENOTFOUND;
	if ((size_t)snprintf(out, cap, "%s", v) >= cap)
		return TL_ETOOBIG;
	return 0;
}

static const struct tl_drv_field *
field_find(const struct tl_drv_decl *d, const char *field)
{
	const struct tl_drv_field *f;

	for (f = d->fields; f != NULL && f->name != NULL; f++)
		if (strcmp(f->name, field) == 0)
			return f;
	return NULL;
}

int
tl_drv_field_secret(const struct tl_drv_decl *d, const char *field)
{
	const struct tl_drv_field *f = field_find(d, field);

	return f != NULL && f->secret;
}

int
tl_drv_has_field(const struct tl_drv_decl *d, const char *field)
{
	return field_find(d, field) != NULL;
}

int
tl_drv_has_tag(const struct tl_drv_decl *d, const char *tag)
{
	size_t i;

	for (i = 0; d->tags != NULL && d->tags[i] != NULL; i++)
		if (strcmp(d->tags[i], tag) == 0)
			return 1;
	return 0;
}

const char *
tl_drv_setting_default(const struct tl_drv_decl *d, const char *name)
{
	const struct tl_drv_setting *s;

	if (d == NULL || (s = tl_drv_setting_find(d->settings, name)) == NULL)
		return NULL;
	return s->dflt;
}

const struct tl_drv_setting *
tl_drv_setting_for(const struct tl_drv_decl *d, enum tl_drv_use use,
    size_t i)
{
	const struct tl_drv_setting *s;

	for (s = d != NULL ? d->settings : NULL; s != NULL && s->name != NULL;
	    s++)
		if (s->use == use && i-- == 0)
			return s;
	return NULL;
}

int
tl_drv_can(const struct tl_drv_decl *d, enum tl_drv_cap cap, char *why)
{
	static const char *const what[] = {
		[TL_DRV_CAP_MIGRATE] = "run migrations",
		[TL_DRV_CAP_MOVE] = "move data",
		[TL_DRV_CAP_SIZE] = "measure data",
		[TL_DRV_CAP_ADMIN_ROTATE] = "rotate an admin credential",
		[TL_DRV_CAP_CHECK] = "verify grants",
		[TL_DRV_CAP_ROTATE] = "rotate credentials",
		[TL_DRV_CAP_CHECK_BULK] = "verify grants in bulk",
		[TL_DRV_CAP_LOSS] = "tell what a revocation loses",
		[TL_DRV_CAP_SESSIONS] = "count a login's sessions",
		[TL_DRV_CAP_FIND_MARKED] = "find another mesh's objects by "
		    "their mark",
		[TL_DRV_CAP_ADOPT] = "take over objects it did not make",
		[TL_DRV_CAP_ACCESS] = "give a login access below ownership "
		    "(access: and of:)",
		[TL_DRV_CAP_TRY_PASSWORD] = "try the password an adopted "
		    "login's holders use",
	};

	if (d->caps & TL_DRV_CAP_BIT(cap))
		return 1;
	if (why != NULL)
		snprintf(why, TL_WHY_MAX, "driver %s cannot %s%s", d->name,
		    (size_t)cap < sizeof(what) / sizeof(what[0]) &&
		    what[cap] != NULL ? what[cap] : "do that",
		    cap == TL_DRV_CAP_ROTATE && d->credential.kind ==
		    TL_DRV_CRED_NONE ? ": its grants have no credential" : "");
	return 0;
}
