/*
 * node-internal.h - tally-node's pieces, one concern per file.
 *
 * files.c: every file the agent writes, through directory descriptors
 * it holds.  The agent runs as root and writes into directories a
 * module's user reads, so nothing below DIR is opened by path, no link
 * is followed, and no existing file is written through:
 *   - a directory is opened O_DIRECTORY|O_NOFOLLOW and checked with
 *     fstat;
 *   - a file is created under an unpredictable name (".tn-" and 16 hex
 *     digits from libsodium) with O_CREAT|O_EXCL|O_NOFOLLOW, owned and
 *     moded through its descriptor (fchown, fchmod), written, fsynced,
 *     then renamed over its name (renameat): whatever stood there (a
 *     symlink, a hard link to another file) is replaced, never
 *     followed;
 *   - a file is removed with unlinkat on the held descriptor.
 * Every function returns 0 or an errno (TL_* for what core/error.h
 * names); no function keeps a descriptor it was given.
 */
#ifndef TN_NODE_INTERNAL_H
#define TN_NODE_INTERNAL_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * Who owns a module's files: uid -1 for the agent itself (root:root;
 * directory 0700, files 0600); else USER:GROUP (the user's primary
 * group) with the directory root:GROUP 0750 and the files 0400.
 */
struct tn_owner {
	uid_t	uid;
	gid_t	gid;
};
#define TN_OWNER_SELF	{ (uid_t)-1, (gid_t)-1 }

/*
 * Opens (creating it, mode, when absent) the top directory path: the
 * one thing opened by path.  Refused (TL_EINVAL, the reason in why,
 * TL_WHY_MAX bytes) when it is not a directory, is a symlink, is not owned by
 * the agent's uid or is writable by group or others: someone else
 * could already have put something in it.  search: others must be able
 * to traverse it (a module's user reads its files below it): the x
 * bits are added (fchmod) when missing.  *fd is the caller's to close.
 */
int	tn_dir_top(const char *path, mode_t mode, int search, int *fd,
	    char *why);

/*
 * DIR/NAME as a module's directory, owned as o says (root:GROUP 0750,
 * or root 0700): created when absent; a symlink or anything else not a
 * directory at NAME is removed first (unlinkat: the link, never its
 * target); an existing directory's owner and mode are set on its
 * descriptor (only the agent can have made it: DIR is its own).
 */
int	tn_dir_module(int dirfd, const char *name, const struct tn_owner *o,
	    int *fd);
/* DIR/NAME, a private directory of the agent's (root 0700), the same. */
int	tn_dir_private(int dirfd, const char *name, int *fd);

/*
 * Writes len bytes as dirfd/name (see above), owner o (NULL: the
 * agent's, mode 0600; else o's, mode 0400).
 */
int	tn_file_put(int dirfd, const char *name, const void *data, size_t len,
	    const struct tn_owner *o);
/* Removes dirfd/name (not a directory); ENOENT is success. */
int	tn_file_del(int dirfd, const char *name);
/*
 * Removes dirfd/name: a directory with the entries in it (one level:
 * the agent makes no deeper ones), or whatever else is at that name.
 * Sets *n to the files removed.  ENOENT is success.
 */
int	tn_dir_del(int dirfd, const char *name, int *n);
/*
 * Opens dirfd/name for reading: a regular file with one link, not a
 * symlink (TL_EINVAL otherwise; ENOENT when absent).  The FILE is the
 * caller's to fclose.
 */
int	tn_file_open(int dirfd, const char *name, FILE **fp);
/* An opendir of dirfd (a descriptor of its own, rewound). */
int	tn_dir_list(int dirfd, DIR **dir);

/* A name the agent may give a file of its own: no '/', not "." or "..". */
int	tn_name_ok(const char *name);

/*
 * certs.c: a certificate grant's key, request and certificate, in the
 * state directory statefd, named by gf (the grant as its .state file's
 * name) and version.  why: TL_WHY_MAX bytes.
 *
 * tn_cert_prepare: the key kr asks for (made now when there is none)
 * and, unless a certificate for it is kept (*have_cert 1), a signing
 * request of exactly kr's cn and sans (kept: asked once per version).
 * tn_cert_csr: that request (malloc'd), ENOENT when none waits.
 * tn_cert_take: keeps cert when it is for the kept key (TL_EREFUSED
 * otherwise: another key's, or no key here), and drops the request.
 * tn_cert_files: key (guarded memory, tl_secret_free) and certificate
 * (malloc'd) both, or an error and neither.  tn_cert_forget: all three
 * gone (a version replaced, a grant dropped).
 */
struct tl_dlv_keyreq;
int	tn_cert_prepare(int statefd, const char *gf, uint64_t version,
	    const struct tl_dlv_keyreq *kr, int *have_cert, char *why);
int	tn_cert_csr(int statefd, const char *gf, uint64_t version, char **csr);
int	tn_cert_take(int statefd, const char *gf, uint64_t version,
	    const char *cert, char *why);
int	tn_cert_files(int statefd, const char *gf, uint64_t version,
	    char **key, char **cert);
void	tn_cert_forget(int statefd, const char *gf, uint64_t version);

#endif
