/*
 * registry.c - the table of drivers' operations (tallyd's: the
 * declarations are decl.c's).
 *
 * When $TALLY_FAULT is set (tests), every driver found is the fault-
 * injecting wrapper of the real one (drivers/fault.c), made once per
 * driver and kept: the integration tests inject failures into tallyd
 * and the CLI this way.  A bad spec finds no driver at all, so the
 * mistake is visible ("no usable driver") rather than ignored.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/secret.h"
#include "driver.h"

extern const struct tl_drv_ops tl_drv_postgres;
extern const struct tl_drv_ops tl_drv_directory;
extern const struct tl_drv_ops tl_drv_rabbitmq;
extern const struct tl_drv_ops tl_drv_mariadb;
extern const struct tl_drv_ops tl_drv_redis;
extern const struct tl_drv_ops tl_drv_ceph_rgw;
extern const struct tl_drv_ops tl_drv_oidc;
extern const struct tl_drv_ops tl_drv_ca;

static const struct tl_drv_ops *const drivers[] = {
	&tl_drv_postgres,
	&tl_drv_directory,
	&tl_drv_rabbitmq,
	&tl_drv_mariadb,
	&tl_drv_redis,
	&tl_drv_ceph_rgw,
	&tl_drv_oidc,
	&tl_drv_ca,
	NULL
};

/*
 * The wrappers made under $TALLY_FAULT, by driver, once: tallyd's
 * workers find drivers at the same time, and two wrappers of one driver
 * would count its calls twice over (a "first call" rule firing twice).
 */
static const struct tl_drv_ops *wrapped[sizeof(drivers) /
    sizeof(drivers[0])];
static pthread_mutex_t wrapped_lock = PTHREAD_MUTEX_INITIALIZER;

const struct tl_drv_ops *
tl_drv_find(const char *name)
{
	const char *spec;
	size_t i;

	for (i = 0; drivers[i] != NULL; i++) {
		if (strcmp(drivers[i]->decl->name, name) != 0)
			continue;
		spec = getenv("TALLY_FAULT");
		if (spec == NULL || *spec == '\0')
			return drivers[i];
		pthread_mutex_lock(&wrapped_lock);
		if (wrapped[i] == NULL)
			wrapped[i] = tl_drv_fault_wrap(drivers[i]);
		pthread_mutex_unlock(&wrapped_lock);
		return wrapped[i];
	}
	return NULL;
}

const struct tl_drv_ops *
tl_drv_ops_of(const struct tl_drv_decl *d)
{
	return d != NULL ? tl_drv_find(d->name) : NULL;
}

void
tl_drv_prepared_free(struct tl_drv_prepared *p)
{
	size_t i;

	for (i = 0; i < p->n && i < TL_DRV_PREPARED_MAX; i++) {
		if (p->secret[i])
			tl_secret_free(p->value[i]);
		else
			free(p->value[i]);
	}
	memset(p, 0, sizeof(*p));
}
