/*
 * events.h - the names of event types and the streams they go to.
 *
 * Types are noun.past-tense-verb; streams are kind/id.  Body fields are
 * listed beside each type; secrets are always TL_EXT_SECRET values.
 * The catalogue proper (every type with its stream kind, fields, string
 * limits and the folds that take it) is projections/catalogue.c: a
 * type named here and not there cannot be emitted.
 */
#ifndef TL_EVENTS_H
#define TL_EVENTS_H

/*
 * The types a node's agent reads and offers are spelt once, in its wire
 * format (core/nodewire.h): the agent links core/ alone.
 */
#include "core/nodewire.h"

/* node/NAME */
#define TL_EV_NODE_ADDED		TL_NW_NODE_ADDED		/* name routable pubkey [signkey] [cpkey] */
#define TL_EV_NODE_KEY_ADDED	"node.key-added"	/* name [signkey] [cpkey] (tally node rekey) */
/*
 * What a node offered as an acknowledgement (tally-node: appended by
 * the agent itself with --log, by the publisher from tally.acks once
 * the node's signature verifies), and its refusal when its node signed
 * it but it does not verify against the record (reactors/ack.h; what
 * fails authentication is counted in a scratch table, never appended).
 */
#define TL_EV_ACK_OFFERED		TL_NW_ACK_OFFERED /* node grant holder version nonce sig mac */
#define TL_EV_ACK_REFUSED		"security.ack-refused"	/* node grant holder version reason offered */
/*
 * What a node's agent says it runs (tally-node: its version, the
 * versions it holds per grant, the last reload), signed by the node's
 * key; recorded as node.reported once the signature verifies and only
 * when it differs from the latest, which the graph keeps (nr/NODE:
 * u64be ts then the report's JSON).  node.report-offered comes from
 * agents with --log only; security.report-refused is no longer
 * appended (old logs keep theirs).
 */
#define TL_EV_REPORT_OFFERED	TL_NW_REPORT_OFFERED	/* node report(json text) sig */
#define TL_EV_NODE_REPORTED	"node.reported"		/* node report(json text) */
#define TL_EV_REPORT_REFUSED	"security.report-refused" /* node reason offered */
#define TL_EV_NODE_REMOVED		TL_NW_NODE_REMOVED		/* name */
#define TL_EV_NODE_LOST		"node.lost"		/* name */
/* What the node has (tally node report --inventory): graph ni/NODE. */
#define TL_EV_NODE_INVENTORIED	"node.inventoried"	/* node memory cpus disks[{path size}] disk */

/* module/NAME */
#define TL_EV_MODULE_DECLARED	"module.declared"	/* name digest [instances] [parts[]] file env{} provides[] embedded[] */
#define TL_EV_MODULE_REMOVED	"module.removed"	/* name */
/* tally remove without --yes where revoking destroys data: graph rh/NAME. */
#define TL_EV_REMOVAL_HELD	"module.removal-held"	/* module what */
#define TL_EV_REMOVAL_CANCELLED	"module.removal-cancelled"	/* module */
#define TL_EV_REQ_DECLARED		"requirement.declared"	/* module name kind target type scope provider resource env{} migrations max_age [part] [access of] */
#define TL_EV_REQ_WITHDRAWN	"requirement.withdrawn"	/* module name */

/* assignment/MODULE@NODE */
#define TL_EV_ASSIGN_CREATED	"assignment.created"	/* module node expose settings{} secrets{} [parts[]] */
#define TL_EV_ASSIGN_CONFIGURED	"assignment.configured"	/* same */
#define TL_EV_ASSIGN_REMOVED	TL_NW_ASSIGN_REMOVED	/* module node */
#define TL_EV_ASSIGN_READY		"assignment.ready"	/* module node */
/* Settings composed from the node's inventory (decide_derive.h): ad/M@N. */
#define TL_EV_ASSIGN_DERIVED	"assignment.derived"	/* module node inventory settings{} from{} overridden{} refused{} */

/* provider/NODE/MODULE (the id is fixed at registration) */
#define TL_EV_PROVIDER_REGISTERED	"provider.registered"	/* id module node types[{type driver revoke max_age}] */
#define TL_EV_PROVIDER_RETIRED	"provider.retired"	/* id */
#define TL_EV_PROVIDER_UNREACHABLE	"provider.unreachable"	/* id reason kind */
#define TL_EV_PROVIDER_RECOVERED	"provider.recovered"	/* id */
/* provider.moved {id module from to host port}: tally provider move (rebind.h) */

/* binding/MODULE/REQ[@NODE] */
#define TL_EV_BINDING_MADE		"binding.made"		/* grant module req node type provider reason */
#define TL_EV_BINDING_AMBIGUOUS	"binding.ambiguous"	/* grant module req node type candidates[] */
/* binding.moved {grant module req node type provider from reason state}:
 * the switch of tally rebind --migrate, after a verified copy (rebind.h) */

/* grant/MODULE/REQ[@NODE] */
#define TL_EV_GRANT_REQUESTED	"grant.requested"	/* grant module req node scope type provider resource */
/* tally adopt: an object not tally's is the grant's (grants.c: fold_adopt). */
#define TL_EV_GRANT_ADOPTED	"grant.adopted"		/* grant type resource [login] [migrated] [secret(secret)] [password(secret)] */
#define TL_EV_GRANT_PROVISIONING	"grant.provisioning"	/* grant provider version owner user resource naming password(secret) */
#define TL_EV_GRANT_PROVISIONED	"grant.provisioned"	/* grant version fields{} */
#define TL_EV_GRANT_FAILED		"grant.failed"		/* grant reason retry_ns */
#define TL_EV_REVOCATION_REQUESTED	"revocation.requested"	/* grant reason */
#define TL_EV_GRANT_REVOKED	TL_NW_GRANT_REVOKED		/* grant policy */
#define TL_EV_GRANT_DRIFTED	"grant.drifted"		/* grant kind reason message */
#define TL_EV_GRANT_REPAIRED	"grant.repaired"	/* grant kind how */
#define TL_EV_GRANT_MISSING	"grant.missing"		/* grant reason message */
#define TL_EV_REPAIR_REQUESTED	"repair.requested"	/* grant (actor: who asked) */
#define TL_EV_MIGRATION_APPLIED	"migration.applied"	/* grant file checksum */
#define TL_EV_MIGRATION_BLOCKED	"migration.blocked"	/* grant file reason */
#define TL_EV_PURGE_REQUESTED	"purge.requested"	/* grant (actor: who) */
#define TL_EV_GRANT_PURGED		TL_NW_GRANT_PURGED		/* grant */
#define TL_EV_GRANT_LOST		"grant.lost"		/* grant provider node */
#define TL_EV_RESTORE_REQUESTED	"restore.requested"	/* grant */
#define TL_EV_GRANT_RESTORED	"grant.restored"	/* grant version */
#define TL_EV_CRED_DELIVERED	TL_NW_CRED_DELIVERED	/* grant holder node version vars[] sealed(secret) */
/* A holder left a shared grant (a part it no longer installs): its node drops the values. */
#define TL_EV_CRED_WITHDRAWN	TL_NW_CRED_WITHDRAWN	/* grant holder node version */
#define TL_EV_CRED_HANDLE	"credential.handle"	/* grant version handle(secret): a driver-made secret (driver.h handle) */
/*
 * A certificate signed for a holder's request (reactors/issue.c: the
 * request came in its node's signed report), or the request refused:
 * graph ci/GRANT/HOLDER keeps the latest issued, cr/GRANT/HOLDER the
 * latest refused.
 */
#define TL_EV_CERT_ISSUED	TL_NW_CERT_ISSUED	/* grant holder node version serial cn not_after renew_at csr_digest cert ca (the signing provider) */
#define TL_EV_CERT_REFUSED	"certificate.refused"	/* grant holder node version csr_digest reason: graph cr/GRANT/HOLDER */
/*
 * provider/NODE/MODULE: a CA's revocation list (reactors/crl.c), the
 * serials of its revoked grants' certificates not yet expired; graph
 * crl/PROVIDER keeps the latest.
 */
#define TL_EV_CERT_CRL		"certificate.crl"	/* provider number this_update next_update serials[] crl */
/*
 * Also on grant/…, with their bodies beside them: the rotation saga
 * (rotation.h: rotation.*, credential.issued/activated/acknowledged/
 * retired) and the move saga (rebind.h: rebind.started, rebind.issued
 * (intent, password secret), rebind.copied {tables{name: rows}},
 * rebind.failed, rebind.reverted, rebind.completed).
 */

/* module/NAME: a migration file's content, stored once per checksum. */
#define TL_EV_MIGRATION_STORED	"migration.stored"	/* module req file checksum content(bin) */

/* publisher/amqp: where the record is published (tally publish). */
#define TL_EV_PUBLISHER_CONFIGURED	"publisher.configured"	/* url host port vhost user password(secret) exchange format tls ca verify node_queues acks */
#define TL_EV_PUBLISHER_DISABLED	"publisher.disabled"	/* (nothing) */
/* A standby took over (reactors/epoch.c): the epoch it starts. */
#define TL_EV_CP_PROMOTED	"control-plane.promoted"	/* epoch head head_hash(hex) */
/*
 * The mesh's identity (reactors/epoch.h: tl_mesh_get): event 1 of a home
 * tally init made, appended later to a home made before ids.
 */
#define TL_EV_MESH_CREATED	"mesh.created"		/* mesh(hex) */
/*
 * tally adopt: the grants that take over what mesh `from` made, each
 * with the resource name it takes over (projections/grants.c keeps it
 * per grant: tl_grant.adopt_from).
 */
#define TL_EV_MESH_ADOPTED	"mesh.adopted"		/* from(hex) grants[{grant resource}] */
#define TL_PUBLISHER_STREAM	"publisher/amqp"

/* Outage kinds, recorded in provider.unreachable. */
#define TL_PROVIDER_UNREACHABLE	"provider-unreachable"
#define TL_PROVIDER_AUTH_FAILED	"provider-auth-failed"	/* its admin login */
/* Its TLS certificate does not verify (or cannot: no ca): not logged in. */
#define TL_PROVIDER_UNTRUSTED	"provider-untrusted"
/* Up for the admin; its routable name does not resolve where tallyd runs. */
#define TL_PROVIDER_UNRESOLVED	"routable-name-unresolved"

/* Drift kinds, recorded in grant.drifted / grant.repaired. */
#define TL_DRIFTK_CREDENTIAL	"credential-mismatch"
#define TL_DRIFTK_PRIVILEGES	"privileges-changed"
#define TL_DRIFTK_MISSING		"missing-resource"
/*
 * Not drift of the grant: its consumer can still log in without TLS,
 * which only the provider's own configuration can change (the reason
 * says how).  Recorded as the grant's warning, never as its drift: it
 * is not repaired, does not make the grant unhealthy and blocks no
 * migration; grant.repaired of this kind clears the warning alone.
 */
#define TL_DRIFTK_PLAINTEXT	"plaintext-login"

/* Binding reasons, recorded in binding.made. */
#define TL_BIND_EXPLICIT_MANIFEST	"explicit (named in the manifest)"
#define TL_BIND_EXPLICIT_OPERATOR	"explicit (tally bind)"
#define TL_BIND_COLOCATED		"co-located"
#define TL_BIND_ONLY_CANDIDATE	"only candidate in the mesh"
#define TL_BIND_EMPTY		"empty (tally rebind --empty)"

#endif
