/*
 * manifest.h - load and validate module manifests (YAML).
 *
 * A manifest file holds one or more YAML documents ("---"), each
 * declaring one module: the variables it reads (env:), what it
 * needs (requires:), what it grants (provides:) and the private
 * instances it carries (embedded:).  docs/manifest.md is the format
 * reference; every key and every error is described there.
 *
 * Results.  A successful parse returns a tl_mf_set that owns every
 * string and array reachable from it: the plain structs below are
 * borrowed from the set and valid until tl_mf_set_free().  All
 * arrays are sorted by their name-like member (strcmp order), so
 * the same content written in a different key or document order
 * yields equal structs.  The `file` and `line` members are for
 * diagnostics only: tl_mf_module_equal() and tl_mf_req_equal()
 * ignore them.
 *
 * Errors.  Functions return 0 on success, a positive errno value on
 * a system failure (ENOENT, EACCES, ENOMEM, ...), or a negative code
 * from core/error.h: TL_EINVAL for bad arguments, TL_ETOOBIG for an
 * input over TL_MF_MAX_SIZE (one error saying so, with the size, is
 * appended; a file is not read past the limit), TL_EMANIFEST when the
 * manifest is invalid.  Nesting deeper than 16 levels stops the parse
 * at that level (one error; nothing after it is read).  Validation collects every problem it finds (up to
 * TL_MF_ERRORS_MAX per call, the rest are counted in `dropped`) and
 * appends them to the caller's tl_mf_errors, sorted by position.
 * Nothing is appended for system errors, but a system error that
 * interrupts validation leaves what was found before.  On any
 * failure *out is NULL: a set is never half valid.
 *
 * What is not checked here, because it needs the whole graph: that a
 * target module exists, that a requirement does not target another
 * module's embedded instance, that a resource name is not shared
 * with another module.  The data for those checks is in the structs
 * (tl_mf_embedded.name, tl_mf_req.resource).
 */
#ifndef TL_MANIFEST_H
#define TL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#define TL_MF_NAME_MAX		63	/* module, requirement, type, ... */
#define TL_MF_ENV_NAME_MAX	128	/* an environment variable's name */
#define TL_MF_MAX_SIZE		(1024 * 1024)	/* bytes in one manifest */
#define TL_MF_ERRORS_MAX	100	/* errors kept per parse call */
#define TL_MF_MAX_AGE		(36500LL * 86400)	/* 100 years, seconds */

/*
 * One validation problem.  line and col are 1-based; field is the
 * dotted path of the offending key ("requires.db.env.password"),
 * empty for a problem with the document as a whole.  Long values are
 * truncated; control characters from the input are escaped.
 */
struct tl_mf_error {
	char	file[256];
	int	line, col;
	char	field[128];
	char	msg[512];
};

/* Zeroed (TL_MF_ERRORS_INIT) is an empty list; free with tl_mf_errors_free. */
struct tl_mf_errors {
	struct tl_mf_error *v;
	size_t	n, cap;
	size_t	dropped;	/* problems found beyond TL_MF_ERRORS_MAX */
};
#define TL_MF_ERRORS_INIT	{ NULL, 0, 0, 0 }

enum tl_mf_kind {
	TL_MF_PRESENCE = 1,	/* the target must exist and be reachable */
	TL_MF_INSTANTIATION	/* the target must make a resource for us */
};

enum tl_mf_scope {
	TL_MF_SHARED = 0,	/* one resource for every instance (default) */
	TL_MF_PER_INSTANCE	/* one resource per assignment */
};

/* How many instances of a module the mesh may run (instances:). */
enum tl_mf_instances {
	TL_MF_ANY = 0,		/* one per assignment, as many as nodes (default) */
	TL_MF_ONE_PER_MESH,	/* one assignment in the whole mesh */
	TL_MF_ONE_PER_NODE	/* one of its kind on a node (see docs/manifest.md) */
};

enum tl_mf_revoke {
	TL_MF_RETAIN = 0,	/* revocation keeps the data (default) */
	TL_MF_DROP		/* revocation drops the data */
};

/* A variable the module reads; def is "" when it has no default. */
struct tl_mf_var {
	const char *name;
	const char *def;
	int	line;
};

/* A connection field delivered into a declared variable. */
struct tl_mf_map {
	const char *field;	/* host, port, database, user, password, url, vhost, path */
	const char *var;
	int	line;
};

struct tl_mf_req {
	const char *name;
	enum tl_mf_kind kind;
	const char *target;	/* presence: or from: module */
	/* The rest is set only for TL_MF_INSTANTIATION (NULL / 0 otherwise). */
	const char *type;
	enum tl_mf_scope scope;
	const char *provider_node;	/* NULL unless provider: NODE/MODULE */
	const char *provider_module;
	const char *resource;	/* name:, default "MODULE-REQUIREMENT" */
	const struct tl_mf_map *env;	/* sorted by field */
	size_t	nenv;
	const char *migrations;	/* absolute, lexically normalised; NULL if none */
	int64_t	max_credential_age;	/* seconds; 0 = no scheduled rotation */
	/* When a scheduled rotation may start (core/window.h); NULL: any time. */
	const char *rotation_window;
	/*
	 * What the type's driver lets a requirement declare (decl.h,
	 * struct tl_drv_param): name/value pairs, sorted by name,
	 * NULL-terminated, a list's items joined by '\n'; NULL: none.
	 */
	const char *const *params;
	const char *part;	/* part: one of the module's parts; NULL: every part */
	/*
	 * credential: certificate (logins by a certificate of the mesh CA,
	 * the driver's credential.cert_login); NULL: the driver's own.
	 */
	const char *credential;
	/*
	 * access: read or read-write, of: the requirement whose grant owns
	 * the resource (MODULE/REQUIREMENT[@NODE]): a login of this one's
	 * own with that access (decl.h, tl_drv_grant.access); NULL: this
	 * requirement owns its resource.
	 */
	const char *access;
	const char *of;
	int	line;
};

/*
 * A provider setting derived from its node's inventory (provides: TYPE:
 * settings: KEY: {from-node: memory, times: 0.25, unit: MB, min: 128MB}):
 * the source times the factor, clamped, in the unit.  Sizes (memory,
 * disk) are bytes here; cpus a count.
 */
struct tl_mf_derived {
	const char *key;
	const char *from;	/* memory, cpus or disk (the disks' total) */
	const char *times;	/* the factor as written; "1" when absent */
	const char *unit;	/* B, KB, MB, GB, TB for a size; "" for cpus */
	uint64_t min, max;	/* bytes (a size) or a count; 0: no bound */
	int	line;
};

struct tl_mf_provide {
	const char *type;
	const char *driver;	/* one of the drivers passed to the parser */
	enum tl_mf_revoke revoke;
	int64_t	max_credential_age;	/* seconds; 0 = none */
	const char *rotation_window;	/* NULL: any time (window.h) */
	const struct tl_mf_derived *derived;	/* settings:, sorted by key */
	size_t	nderived;
	int	line;
};

/* A private instance the module carries: never a provider. */
struct tl_mf_embedded {
	const char *name;
	const char *type;
	const char *runs;	/* image: or runs:, NULL if not given */
	const struct tl_mf_map *env;	/* sorted by field */
	size_t	nenv;
	int	line;
};

struct tl_mf_module {
	const char *name;
	const char *file;	/* the name given to the parser */
	int	line;		/* where the document's mapping starts */
	enum tl_mf_instances instances;
	const char *const *parts;	/* parts: names, sorted; none declared: 0 */
	size_t	nparts;
	const struct tl_mf_var *env;	/* sorted by name */
	size_t	nenv;
	const struct tl_mf_req *reqs;	/* sorted by name */
	size_t	nreqs;
	const struct tl_mf_provide *provides;	/* sorted by type */
	size_t	nprovides;
	const struct tl_mf_embedded *embedded;	/* sorted by name */
	size_t	nembedded;
};

/* The modules of one parse, sorted by name; opaque because it owns memory. */
struct tl_mf_set;

/*
 * Parse the manifest at path.  drivers is the NULL-terminated list of
 * drivers a provides: entry may name; NULL means none is known (and
 * then every provides: is an error: no empty grants).  Migration
 * paths are resolved against the directory of path.  errs may be
 * NULL to count problems without keeping them.
 */
int	tl_mf_parse_file(const char *path, const char *const *drivers,
	    struct tl_mf_set **out, struct tl_mf_errors *errs);

/*
 * Parse len bytes at buf as if read from a file called name (used in
 * errors and in tl_mf_module.file).  base_dir is the directory
 * migration paths are relative to; NULL or relative is taken from the
 * current directory.
 */
int	tl_mf_parse_buffer(const char *name, const void *buf, size_t len,
	    const char *base_dir, const char *const *drivers,
	    struct tl_mf_set **out, struct tl_mf_errors *errs);

void	tl_mf_set_free(struct tl_mf_set *set);
size_t	tl_mf_set_count(const struct tl_mf_set *set);
/* NULL if i is out of range. */
const struct tl_mf_module *tl_mf_set_module(const struct tl_mf_set *set,
	    size_t i);
/* NULL if the set has no module of that name. */
const struct tl_mf_module *tl_mf_set_find(const struct tl_mf_set *set,
	    const char *name);
/* NULL if the module has no requirement of that name. */
const struct tl_mf_req *tl_mf_module_req(const struct tl_mf_module *m,
	    const char *name);

/* 1 if equal in content (file and line members ignored), else 0. */
int	tl_mf_module_equal(const struct tl_mf_module *a,
	    const struct tl_mf_module *b);
int	tl_mf_req_equal(const struct tl_mf_req *a, const struct tl_mf_req *b);

/* The manifest spelling of an enum value ("per-instance", "drop", ...). */
const char *tl_mf_kind_name(enum tl_mf_kind kind);
const char *tl_mf_scope_name(enum tl_mf_scope scope);
const char *tl_mf_revoke_name(enum tl_mf_revoke revoke);
const char *tl_mf_instances_name(enum tl_mf_instances instances);

/*
 * Format e as "FILE:LINE:COL: FIELD: MESSAGE" ("FIELD: " left out when
 * empty), snprintf-style: returns the length the full text needs, so
 * a result >= size means buf was truncated.
 */
int	tl_mf_error_format(const struct tl_mf_error *e, char *buf,
	    size_t size);

/* Frees the list's storage and leaves it empty; accepts NULL. */
void	tl_mf_errors_free(struct tl_mf_errors *errs);

#endif
