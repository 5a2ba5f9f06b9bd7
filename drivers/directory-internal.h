/*
 * directory-internal.h - what drivers/directory_decl.c (the
 * declaration: names, compose, settings_check) gives drivers/directory.c
 * (the operations): a grant's directory name and the settings' numbers;
 * nothing outside drivers/ includes it.  Pure: libc and libsodium only.
 */
#ifndef TL_DRV_DIRECTORY_INTERNAL_H
#define TL_DRV_DIRECTORY_INTERNAL_H

#include <stdint.h>

#include "decl.h"

#define DIR_READABLE	40		/* bytes of the grant id kept */
#define DIR_DIGEST_HEX	16
#define DIR_NAME_MAX	(DIR_READABLE + 2 + DIR_DIGEST_HEX)
#define DIR_MESH_HEX	32

/* The declaration: directory_decl.c. */
extern const struct tl_drv_decl tl_drv_directory_decl;

/* A mesh id, or "" (a home made before ids); NULL reads as "". */
int	tl_drv_dir_mesh_valid(const char *m);

/*
 * Whether s may be the name of a directory tally adopt takes over: one
 * component of [A-Za-z0-9._-], not starting with ".", at most
 * DIR_NAME_MAX bytes.
 */
int	tl_drv_dir_adoptable(const char *s);
/* Whether s has the shape of a name tally gives a grant's directory. */
int	tl_drv_dir_shaped(const char *s);

/*
 * The directory a grant's operations act on: the scheme-4 name the
 * reactors derived (g->resource) when it has that shape, or the
 * directory tally adopt took over (g->adopted: g->resource, which must
 * be tl_drv_dir_adoptable), else the name of before, from the grant id.
 * *h64 (may be NULL): where its group's probe starts.  0, or TL_EINVAL
 * for a grant without an id or an adopted name that cannot be one.
 */
int	tl_drv_dir_grant_dir(const struct tl_drv_grant *g,
	    char out[DIR_NAME_MAX + 1], uint64_t *h64);

/*
 * The number of groups setting name holds in sv (dflt when unset or
 * empty): 0, or TL_EINVAL (why) when it is not 1-4294967294.
 */
int	tl_drv_dir_num_setting(const char *const *sv, const char *name,
	    unsigned long long dflt, unsigned long long *out, char *why);

#endif /* TL_DRV_DIRECTORY_INTERNAL_H */
