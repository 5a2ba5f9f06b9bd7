/*
 * prepare.c - tallyd --prepare (helper.h): what a driver makes or
 * checks at assign, for tally assign, which links no libcrypto.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "core/error.h"
#include "core/secret.h"
#include "drivers/driver.h"
#include "tools/exit.h"
#include "helper.h"

#define IN_MAX		65536
#define GIVEN_MAX	32

static int
refuse(int ex, const char *why)
{
	printf("error %s\n", why);
	return fflush(stdout) == 0 ? ex : TL_EXIT_FAIL;
}

/* One value as hex on a line of its own; secret output is wiped. */
static int
put(const char *kind, const char *name, const char *value)
{
	size_t n = strlen(value), hl = 2 * n + 1;
	char *hex = tl_secret_alloc(hl);
	int ok;

	if (hex == NULL)
		return ENOMEM;
	sodium_bin2hex(hex, hl, (const unsigned char *)value, n);
	ok = printf("%s %s %s\n", kind, name, hex) > 0;
	tl_secret_free(hex);
	return ok ? 0 : EIO;
}

int
tl_tallyd_prepare(const char *driver)
{
	const struct tl_drv_ops *ops = tl_drv_find(driver);
	struct tl_drv_prepared out;
	const char *given[2 * GIVEN_MAX + 1];
	char *in, *line, *save = NULL, mesh[64] = "", why[TL_WHY_MAX] = "";
	size_t len = 0, ng = 0, i;
	ssize_t r;
	int rc, ex = TL_EXIT_OK;

	if (ops == NULL || ops->prepare == NULL) {
		fprintf(stderr, "tallyd: --prepare %s: no driver of that name "
		    "prepares settings\n", driver);
		return TL_EXIT_USAGE;
	}
	/* What it answers may be a private key: for tally assign's pipe. */
	if (isatty(STDOUT_FILENO)) {
		fprintf(stderr, "tallyd: --prepare answers with secrets, for "
		    "tally assign: not written to a terminal\n");
		return TL_EXIT_USAGE;
	}
	if ((in = tl_secret_alloc(IN_MAX + 1)) == NULL)
		return TL_EXIT_FAIL;
	while (len < IN_MAX) {
		r = read(0, in + len, IN_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	in[len] = '\0';
	/*
	 * Decoded in place: a value's hex is twice its bytes, so each
	 * decoded value fits where its hex was.
	 */
	for (line = strtok_r(in, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char *name, *hex, *sp;
		size_t bl;

		if (strncmp(line, "mesh ", 5) == 0) {
			snprintf(mesh, sizeof(mesh), "%s", line + 5);
			continue;
		}
		if (strncmp(line, "set ", 4) != 0 ||
		    (sp = strchr(line + 4, ' ')) == NULL || ng == GIVEN_MAX) {
			ex = refuse(TL_EXIT_USAGE, "--prepare: a line that is "
			    "not \"mesh ID\" or \"set NAME HEX\"");
			goto out;
		}
		name = line + 4;
		*sp = '\0';
		hex = sp + 1;
		if (sodium_hex2bin((unsigned char *)hex, strlen(hex) / 2 + 1,
		    hex, strlen(hex), NULL, &bl, NULL) != 0 ||
		    memchr(hex, '\0', bl) != NULL) {
			ex = refuse(TL_EXIT_USAGE, "--prepare: a value that is "
			    "not hex");
			goto out;
		}
		hex[bl] = '\0';
		given[2 * ng] = name;
		given[2 * ng + 1] = hex;
		ng++;
	}
	given[2 * ng] = NULL;
	memset(&out, 0, sizeof(out));
	if ((rc = ops->prepare(given, mesh, &out, why)) != 0) {
		ex = refuse(rc == ENOMEM ? TL_EXIT_FAIL : TL_EXIT_REFUSED, why);
		goto out;
	}
	for (i = 0; i < out.n; i++)
		if (put(out.secret[i] ? "secret" : "set", out.name[i],
		    out.value[i]) != 0)
			ex = TL_EXIT_FAIL;
	if (out.note[0] != '\0')
		printf("note %s\n", out.note);
	if (fflush(stdout) != 0)
		ex = TL_EXIT_FAIL;
	tl_drv_prepared_free(&out);
out:
	tl_secret_free(in);
	return ex;
}
