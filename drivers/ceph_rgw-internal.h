/*
 * ceph_rgw-internal.h - what drivers/ceph_rgw_decl.c (the declaration:
 * names, compose) gives drivers/ceph_rgw.c (the operations); nothing
 * outside drivers/ includes it.  Pure: libc and libsodium only.
 */
#ifndef TL_DRV_CEPH_RGW_INTERNAL_H
#define TL_DRV_CEPH_RGW_INTERNAL_H

#include "decl.h"

#define RGW_NAME_MAX	63		/* S3 bucket names: 3..63 */
#define RGW_AK_HEX	18

/* The declaration: ceph_rgw_decl.c. */
extern const struct tl_drv_decl tl_drv_ceph_rgw_decl;

/*
 * 1 when s is a name tally makes: 3..RGW_NAME_MAX of [a-z0-9-] (and "_"
 * unless bucket), not starting or ending with "-"; else 0.
 */
int	tl_drv_rgw_name_ok(const char *s, int bucket);

/*
 * The access key of the key pair whose secret is password: "TL" and
 * RGW_AK_HEX hex digits of BLAKE2b(login, password), into out.
 */
void	tl_drv_rgw_access_key(const char *login, const char *password,
	    char out[24]);

#endif /* TL_DRV_CEPH_RGW_INTERNAL_H */
