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

/* node/NAME */
#define EV_NODE_ADDED		"node.added"		/* name routable pubkey [signkey] */
#define EV_NODE_KEY_ADDED	"node.key-added"	/* name signkey (tally node rekey) */
/*
 * What a node offered as an acknowledgement (tally-node: appended by
 * the agent itself with --log, by the publisher from tally.acks), and
 * its refusal when it did not verify (reactors/ack.h).
 */
#define EV_ACK_OFFERED		"credential.ack-offered" /* node grant holder version nonce sig mac */
#define EV_ACK_REFUSED		"security.ack-refused"	/* node grant holder version reason offered */
/*
 * What a node's agent says it runs (tally-node: its version, the
 * versions it holds per grant, the last reload), signed by the node's
 * key; recorded as node.reported once the signature verifies (the
 * graph keeps the latest, nr/NODE: u64be ts then the report's JSON).
 */
#define EV_REPORT_OFFERED	"node.report-offered"	/* node report(json text) sig */
#define EV_NODE_REPORTED	"node.reported"		/* node report(json text) */
#define EV_REPORT_REFUSED	"security.report-refused" /* node reason offered */
#define EV_NODE_REMOVED		"node.removed"		/* name */

/* module/NAME */
#define EV_MODULE_DECLARED	"module.declared"	/* name digest file env{} provides[] embedded[] */
#define EV_MODULE_REMOVED	"module.removed"	/* name */
#define EV_REQ_DECLARED		"requirement.declared"	/* module name kind target type scope provider resource env{} migrations max_age */
#define EV_REQ_WITHDRAWN	"requirement.withdrawn"	/* module name */

/* assignment/MODULE@NODE */
#define EV_ASSIGN_CREATED	"assignment.created"	/* module node expose settings{} secrets{} */
#define EV_ASSIGN_CONFIGURED	"assignment.configured"	/* same */
#define EV_ASSIGN_REMOVED	"assignment.removed"	/* module node */
#define EV_ASSIGN_READY		"assignment.ready"	/* module node */

/* provider/NODE/MODULE (the id is fixed at registration) */
#define EV_PROVIDER_REGISTERED	"provider.registered"	/* id module node types[{type driver revoke max_age}] */
#define EV_PROVIDER_RETIRED	"provider.retired"	/* id */
#define EV_PROVIDER_UNREACHABLE	"provider.unreachable"	/* id reason kind */
#define EV_PROVIDER_RECOVERED	"provider.recovered"	/* id */
/* provider.moved {id module from to host port}: tally provider move (rebind.h) */

/* binding/MODULE/REQ[@NODE] */
#define EV_BINDING_MADE		"binding.made"		/* grant module req node type provider reason */
#define EV_BINDING_AMBIGUOUS	"binding.ambiguous"	/* grant module req node type candidates[] */
/* binding.moved {grant module req node type provider from reason state}:
 * the switch of tally rebind --migrate, after a verified copy (rebind.h) */

/* grant/MODULE/REQ[@NODE] */
#define EV_GRANT_REQUESTED	"grant.requested"	/* grant module req node scope type provider resource */
#define EV_GRANT_PROVISIONING	"grant.provisioning"	/* grant provider version owner user resource naming password(secret) */
#define EV_GRANT_PROVISIONED	"grant.provisioned"	/* grant version fields{} */
#define EV_GRANT_FAILED		"grant.failed"		/* grant reason retry_ns */
#define EV_REVOCATION_REQUESTED	"revocation.requested"	/* grant reason */
#define EV_GRANT_REVOKED	"grant.revoked"		/* grant policy */
#define EV_GRANT_DRIFTED	"grant.drifted"		/* grant kind reason message */
#define EV_GRANT_REPAIRED	"grant.repaired"	/* grant kind how */
#define EV_GRANT_MISSING	"grant.missing"		/* grant reason message */
#define EV_REPAIR_REQUESTED	"repair.requested"	/* grant (actor: who asked) */
#define EV_MIGRATION_APPLIED	"migration.applied"	/* grant file checksum */
#define EV_MIGRATION_BLOCKED	"migration.blocked"	/* grant file reason */
#define EV_PURGE_REQUESTED	"purge.requested"	/* grant (actor: who) */
#define EV_GRANT_PURGED		"grant.purged"		/* grant */
#define EV_RESTORE_REQUESTED	"restore.requested"	/* grant */
#define EV_GRANT_RESTORED	"grant.restored"	/* grant version */
#define EV_CRED_DELIVERED	"credential.delivered"	/* grant holder node version vars[] sealed(secret) */
/*
 * Also on grant/…, with their bodies beside them: the rotation saga
 * (rotation.h: rotation.*, credential.issued/activated/acknowledged/
 * retired) and the move saga (rebind.h: rebind.started, rebind.issued
 * (intent, password secret), rebind.copied {tables{name: rows}},
 * rebind.failed, rebind.reverted, rebind.completed).
 */

/* module/NAME: a migration file's content, stored once per checksum. */
#define EV_MIGRATION_STORED	"migration.stored"	/* module req file checksum content(bin) */

/* publisher/amqp: where the record is published (tally publish). */
#define EV_PUBLISHER_CONFIGURED	"publisher.configured"	/* url host port vhost user password(secret) exchange format tls ca verify node_queues acks */
#define EV_PUBLISHER_DISABLED	"publisher.disabled"	/* (nothing) */
#define PUBLISHER_STREAM	"publisher/amqp"

/* Outage kinds, recorded in provider.unreachable. */
#define PROVIDER_UNREACHABLE	"provider-unreachable"
#define PROVIDER_AUTH_FAILED	"provider-auth-failed"	/* its admin login */

/* Drift kinds, recorded in grant.drifted / grant.repaired. */
#define DRIFT_CREDENTIAL	"credential-mismatch"
#define DRIFT_PRIVILEGES	"privileges-changed"
#define DRIFT_MISSING		"missing-resource"

/* Binding reasons, recorded in binding.made. */
#define BIND_EXPLICIT_MANIFEST	"explicit (named in the manifest)"
#define BIND_EXPLICIT_OPERATOR	"explicit (tally bind)"
#define BIND_COLOCATED		"co-located"
#define BIND_ONLY_CANDIDATE	"only candidate in the mesh"

#endif
