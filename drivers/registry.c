/*
 * registry.c - the table of drivers.
 */
#include <string.h>

#include "driver.h"

extern const struct tl_drv_ops tl_drv_postgres;

static const struct tl_drv_ops *const drivers[] = {
	&tl_drv_postgres,
	NULL
};

static const char *const names[] = { "postgres", NULL };

const struct tl_drv_ops *
tl_drv_find(const char *name)
{
	size_t i;

	for (i = 0; drivers[i] != NULL; i++)
		if (strcmp(drivers[i]->name, name) == 0)
			return drivers[i];
	return NULL;
}

const char *const *
tl_drv_names(void)
{
	return names;
}
