/*
 * amqp_url.c - an AMQP URL into a connection's configuration (amqp.h).
 *
 * Apart from the client (amqp.c) so that a program that only reads URLs
 * (tally publish) takes librabbitmq-c's URL parser alone and no TLS
 * library with it: the GNUmakefile links tally with the library's
 * static archive, from which only this parser's object is taken.
 */
#include <amqp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/amqp.h"

int
tl_amqp_parse_url(const char *url, struct tl_amqp_conf *c)
{
	struct amqp_connection_info ci;
	const char *p;
	char *copy;
	int rc = TL_EINVAL;

	if (url == NULL)
		return TL_EINVAL;
	/* Credentials in a URL end up in shell history and event bodies. */
	p = strstr(url, "://");
	if (p != NULL) {
		const char *end = p + 3 + strcspn(p + 3, "/");
		const char *at = memchr(p + 3, '@', (size_t)(end - (p + 3)));

		if (at != NULL)
			return TL_EINVAL;
	}
	if ((copy = strdup(url)) == NULL)
		return ENOMEM;
	amqp_default_connection_info(&ci);
	if (amqp_parse_url(copy, &ci) == AMQP_STATUS_OK &&
	    strlen(ci.host) < sizeof(c->host) &&
	    strlen(ci.vhost) < sizeof(c->vhost) && ci.host[0] != '\0') {
		snprintf(c->host, sizeof(c->host), "%s", ci.host);
		snprintf(c->vhost, sizeof(c->vhost), "%s", ci.vhost);
		c->port = ci.port;
		c->tls = ci.ssl ? 1 : c->tls;
		rc = 0;
	}
	free(copy);
	return rc;
}
