/*
 * vec.h - growing an array, the one way tally does it.
 *
 * An array is a pointer (NULL: none yet), a count the caller keeps and
 * a capacity in elements.  tl_vec_grow makes it hold at least need
 * elements of elsize bytes: the capacity doubles (from TL_VEC_MIN), so
 * n appends cost O(n) copies, and it never shrinks.  pp is the address
 * of the array's pointer, of any object pointer type (struct foo **);
 * it is read and written whole, so no cast through void ** is needed.
 *
 * Returns 0, or ENOMEM when need * elsize overflows a size_t or the
 * allocation fails; then *pp and *capp are left as they were and the
 * array is still the caller's to free.  Elements past the old capacity
 * are uninitialised (realloc's); the caller frees *pp with free().
 *
 * tl_vec_grow_secret is the same for an array in guarded memory
 * (core/secret.h: one that embeds passwords): *pp must come from
 * tl_secret_* (or be NULL), the new elements are zeroed, the old block
 * is wiped when it moves, and the caller frees it with tl_secret_free.
 *
 * Neither keeps state: one array must not be grown from two threads at
 * once, as with realloc.
 */
#ifndef TL_VEC_H
#define TL_VEC_H

#include <stddef.h>

#define TL_VEC_MIN	8	/* the first capacity, in elements */

int	tl_vec_grow(void *pp, size_t *capp, size_t need, size_t elsize);
int	tl_vec_grow_secret(void *pp, size_t *capp, size_t need,
	    size_t elsize);

#endif
