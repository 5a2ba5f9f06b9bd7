/*
 * provider_words.c - every driver's own words (tl_drv_decl.words), as
 * one extended regular expression, w1|w2|..., for
 * tests/integration/00_provider_words.sh: the check learns them from
 * the drivers' declarations instead of keeping a list of its own.
 */
#include <stdio.h>

#include "drivers/decl.h"

int
main(void)
{
	const char *const *names = tl_drv_names();
	const struct tl_drv_decl *d;
	size_t i, j;
	int n = 0;

	for (i = 0; names[i] != NULL; i++) {
		if ((d = tl_drv_decl_find(names[i])) == NULL)
			return 1;
		for (j = 0; d->words != NULL && d->words[j] != NULL; j++)
			printf("%s%s", n++ ? "|" : "", d->words[j]);
	}
	putchar('\n');
	return n > 0 ? 0 : 1;
}
