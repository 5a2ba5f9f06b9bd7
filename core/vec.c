/*
 * vec.c - growing an array (vec.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "secret.h"
#include "vec.h"

/* The capacity for need: doubled from *capp, at least TL_VEC_MIN. */
static int
next_cap(size_t cap, size_t need, size_t elsize, size_t *out)
{
	size_t c;

	if (elsize == 0 || need > SIZE_MAX / elsize)
		return ENOMEM;
	c = cap < TL_VEC_MIN ? TL_VEC_MIN : cap;
	while (c < need)
		c = c > SIZE_MAX / 2 ? need : c * 2;
	/* A doubling past what a size_t can count settles for need. */
	if (c > SIZE_MAX / elsize)
		c = need;
	*out = c;
	return 0;
}

static int
grow(void *pp, size_t *capp, size_t need, size_t elsize, int secret)
{
	void *p, *np;
	size_t cap;
	int rc;

	if (need <= *capp)
		return 0;
	if ((rc = next_cap(*capp, need, elsize, &cap)) != 0)
		return rc;
	memcpy(&p, pp, sizeof(p));
	np = secret ? tl_secret_realloc(p, cap * elsize) :
	    realloc(p, cap * elsize);
	if (np == NULL)
		return ENOMEM;
	memcpy(pp, &np, sizeof(np));
	*capp = cap;
	return 0;
}

int
tl_vec_grow(void *pp, size_t *capp, size_t need, size_t elsize)
{
	return grow(pp, capp, need, elsize, 0);
}

int
tl_vec_grow_secret(void *pp, size_t *capp, size_t need, size_t elsize)
{
	return grow(pp, capp, need, elsize, 1);
}
