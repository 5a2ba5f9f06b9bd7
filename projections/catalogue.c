/*
 * catalogue.c - the event catalogue: the one table of every type tally
 * appends (catalogue.h says who reads it and what for).
 *
 * A limit is the size of the buffer the value is kept in, less its NUL:
 * the field of struct tl_grant, tl_rotation, tl_rebind or the graph's
 * readers (tl_rx_load_provider: a routable name, an exposure).  When a
 * buffer grows, its limit here grows with it; a limit smaller than its
 * buffer only refuses more.
 */
#include <string.h>

#include "core/error.h"
#include "catalogue.h"
#include "events.h"
#include "grant.h"
#include "rebind.h"
#include "rotation.h"

#define E(m)	m, #m
#define GR	TL_FOLD_GRAPH
#define GN	TL_FOLD_GRANTS
#define RO	TL_FOLD_ROTATION
#define RB	TL_FOLD_REBIND
#define CE	TL_FOLD_CERTS

/* Limits used again and again. */
#define NAME	63		/* a node, module, requirement, type */
#define PROV	129		/* a provider id: NODE/MODULE */
#define GRANT	TL_GRANT_ID_MAX
#define HOLDER	139		/* MODULE@NODE */
#define REASON	511		/* a driver's why (TL_WHY_MAX - 1) */

static const struct tl_cat_event cat[] = {
	/* node/NAME */
	{ E(TL_EV_NODE_ADDED), "node", "name routable pubkey [signkey] [cpkey]", GR, NULL,
	  { { "name", NAME }, { "routable", 255 } } },
	{ E(TL_EV_NODE_REMOVED), "node", "name", GR, NULL,
	  { { "name", NAME } } },
	{ E(TL_EV_NODE_LOST), "node", "name", GR, NULL,
	  { { "name", NAME } } },
	{ E(TL_EV_NODE_INVENTORIED), "node", "node memory cpus disks[{path size}] "
	  "disk", GR, NULL, { { "node", NAME }, { "disks[].path", 255 } } },
	{ E(TL_EV_NODE_KEY_ADDED), "node", "name [signkey(bin)] [cpkey(bin)]", GR, NULL,
	  { { "name", NAME } } },
	{ E(TL_EV_NODE_REPORTED), "node", "node report(json text)", GR, NULL,
	  { { "node", NAME } } },
	{ E(TL_EV_REPORT_OFFERED), "node", "node report(json text) sig via", 0,
	  "a node's claim: the ack pass (reactors/ack.c) checks its "
	  "signature and records node.reported when the report changed",
	  { { "node", NAME } } },
	{ E(TL_EV_REPORT_REFUSED), "node", "node reason offered", GR,
	  NULL, { { "node", NAME }, { "reason", REASON } } },
	{ E(TL_EV_ACK_OFFERED), "node", "node grant holder version nonce sig mac "
	  "via", 0, "a node's claim: the ack pass (reactors/ack.c) checks "
	  "its signature and proof and records credential.acknowledged or "
	  "security.ack-refused",
	  { { "node", NAME }, { "grant", GRANT }, { "holder", HOLDER } } },
	{ E(TL_EV_ACK_REFUSED), "node", "node grant holder version reason "
	  "offered", GR, NULL,
	  { { "node", NAME }, { "grant", GRANT }, { "holder", HOLDER },
	    { "reason", REASON } } },
	/* module/NAME */
	{ E(TL_EV_MODULE_DECLARED), "module",
	  "name digest instances parts[] file env{} provides[{type driver "
	  "revoke max_age [window] [settings{KEY:{from times unit min max}}]}] "
	  "embedded[{name type runs env{}}]", GR | GN, NULL, { { "name", NAME }, { "instances", 15 }, { "parts[]", NAME } } },
	{ E(TL_EV_MODULE_REMOVED), "module", "name", GR, NULL,
	  { { "name", NAME } } },
	{ E(TL_EV_REMOVAL_HELD), "module", "module what", GR, NULL,
	  { { "module", NAME }, { "what", 1023 } } },
	{ E(TL_EV_REMOVAL_CANCELLED), "module", "module", GR, NULL,
	  { { "module", NAME } } },
	{ E(TL_EV_REQ_DECLARED), "module", "module name kind target type scope "
	  "provider resource env{} migrations max_age [part] [window] "
	  "[params{}] [credential] [access of]", GR | GN,
	  NULL,
	  { { "module", NAME }, { "name", NAME }, { "kind", 15 },
	    { "target", NAME }, { "type", NAME }, { "scope", 15 },
	    { "resource", NAME }, { "part", NAME }, { "window", 128 },
	    { "credential", 15 }, { "access", 15 }, { "of", GRANT } } },
	{ E(TL_EV_REQ_WITHDRAWN), "module", "module name", GR | GN, NULL,
	  { { "module", NAME }, { "name", NAME } } },
	{ E(TL_EV_MIGRATION_STORED), "module", "module req file checksum "
	  "content(bin)", GR | GN, NULL,
	  { { "module", NAME }, { "checksum", 79 } } },
	/* assignment/MODULE@NODE */
	{ E(TL_EV_ASSIGN_CREATED), "assignment", "module node expose settings{} "
	  "secrets{} [parts[]]", GR | GN, NULL,
	  { { "module", NAME }, { "node", NAME }, { "expose", 15 },
	    { "parts[]", NAME } } },
	{ E(TL_EV_ASSIGN_CONFIGURED), "assignment", "module node expose "
	  "settings{} secrets{} [parts[]]", GR | GN, NULL,
	  { { "module", NAME }, { "node", NAME }, { "expose", 15 },
	    { "parts[]", NAME } } },
	{ E(TL_EV_ASSIGN_REMOVED), "assignment", "module node", GR | GN | RB, NULL,
	  { { "module", NAME }, { "node", NAME } } },
	{ E(TL_EV_ASSIGN_READY), "assignment", "module node", GR | GN, NULL,
	  { { "module", NAME }, { "node", NAME } } },
	{ E(TL_EV_ASSIGN_DERIVED), "assignment", "module node inventory "
	  "settings{} from{} overridden{} refused{}", GR, NULL,
	  { { "module", NAME }, { "node", NAME } } },
	/* provider/NODE/MODULE */
	{ E(TL_EV_PROVIDER_REGISTERED), "provider", "id module node "
	  "types[{type driver revoke max_age [window]}]", GR | GN, NULL,
	  { { "id", PROV }, { "module", NAME }, { "node", NAME },
	    { "types[].type", NAME }, { "types[].driver", NAME },
	    { "types[].revoke", 15 }, { "types[].window", 128 } } },
	{ E(TL_EV_CERT_CRL), "provider", "provider number this_update "
	  "next_update serials[] crl", CE, NULL,
	  { { "provider", PROV }, { "serials[]", 64 },
	    { "crl", TL_BODY_MAX / 2 } } },
	{ E(TL_EV_PROVIDER_RETIRED), "provider", "id", GR | GN, NULL,
	  { { "id", PROV } } },
	{ E(TL_EV_PROVIDER_UNREACHABLE), "provider", "id reason kind", GR, NULL,
	  { { "id", PROV } } },
	{ E(TL_EV_PROVIDER_RECOVERED), "provider", "id", GR, NULL,
	  { { "id", PROV } } },
	{ E(TL_EV_PROVIDER_MOVED), "provider", "id module from to host port",
	  GR | RB, NULL,
	  { { "id", PROV }, { "module", NAME }, { "from", NAME },
	    { "to", NAME }, { "host", 255 }, { "port", 7 } } },
	/* binding/GRANT */
	{ E(TL_EV_BINDING_MADE), "binding", "grant module req node type provider "
	  "reason", GR | GN, NULL,
	  { { "grant", GRANT }, { "type", NAME }, { "state", 15 },
	    { "provider", PROV } } },
	{ E(TL_EV_BINDING_AMBIGUOUS), "binding", "grant module req node type "
	  "candidates[]", GR, NULL,
	  { { "grant", GRANT }, { "type", NAME }, { "state", 15 } } },
	{ E(TL_EV_BINDING_MOVED), "binding", "grant module req node type provider "
	  "from reason state", GR | RB, NULL,
	  { { "grant", GRANT }, { "type", NAME }, { "state", 15 },
	    { "provider", PROV } } },
	/* grant/GRANT */
	{ E(TL_EV_GRANT_REQUESTED), "grant", "grant module req node scope type "
	  "provider resource", GN, NULL,
	  { { "grant", GRANT }, { "module", NAME }, { "req", NAME },
	    { "node", NAME }, { "scope", 15 }, { "type", NAME },
	    { "provider", PROV }, { "resource", NAME } } },
	{ E(TL_EV_GRANT_PROVISIONING), "grant", "grant provider version owner "
	  "user resource naming password(secret)", GN | RO, NULL,
	  { { "grant", GRANT }, { "provider", PROV }, { "user", NAME } } },
	/* fields: the driver's connection fields that are not secret. */
	/* holders: what tally adopt --password-stdin's password found. */
	{ E(TL_EV_GRANT_PROVISIONED), "grant", "grant version fields{...} "
	  "[holders holders_why]", GN, NULL,
	  { { "grant", GRANT }, { "fields.host", 255 }, { "fields.port", 7 },
	    { "fields." TL_GRANT_OBJECT_KEY, NAME }, { "fields.user", NAME },
	    { "fields.path", 511 }, { "holders", 15 },
	    { "holders_why", REASON } } },
	{ E(TL_EV_GRANT_FAILED), "grant", "grant reason op retry_ns", GN, NULL,
	  { { "grant", GRANT }, { "reason", REASON }, { "op", 15 } } },
	{ E(TL_EV_REVOCATION_REQUESTED), "grant", "grant reason", GN | CE, NULL,
	  { { "grant", GRANT }, { "reason", REASON } } },
	{ E(TL_EV_GRANT_REVOKED), "grant", "grant policy size", GN | CE, NULL,
	  { { "grant", GRANT }, { "policy", 7 } } },
	{ E(TL_EV_GRANT_DRIFTED), "grant", "grant kind reason message", GN, NULL,
	  { { "grant", GRANT }, { "kind", 31 }, { "reason", REASON } } },
	{ E(TL_EV_GRANT_REPAIRED), "grant", "grant kind how", GN, NULL,
	  { { "grant", GRANT } } },
	{ E(TL_EV_GRANT_MISSING), "grant", "grant reason message", GN, NULL,
	  { { "grant", GRANT }, { "reason", REASON } } },
	{ E(TL_EV_GRANT_ADOPTED), "grant", "grant type resource [login] "
	  "[migrated] [secret(secret)] [password(secret)]", GN, NULL, { { "grant", GRANT }, { "type", NAME },
	  { "resource", NAME }, { "login", NAME }, { "migrated", NAME } } },
	{ E(TL_EV_REPAIR_REQUESTED), "grant", "grant (actor: who asked)", GN,
	  NULL, { { "grant", GRANT } } },
	{ E(TL_EV_MIGRATION_APPLIED), "grant", "grant file checksum", GN, NULL,
	  { { "grant", GRANT }, { "file", NAME }, { "checksum", 79 } } },
	{ E(TL_EV_MIGRATION_BLOCKED), "grant", "grant file reason", GN, NULL,
	  { { "grant", GRANT }, { "reason", 1023 } } },
	{ E(TL_EV_PURGE_REQUESTED), "grant", "grant (actor: who)", GN, NULL,
	  { { "grant", GRANT } } },
	{ E(TL_EV_GRANT_PURGED), "grant", "grant", GN | CE, NULL,
	  { { "grant", GRANT } } },
	{ E(TL_EV_GRANT_LOST), "grant", "grant provider node", GN, NULL,
	  { { "grant", GRANT }, { "provider", PROV }, { "node", NAME } } },
	{ E(TL_EV_RESTORE_REQUESTED), "grant", "grant", GN, NULL,
	  { { "grant", GRANT } } },
	{ E(TL_EV_GRANT_RESTORED), "grant", "grant version", GN, NULL,
	  { { "grant", GRANT } } },
	{ E(TL_EV_CRED_DELIVERED), "grant", "grant holder node version "
	  "sealed(secret)", GN, NULL,
	  { { "grant", GRANT }, { "holder", HOLDER } } },
	{ E(TL_EV_CRED_WITHDRAWN), "grant", "grant holder node version", GN,
	  NULL, { { "grant", GRANT }, { "holder", HOLDER }, { "node", NAME } } },
	{ E(TL_EV_CERT_ISSUED), "grant", "grant holder node version serial "
	  "cn not_after renew_at csr_digest cert [ca]", GR | CE | RO, NULL,
	  { { "grant", GRANT }, { "holder", HOLDER }, { "node", NAME },
	    { "serial", 64 }, { "cn", 64 }, { "csr_digest", 64 },
	    { "cert", 16384 }, { "ca", PROV } } },
	{ E(TL_EV_CERT_REFUSED), "grant", "grant holder node version "
	  "csr_digest reason", GR, NULL,
	  { { "grant", GRANT }, { "holder", HOLDER }, { "node", NAME },
	    { "csr_digest", 64 }, { "reason", REASON } } },
	{ E(TL_EV_CRED_HANDLE), "grant", "grant version handle(secret)", 0,
	  "read by the reactors from the grant's stream (credential.c), "
	  "never folded: a secret the provider chose", { { "grant", GRANT } } },
	/* grant/GRANT: the rotation saga (rotation.h) */
	{ E(TL_EV_ROT_STARTED), "grant", "grant from to deadline_ns reason", RO,
	  NULL, { { "grant", GRANT }, { "reason", 31 } } },
	{ E(TL_EV_CRED_ISSUED), "grant", "grant version user password(secret)",
	  RO, NULL, { { "grant", GRANT } } },
	{ E(TL_EV_CRED_ACTIVATED), "grant", "grant version user", RO, NULL,
	  { { "grant", GRANT }, { "user", NAME } } },
	{ E(TL_EV_CRED_ACKED), "grant", "grant holder version proof", RO | GR, NULL,
	  { { "grant", GRANT }, { "holder", HOLDER } } },
	{ E(TL_EV_CRED_RETIRED), "grant", "grant version user forced "
	  "[sessions_ended] cut_off[] reason", RO, NULL, { { "grant", GRANT }, { "cut_off[]", HOLDER } } },
	{ E(TL_EV_ROT_COMPLETED), "grant", "grant version", RO, NULL,
	  { { "grant", GRANT } } },
	{ E(TL_EV_ROT_ABANDONED), "grant", "grant from to reason", RO, NULL,
	  { { "grant", GRANT } } },
	/* provider/ID: the admin credential's rotation (rotation.h) */
	{ E(TL_EV_ADM_STARTED), "provider", "id", RO, NULL,
	  { { "id", HOLDER } } },
	{ E(TL_EV_ADM_ISSUED), "provider", "id password(secret)", RO, NULL,
	  { { "id", HOLDER } } },
	{ E(TL_EV_ADM_COMPLETED), "provider", "id", RO, NULL,
	  { { "id", HOLDER } } },
	/* grant/GRANT: the move saga (rebind.h) */
	{ E(TL_EV_REBIND_STARTED), "grant", "grant from to version old_version "
	  "[consolidate from_host from_port from_resource from_user]", RB, NULL,
	  { { "grant", GRANT }, { "from", PROV }, { "to", PROV },
	    { "consolidate", NAME }, { "from_host", 255 }, { "from_port", 7 },
	    { "from_resource", NAME }, { "from_user", NAME } } },
	{ E(TL_EV_REBIND_ISSUED), "grant", "grant version resource owner user "
	  "from_resource from_owner from_user password(secret)", RB, NULL,
	  { { "grant", GRANT }, { "resource", NAME }, { "owner", NAME },
	    { "user", NAME }, { "from_resource", NAME },
	    { "from_owner", NAME }, { "from_user", NAME } } },
	{ E(TL_EV_REBIND_COPIED), "grant", "grant tables{name: rows} host port",
	  RB, NULL,
	  { { "grant", GRANT }, { "host", 255 }, { "port", 7 } } },
	{ E(TL_EV_REBIND_FAILED), "grant", "grant step reason", RB, NULL,
	  { { "grant", GRANT }, { "step", 15 }, { "reason", REASON } } },
	{ E(TL_EV_REBIND_REVERTED), "grant", "grant cleanup", RB, NULL,
	  { { "grant", GRANT } } },
	{ E(TL_EV_REBIND_COMPLETED), "grant", "grant", RB, NULL,
	  { { "grant", GRANT } } },
	/* publisher/amqp */
	{ E(TL_EV_PUBLISHER_CONFIGURED), "publisher", "url host port vhost user "
	  "password(secret) exchange format tls ca verify node_queues acks "
	  "[stream]",
	  0, "the publisher reads the last configuration from the log "
	  "itself (reactors/publish.c): no projection keeps it",
	  { { NULL, 0 } } },
	{ E(TL_EV_PUBLISHER_DISABLED), "publisher", "(nothing)", 0,
	  "as publisher.configured: read from the log by the publisher",
	  { { NULL, 0 } } },
	/* control-plane */
	{ E(TL_EV_CP_PROMOTED), "control-plane", "epoch head head_hash(hex) "
	  "[by]",
	  0, "read from the log by reactors/epoch.c, which finds the epoch "
	  "in force: no fold keeps it", { { NULL, 0 } } },
	{ E(TL_EV_MESH_CREATED), "control-plane", "mesh(hex)", 0,
	  "read from the log by reactors/epoch.c (tl_mesh_get): event 1 of "
	  "a new home, no fold keeps it", { { "mesh", 32 } } },
	{ E(TL_EV_MESH_ADOPTED), "control-plane", "from(hex) grants[{grant "
	  "resource [owner login]}]", GN, NULL, { { "from", 32 },
	  { "grants[].grant", GRANT }, { "grants[].resource", NAME },
	  { "grants[].owner", NAME }, { "grants[].login", NAME } } },
};

#define NCAT	(sizeof(cat) / sizeof(cat[0]))

size_t
tl_cat_count(void)
{
	return NCAT;
}

const struct tl_cat_event *
tl_cat_at(size_t i)
{
	return i < NCAT ? &cat[i] : NULL;
}

const struct tl_cat_event *
tl_cat_find(const char *type)
{
	size_t i;

	/* About fifty entries, compared from their second byte on. */
	for (i = 0; i < NCAT; i++)
		if (cat[i].type[0] == type[0] && strcmp(cat[i].type, type) == 0)
			return &cat[i];
	return NULL;
}

const struct tl_cat_event *
tl_cat_by_macro(const char *name)
{
	size_t i;

	for (i = 0; i < NCAT; i++)
		if (strcmp(cat[i].macro, name) == 0)
			return &cat[i];
	return NULL;
}

/* Is node n (a string) within max?  Non-strings are the fold's call. */
static int
fits(struct tl_bnode n, size_t max, size_t *len)
{
	const char *s;
	size_t sl;

	if (tl_bn_str(n, &s, &sl) != 0)
		return 1;
	*len = sl;
	return sl <= max;
}

int
tl_cat_check(const struct tl_cat_event *e, struct tl_bnode body,
    const char **field, size_t *max, size_t *len)
{
	const char *plain[TL_CAT_FIELDS_MAX];
	const struct tl_cat_field *pf[TL_CAT_FIELDS_MAX];
	struct tl_bnode got_n[TL_CAT_FIELDS_MAX];
	size_t i, k, np = 0;

	/* The top-level fields in one walk of the body. */
	for (i = 0; i < TL_CAT_FIELDS_MAX && e->limits[i].name != NULL; i++)
		if (strpbrk(e->limits[i].name, "[.") == NULL) {
			pf[np] = &e->limits[i];
			plain[np++] = e->limits[i].name;
		}
	if (np > 0 && tl_bn_pick(body, plain, np, got_n) == 0)
		for (i = 0; i < np; i++) {
			size_t got = 0;

			if (got_n[i].p != NULL && !fits(got_n[i], pf[i]->max,
			    &got)) {
				*field = pf[i]->name;
				*max = pf[i]->max;
				*len = got;
				return TL_ETOOBIG;
			}
		}
	for (i = 0; i < TL_CAT_FIELDS_MAX && e->limits[i].name != NULL; i++) {
		const struct tl_cat_field *f = &e->limits[i];
		const char *arr = strstr(f->name, "[]");
		const char *dot = strchr(f->name, '.');
		char outer[32];
		struct tl_bnode n, m;
		size_t ol, got = 0;
		int ok = 1;

		if (arr == NULL && dot == NULL)
			continue;	/* above */
		ol = (size_t)((arr != NULL ? arr : dot) - f->name);
		if (ol >= sizeof(outer))
			continue;
		memcpy(outer, f->name, ol);
		outer[ol] = '\0';
		if (tl_bn_get(body, outer, &m) != 0)
			continue;
		if (arr == NULL) {
			/* "map.key" */
			if (tl_bn_get(m, dot + 1, &n) == 0)
				ok = fits(n, f->max, &got);
		} else
			/* "arr[]" (strings) or "arr[].key" (maps) */
			for (k = 0; ok && k < tl_bn_len(m); k++) {
				n = tl_bn_at(m, k);
				if (arr[2] == '.' && tl_bn_get(n, arr + 3,
				    &n) != 0)
					continue;
				ok = fits(n, f->max, &got);
			}
		if (!ok) {
			*field = f->name;
			*max = f->max;
			*len = got;
			return TL_ETOOBIG;
		}
	}
	return 0;
}
