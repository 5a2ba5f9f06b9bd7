/*
 * directory.c - the directory driver: one directory per grant.  These
 * are its operations; its declaration (type, settings, the field,
 * revocation, fencing, names, compose, and the directory names they
 * share with the operations) is directory_decl.c's.
 *
 * The provider is a directory on tallyd's own machine (the setting root,
 * an absolute path); a grant is a directory under it, its connection
 * field `path`, with no credential: the file system's owner and mode bits
 * are the access control.  What a grant is (create makes it, check
 * verifies it, fix_privileges restores it):
 *
 *   name	READABLE "_" DIGEST: READABLE is the grant id with every byte
 *		outside [a-z0-9-] made "-", cut to 40 bytes; DIGEST the first
 *		16 hex digits of BLAKE2b-128 of the whole grant id.  Two grants
 *		differ in the digest (the argument of reactors/names.c), a name
 *		never starts with "." (so never meets .tally), and one grant's
 *		name never depends on anything but its id.
 *   owner	run as root (euid 0): uid 0 and a group of the grant's own,
 *		mode 02770 (members of the group read and write, and what they
 *		make inherits the group); run unprivileged: tallyd's uid and
 *		gid, mode 0700 (the consumer runs as tallyd's user).
 *
 * The per-grant group (privileged only) is a number, not a name in
 * /etc/group: tally writes no system files.  It is derived from the
 * digest, gid-base + (digest + i) mod gid-range for the first i whose
 * claim is free or this grant's; the claims are files ROOT/.tally/gid-N
 * holding the name of the directory that owns group N (made with
 * O_EXCL, so two grants never share a group).  A purge empties its claim
 * rather than removing it, so a later grant's probe never stops short of
 * its own claim and no group is ever given to a second grant.  The node
 * host starts the consumer with that group (the directory's group, as
 * stat shows it).
 *
 * Revoking with retain sets mode 0000 (nobody but root reaches the data;
 * the path stays; unprivileged, the owner is the consumer's uid too and
 * could set the mode back: mode bits cannot keep a uid from itself);
 * restore is create again (mode and owner back); purge deletes the tree.
 * size is du's total of what tallyd can read (unprivileged, a revoked
 * directory counts as its own blocks).  Nothing below root is ever followed through a
 * symbolic link: every step is openat/fstatat/unlinkat relative to a
 * directory descriptor with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW, so a link
 * a consumer made in its directory is removed, never entered, and purge
 * cannot leave root.  A missing directory is reported (TL_DRIFT_MISSING)
 * and never recreated by check or fix_privileges: only create makes one.
 *
 * Two meshes on one root.  A grant of a mesh with an id (scheme 4,
 * reactors/names.c) is named READABLE "_m" DIGEST, DIGEST keyed by the
 * mesh id (dir_names, directory_decl.c: two meshes never meet on a
 * name; "m" is no hex digit, so the shape is never a name of before);
 * the reactors hand it in tl_drv_grant.resource, and only a name of
 * that shape is taken from there: every other grant keeps READABLE "_"
 * DIGEST of its id.  The
 * mark is ROOT/.tally/mesh-NAME, the whole mesh id of the mesh that made
 * NAME (written before the directory, replaced by rename).  A directory
 * marked by another mesh is refused by create, fix_privileges,
 * set_password and revoke (TL_EREFUSED, "owned by mesh 6f1c..., not this
 * one") and reported by check, unless tl_drv_grant.adopt_mesh names that
 * mesh (tally adopt): then it is re-marked with ours.  One with no mark
 * (made before marks) is marked by the first mesh that changes it.
 *
 * tally adopt (tl_drv_grant.adopting, then adopted in every call): a
 * directory someone made under root, named by g->resource (one
 * component, tl_drv_dir_adoptable), becomes the grant's; create takes it
 * over only if it is a directory (never a link), has no shape of a name
 * tally gives its grants, and the claim ROOT/.tally/grant-NAME (O_EXCL,
 * the grant id) is free or the grant's own.  Its contents are not
 * touched: owner, group and mode are set on the directory alone.  A
 * purge removes the claim with the directory.
 *
 * The fence (ops->fence; decl fencing TL_DRV_FENCE_ATOMIC): one file per
 * mesh, ROOT/.tally-fence-MESH ("none" for a home of before ids), made
 * O_EXCL | O_NOFOLLOW, mode 0600, holding "tally-fence/1 EPOCH LEADER";
 * it is read and compare-and-set under flock(2), and every changing
 * operation of a session with a fence (tl_drv_admin.fence) takes the
 * same lock and checks the fence while it holds it, so a raise either
 * comes before a change (which is then refused: "deposed: ...") or after
 * it.  Reader sessions (no fence) take no lock and change no fence.
 *
 * Errors: TL_EUNREACH when root cannot be opened (gone, not a directory,
 * no permission), TL_EINVAL for a bad setting, grant id or mesh id,
 * TL_EREFUSED for another mesh's directory or a deposed session,
 * TL_EDRIVER for any other failure; why always names the path and
 * errno's words.  A handle is used by one thread at a time; different
 * handles may be used at once (each create is idempotent, claims are
 * O_EXCL, marks are replaced by rename, the fence is under flock).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <sodium.h>

#include "core/error.h"
#include "directory-internal.h"
#include "driver.h"
#include "util.h"

#define DIR_META	".tally"	/* the group claims, the marks */
#define DIR_MARK	"mesh-"		/* DIR_META/mesh-NAME: its mesh */
#define DIR_FENCE	".tally-fence-"	/* ROOT/.tally-fence-MESH */
#define DIR_FENCE_V1	"tally-fence/1"
#define DIR_PROBES	64		/* claims tried before giving up */
#define DIR_DEPTH_MAX	256		/* purge and size refuse deeper */
#define MODE_PRIV	02770
#define MODE_UNPRIV	0700

struct tl_drv_dir {
	int		 rootfd;
	int		 metafd;	/* ROOT/.tally; -1 unprivileged */
	char		 root[TL_DRV_SETTING_MAX + 1];
	int		 priv;		/* euid 0: a group per grant */
	uid_t		 uid;
	gid_t		 gid;		/* unprivileged: tallyd's */
	unsigned long long gid_base, gid_range;
	char		 mesh[DIR_MESH_HEX + 1];	/* ours; "": before ids */
	/* The session's fence (tl_drv_admin.fence); fenced 0: none. */
	int		 fenced;
	char		 fmesh[DIR_MESH_HEX + 1];
	uint64_t	 fepoch;
	char		 fleader[TL_DRV_LEADER_MAX];
};

static void dir_close(void *hv);

static int
dir_open(const struct tl_drv_admin *a, void **hp, char *why)
{
	struct tl_drv_dir *h;
	const char *root = tl_drv_setting_get(a->settings, "root");
	int rc;

	*hp = NULL;
	if (root == NULL || root[0] != '/')
		return tl_drv_why(why, TL_EINVAL, "setting root: expected an "
		    "absolute path (tally assign --set root=/srv/...)");
	if (strlen(root) > TL_DRV_SETTING_MAX)
		return tl_drv_why(why, TL_EINVAL, "setting root: too long");
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return tl_drv_why(why, TL_EDRIVER, "out of memory");
	h->metafd = -1;
	h->rootfd = -1;
	if (!tl_drv_dir_mesh_valid(a->mesh) || (a->fence != NULL &&
	    (!tl_drv_dir_mesh_valid(a->fence->mesh) ||
	    (a->fence->leader != NULL &&
	    strlen(a->fence->leader) >= TL_DRV_LEADER_MAX)))) {
		free(h);
		return tl_drv_why(why, TL_EINVAL, "the mesh id or the fence is "
		    "not 32 hex digits");
	}
	snprintf(h->mesh, sizeof(h->mesh), "%s", a->mesh ? a->mesh : "");
	if (a->fence != NULL) {
		h->fenced = 1;
		snprintf(h->fmesh, sizeof(h->fmesh), "%s",
		    a->fence->mesh ? a->fence->mesh : "");
		h->fepoch = a->fence->epoch;
		snprintf(h->fleader, sizeof(h->fleader), "%s",
		    a->fence->leader ? a->fence->leader : "");
	}
	snprintf(h->root, sizeof(h->root), "%s", root);
	/* Trailing slashes would double in the paths delivered. */
	while (strlen(h->root) > 1 && h->root[strlen(h->root) - 1] == '/')
		h->root[strlen(h->root) - 1] = '\0';
	h->uid = geteuid();
	h->gid = getegid();
	h->priv = h->uid == 0;
	if ((rc = tl_drv_dir_num_setting(a->settings, "gid-base",
	    1000000000ULL, &h->gid_base, why)) != 0 ||
	    (rc = tl_drv_dir_num_setting(a->settings, "gid-range",
	    1000000000ULL, &h->gid_range, why)) != 0 ||
	    (rc = tl_drv_directory_decl.settings_check(a->settings,
	    why)) != 0)
		goto err_free;
	/* The operator's root may be a link; nothing below it may. */
	if ((h->rootfd = open(h->root, O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) < 0) {
		rc = tl_drv_why(why, TL_EUNREACH, "root %s: %s", h->root,
		    strerror(errno));
		goto err_free;
	}
	/* Claims (privileged) and marks (always) live there. */
	if (mkdirat(h->rootfd, DIR_META, 0700) != 0 && errno != EEXIST) {
		rc = tl_drv_why(why, TL_EUNREACH, "%s/%s: %s", h->root,
		    DIR_META, strerror(errno));
		goto err_close;
	}
	if ((h->metafd = openat(h->rootfd, DIR_META, O_RDONLY |
	    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = tl_drv_why(why, TL_EUNREACH, "%s/%s: %s", h->root,
		    DIR_META, strerror(errno));
		goto err_close;
	}
	*hp = h;
	return 0;
err_close:
	dir_close(h);
	return rc;
err_free:
	free(h);
	return rc;
}

static void
dir_close(void *hv)
{
	struct tl_drv_dir *h = hv;

	if (h == NULL)
		return;
	if (h->metafd >= 0)
		close(h->metafd);
	if (h->rootfd >= 0)
		close(h->rootfd);
	free(h);
}

/*
 * The group claimed for name: 0 and *gid; TL_ENOTFOUND when none is
 * (and create is 0); TL_EDRIVER when every probe belongs to others.
 */
static int
claim(struct tl_drv_dir *h, const char *name, uint64_t h64, int create,
    gid_t *gid, char *why)
{
	char file[32], buf[DIR_NAME_MAX + 2];
	unsigned i;
	ssize_t n;
	int fd;

	for (i = 0; i < DIR_PROBES; i++) {
		unsigned long long g = h->gid_base +
		    (h64 + i) % h->gid_range;

		snprintf(file, sizeof(file), "gid-%llu", g);
		fd = openat(h->metafd, file, O_RDONLY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			if (!create)
				return TL_ENOTFOUND;
			fd = openat(h->metafd, file, O_WRONLY | O_CREAT |
			    O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 && errno == EEXIST) {
				i--;	/* made beside us: read it */
				continue;
			}
			if (fd < 0)
				return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: "
				    "%s", h->root, DIR_META, file,
				    strerror(errno));
			n = write(fd, name, strlen(name));
			if (n != (ssize_t)strlen(name) || fsync(fd) != 0) {
				int e = n < 0 ? errno : EIO;

				close(fd);
				unlinkat(h->metafd, file, 0);
				return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: "
				    "%s", h->root, DIR_META, file, strerror(e));
			}
			close(fd);
			*gid = (gid_t)g;
			return 0;
		}
		if (fd < 0)
			return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s",
			    h->root, DIR_META, file, strerror(errno));
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0)
			return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s",
			    h->root, DIR_META, file, strerror(errno));
		buf[n] = '\0';
		if (strcmp(buf, name) == 0) {
			*gid = (gid_t)g;
			return 0;
		}
	}
	return tl_drv_why(why, TL_EDRIVER, "no free group for %s in %d probes "
	    "of gid-base..gid-base+gid-range", name, DIR_PROBES);
}

/* What owner, group and mode the grant's directory should have. */
static int
expected(struct tl_drv_dir *h, const char *name, uint64_t h64, int create,
    uid_t *uid, gid_t *gid, mode_t *mode, char *why)
{
	*uid = h->uid;
	*gid = h->gid;
	*mode = h->priv ? MODE_PRIV : MODE_UNPRIV;
	if (!h->priv)
		return 0;
	return claim(h, name, h64, create, gid, why);
}

/*
 * Opens root/name as a directory, never through a link; a directory
 * whose mode keeps its owner out (0000 after a revoke) is opened after
 * giving the owner its bits back, checked to be the same inode.  Only
 * an unprivileged tallyd meets EACCES (root is never refused), and then
 * whoever could swap a link in between is tallyd's own uid.
 */
static int
open_dir(int dfd, const char *name, int *fdp)
{
	struct stat st, st2;
	int fd;

	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			return -1;
		if (!S_ISDIR(st.st_mode)) {
			errno = ENOTDIR;
			return -1;
		}
		if (fchmodat(dfd, name, (st.st_mode & 07777) | 0700, 0) != 0)
			return -1;
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &st2) != 0 ||
		    st2.st_ino != st.st_ino || st2.st_dev != st.st_dev)) {
			close(fd);
			errno = EXDEV;
			return -1;
		}
	}
	if (fd < 0)
		return -1;
	*fdp = fd;
	return 0;
}

/* Owner then mode: chown clears the set-group-id bit. */
static int
set_owner_mode(struct tl_drv_dir *h, const char *name, uid_t uid, gid_t gid,
    mode_t mode, char *why)
{
	int fd, rc = 0;

	if (open_dir(h->rootfd, name, &fd) != 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s: %s%s", h->root, name,
		    strerror(errno), errno == ELOOP || errno == ENOTDIR ?
		    " (not a directory; refused)" : "");
	if (fchown(fd, uid, gid) != 0 || fchmod(fd, mode) != 0)
		rc = tl_drv_why(why, TL_EDRIVER, "%s/%s: %s", h->root, name,
		    strerror(errno));
	close(fd);
	return rc;
}

/* --- the fence ------------------------------------------------------- */

/*
 * Opens ROOT/.tally-fence-MESH (made when create, else TL_ENOTFOUND when
 * absent), a regular file reached through no link.
 */
static int
fence_open(struct tl_drv_dir *h, const char *mesh, int create, int *fdp,
    char *why)
{
	char file[64];
	struct stat st;
	int fd, i;

	snprintf(file, sizeof(file), DIR_FENCE "%s", mesh != NULL &&
	    mesh[0] != '\0' ? mesh : "none");
	for (i = 0; i < 8; i++) {
		fd = openat(h->rootfd, file, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			if (!create)
				return TL_ENOTFOUND;
			fd = openat(h->rootfd, file, O_RDWR | O_CREAT | O_EXCL |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 && errno == EEXIST)
				continue;	/* made beside us: open it */
		}
		if (fd < 0)
			return tl_drv_why(why, TL_EDRIVER, "%s/%s: %s", h->root,
			    file, strerror(errno));
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return tl_drv_why(why, TL_EDRIVER, "%s/%s: not a "
			    "regular file (refused)", h->root, file);
		}
		if (flock(fd, LOCK_EX) != 0) {
			int e = errno;

			close(fd);
			return tl_drv_why(why, TL_EDRIVER, "%s/%s: flock: %s",
			    h->root, file, strerror(e));
		}
		*fdp = fd;
		return 0;
	}
	return tl_drv_why(why, TL_EDRIVER, "%s/%s: cannot be opened",
	    h->root, file);
}

/* What fd (locked) holds; an empty file holds nothing (epoch 0). */
static int
fence_read(struct tl_drv_dir *h, int fd, struct tl_drv_fence_held *held,
    char *why)
{
	char buf[128], lead[TL_DRV_LEADER_MAX + 8] = "";
	unsigned long long e = 0;
	ssize_t n;

	held->epoch = 0;
	held->leader[0] = '\0';
	if ((n = pread(fd, buf, sizeof(buf) - 1, 0)) < 0)
		return tl_drv_why(why, TL_EDRIVER, "%s: reading its fence: %s",
		    h->root, strerror(errno));
	buf[n] = '\0';
	if (n == 0)
		return 0;
	if (sscanf(buf, DIR_FENCE_V1 " %llu %40s", &e, lead) < 1 ||
	    strlen(lead) >= TL_DRV_LEADER_MAX)
		return tl_drv_why(why, TL_EDRIVER, "%s: its fence file holds "
		    "no fence (refused)", h->root);
	held->epoch = e;
	memcpy(held->leader, lead, strlen(lead) + 1);	/* checked above */
	return 0;
}

static int
dir_fence(void *hv, const struct tl_drv_fence *want,
    struct tl_drv_fence_held *held, char *why)
{
	struct tl_drv_dir *h = hv;
	char buf[128];
	int fd, n, rc;

	held->epoch = 0;
	held->leader[0] = '\0';
	if (!tl_drv_dir_mesh_valid(want->mesh) || (want->epoch != 0 &&
	    (want->leader == NULL ||
	    strlen(want->leader) >= TL_DRV_LEADER_MAX ||
	    strspn(want->leader, "0123456789abcdef") !=
	    strlen(want->leader))))
		return tl_drv_why(why, TL_EINVAL, "a fence's mesh and leader "
		    "are hex");
	/* Epoch 0 only reads: a mesh that never raised one has none. */
	rc = fence_open(h, want->mesh, want->epoch != 0, &fd, why);
	if (rc == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	if ((rc = fence_read(h, fd, held, why)) == 0 && want->epoch != 0 &&
	    held->epoch < want->epoch) {
		n = snprintf(buf, sizeof(buf), DIR_FENCE_V1 " %llu %s\n",
		    (unsigned long long)want->epoch, want->leader);
		if (ftruncate(fd, 0) != 0 ||
		    pwrite(fd, buf, (size_t)n, 0) != n || fsync(fd) != 0)
			rc = tl_drv_why(why, TL_EDRIVER, "%s: writing its fence: "
			    "%s", h->root, strerror(errno));
		else {
			held->epoch = want->epoch;
			snprintf(held->leader, sizeof(held->leader), "%s",
			    want->leader);
		}
	}
	close(fd);	/* and the lock with it */
	return rc;
}

/*
 * Before a change: takes the fence's lock (held in *fdp until unguard)
 * and refuses when the fence is not ours.  A session without a fence
 * takes none (*fdp -1).
 */
static int
guard(struct tl_drv_dir *h, int *fdp, char *why)
{
	struct tl_drv_fence want = { h->fmesh, h->fepoch, h->fleader };
	struct tl_drv_fence_held held;
	int fd, rc;

	*fdp = -1;
	if (!h->fenced)
		return 0;
	if ((rc = fence_open(h, h->fmesh, 1, &fd, why)) != 0)
		return rc;
	if ((rc = fence_read(h, fd, &held, why)) != 0) {
		close(fd);
		return rc;
	}
	if (!tl_drv_fence_ours(&want, &held)) {
		close(fd);
		return tl_drv_why(why, TL_EREFUSED, "deposed: directory root %s "
		    "is fenced at epoch %llu by leader %.12s, this control "
		    "plane is leader %.12s at epoch %llu", h->root,
		    (unsigned long long)held.epoch, held.leader, h->fleader,
		    (unsigned long long)h->fepoch);
	}
	*fdp = fd;
	return 0;
}

static void
unguard(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* --- marks ------------------------------------------------------------ */

/* The mesh that marked name into mark ("" for none); errors TL_EDRIVER. */
static int
mark_get(struct tl_drv_dir *h, const char *name, char mark[64], char *why)
{
	char file[DIR_NAME_MAX + 16];
	ssize_t n;
	int fd;

	mark[0] = '\0';
	snprintf(file, sizeof(file), DIR_MARK "%s", name);
	if ((fd = openat(h->metafd, file, O_RDONLY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : tl_drv_why(why, TL_EDRIVER,
		    "%s/%s/%s: %s", h->root, DIR_META, file, strerror(errno));
	n = read(fd, mark, 63);
	close(fd);
	if (n < 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, file, strerror(errno));
	mark[n] = '\0';
	mark[strcspn(mark, "\n")] = '\0';
	if (mark[0] == '\0')
		snprintf(mark, 64, "(an empty mark)");
	return 0;
}

/* Marks name as ours (nothing for a home of before ids). */
static int
mark_set(struct tl_drv_dir *h, const char *name, char *why)
{
	char file[DIR_NAME_MAX + 16], tmp[DIR_NAME_MAX + 24];
	char buf[DIR_MESH_HEX + 2];
	int fd, n;

	if (h->mesh[0] == '\0')
		return 0;
	snprintf(file, sizeof(file), DIR_MARK "%s", name);
	snprintf(tmp, sizeof(tmp), "%s.new", file);
	n = snprintf(buf, sizeof(buf), "%s\n", h->mesh);
	unlinkat(h->metafd, tmp, 0);
	if ((fd = openat(h->metafd, tmp, O_WRONLY | O_CREAT | O_EXCL |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, tmp, strerror(errno));
	if (write(fd, buf, (size_t)n) != n || fsync(fd) != 0) {
		int e = errno;

		close(fd);
		unlinkat(h->metafd, tmp, 0);
		return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, tmp, strerror(e));
	}
	close(fd);
	if (renameat(h->metafd, tmp, h->metafd, file) != 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, file, strerror(errno));
	return 0;
}

/*
 * Whether this session may change name: 0 when it is ours, unmarked or
 * marked by the mesh g adopts (*remark: it must then carry our mark);
 * TL_EREFUSED when another mesh's.
 */
static int
owned(struct tl_drv_dir *h, const struct tl_drv_grant *g, const char *name,
    int *remark, char *why)
{
	char mark[64];
	int rc;

	*remark = 0;
	if ((rc = mark_get(h, name, mark, why)) != 0)
		return rc;
	if (strcmp(mark, h->mesh) == 0)
		return 0;
	if (mark[0] == '\0' || (g->adopt_mesh != NULL &&
	    g->adopt_mesh[0] != '\0' && strcmp(g->adopt_mesh, mark) == 0)) {
		*remark = h->mesh[0] != '\0';
		return 0;
	}
	return tl_drv_why(why, TL_EREFUSED, "%s/%s is owned by mesh %.12s..., "
	    "not this one", h->root, name, mark);
}

/*
 * tally adopt (g->adopting): name, a directory someone made under root,
 * becomes g's.  It must be a directory (never a link: nothing below
 * root is followed) and not have the shape of a name tally gives its
 * grants (that one is a grant's, or is refused as another mesh's by
 * owned).  The claim DIR_META/grant-NAME, made O_EXCL and holding g's
 * id, keeps a second grant from adopting it; a claim of g's own is a
 * resumed call.  Its contents are not touched: owner and mode are set
 * on the directory alone, as on one create made.
 */
static int
adopt_claim(struct tl_drv_dir *h, const struct tl_drv_grant *g,
    const char *name, char *why)
{
	char file[DIR_NAME_MAX + 16], buf[TL_DRV_NAME_MAX * 4];
	struct stat st;
	ssize_t n;
	int fd;

	if (fstatat(h->rootfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s: %s%s", h->root, name,
		    strerror(errno), errno == ENOENT ? ": nothing to adopt" :
		    "");
	if (!S_ISDIR(st.st_mode))
		return tl_drv_why(why, TL_EDRIVER, "%s/%s is not a directory "
		    "(%s): tally adopt takes over a directory", h->root, name,
		    S_ISLNK(st.st_mode) ? "a symbolic link" : "another kind "
		    "of file");
	if (tl_drv_dir_shaped(name))
		return tl_drv_why(why, TL_EDRIVER, "%s/%s has the shape of a "
		    "directory tally made for a grant: tally adopt takes over "
		    "only what tally did not make", h->root, name);
	snprintf(file, sizeof(file), "grant-%s", name);
	fd = openat(h->metafd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0600);
	if (fd >= 0) {
		size_t len = strlen(g->grant);

		if (write(fd, g->grant, len) != (ssize_t)len ||
		    fsync(fd) != 0) {
			int e = errno;

			close(fd);
			unlinkat(h->metafd, file, 0);
			return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s",
			    h->root, DIR_META, file, strerror(e));
		}
		close(fd);
		return 0;
	}
	if (errno != EEXIST || (fd = openat(h->metafd, file, O_RDONLY |
	    O_NOFOLLOW | O_CLOEXEC)) < 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, file, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, file, strerror(errno));
	buf[n] = '\0';
	if (strcmp(buf, g->grant) != 0)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s was adopted by tally "
		    "for grant %.200s: one directory, one grant", h->root,
		    name, buf);
	return 0;
}

static int
dir_create(void *hv, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_dir *h = hv;
	char name[DIR_NAME_MAX + 1];
	uint64_t h64;
	uid_t uid;
	gid_t gid;
	mode_t mode;
	int rc, lock, remark;

	if (tl_drv_dir_grant_dir(g, name, &h64) != 0)
		return tl_drv_why(why, TL_EINVAL, "a directory grant needs its "
		    "id");
	if ((rc = guard(h, &lock, why)) != 0)
		return rc;
	/* Refused before anything is made: another mesh's stays as it is. */
	if ((rc = owned(h, g, name, &remark, why)) != 0 ||
	    (g->adopting && (rc = adopt_claim(h, g, name, why)) != 0) ||
	    (rc = expected(h, name, h64, 1, &uid, &gid, &mode, why)) != 0)
		goto out;
	/* The mark first: a directory of ours is never unmarked. */
	if (remark && (rc = mark_set(h, name, why)) != 0)
		goto out;
	/* 0700 until it is the grant's: never open to the wrong group. */
	if (mkdirat(h->rootfd, name, 0700) != 0 && errno != EEXIST) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s/%s: %s", h->root, name,
		    strerror(errno));
		goto out;
	}
	rc = set_owner_mode(h, name, uid, gid, mode, why);
	if (rc == 0 && g->adopting)
		tl_drv_why(why, 0, "%s/%s adopted: its contents untouched, the "
		    "directory the grant's (owner, group and mode)", h->root,
		    name);
out:
	unguard(lock);
	return rc;
}

static int
dir_check(void *hv, const struct tl_drv_grant *g,
    const struct tl_drv_endpoint *ep, enum tl_drv_drift *drift, char *why)
{
	struct tl_drv_dir *h = hv;
	char name[DIR_NAME_MAX + 1];
	struct stat st;
	uint64_t h64;
	uid_t uid;
	gid_t gid;
	mode_t mode;
	int rc, remark;

	(void)ep;
	*drift = TL_DRIFT_NONE;
	why[0] = '\0';
	if (tl_drv_dir_grant_dir(g, name, &h64) != 0)
		return tl_drv_why(why, TL_EINVAL, "a directory grant needs its "
		    "id");
	/* Another mesh's is reported, not looked into. */
	rc = owned(h, g, name, &remark, why);
	if (rc == TL_EREFUSED) {
		*drift = TL_DRIFT_PRIVILEGES;
		return 0;
	}
	if (rc != 0)
		return rc;
	if (fstatat(h->rootfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno != ENOENT)
			return tl_drv_why(why, TL_EDRIVER, "%s/%s: %s", h->root,
			    name, strerror(errno));
		*drift = TL_DRIFT_MISSING;
		snprintf(why, TL_WHY_MAX, "directory %s/%s is gone", h->root,
		    name);
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		*drift = TL_DRIFT_MISSING;
		snprintf(why, TL_WHY_MAX, "%s/%s is not a directory (a link or "
		    "a file took its place)", h->root, name);
		return 0;
	}
	rc = expected(h, name, h64, 0, &uid, &gid, &mode, why);
	if (rc == TL_ENOTFOUND) {
		*drift = TL_DRIFT_PRIVILEGES;
		snprintf(why, TL_WHY_MAX, "%s/%s: its group's claim in %s is "
		    "gone", h->root, name, DIR_META);
		return 0;
	}
	if (rc != 0)
		return rc;
	if (st.st_uid != uid || st.st_gid != gid ||
	    (st.st_mode & 07777) != mode) {
		*drift = TL_DRIFT_PRIVILEGES;
		snprintf(why, TL_WHY_MAX, "%s/%s: owner %lu:%lu mode %04o, "
		    "expected %lu:%lu mode %04o", h->root, name,
		    (unsigned long)st.st_uid, (unsigned long)st.st_gid,
		    (unsigned)(st.st_mode & 07777), (unsigned long)uid,
		    (unsigned long)gid, (unsigned)mode);
	} else if (remark && g->adopt_mesh != NULL && g->adopt_mesh[0]) {
		/* Adopted: fix_privileges puts our mark on it. */
		*drift = TL_DRIFT_PRIVILEGES;
		snprintf(why, TL_WHY_MAX, "%s/%s carries the mark of mesh "
		    "%.12s..., which this mesh adopts", h->root, name,
		    g->adopt_mesh);
	}
	return 0;
}

/*
 * No credential: nothing to set (the contract still calls it), but a
 * rotation of another mesh's directory is refused all the same.
 */
static int
dir_set_password(void *hv, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_dir *h = hv;
	char name[DIR_NAME_MAX + 1];
	int rc, lock, remark;

	if (tl_drv_dir_grant_dir(g, name, NULL) != 0)
		return tl_drv_why(why, TL_EINVAL, "a directory grant needs its "
		    "id");
	if ((rc = guard(h, &lock, why)) != 0)
		return rc;
	if ((rc = owned(h, g, name, &remark, why)) == 0 && remark &&
	    faccessat(h->rootfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		rc = mark_set(h, name, why);
	unguard(lock);
	return rc;
}

/* Owner, group and mode back; a missing directory is not recreated. */
static int
dir_fix_privileges(void *hv, const struct tl_drv_grant *g, char *why)
{
	struct tl_drv_dir *h = hv;
	char name[DIR_NAME_MAX + 1];
	struct stat st;
	uint64_t h64;
	uid_t uid;
	gid_t gid;
	mode_t mode;
	int rc, lock, remark;

	if (tl_drv_dir_grant_dir(g, name, &h64) != 0)
		return tl_drv_why(why, TL_EINVAL, "a directory grant needs its "
		    "id");
	if ((rc = guard(h, &lock, why)) != 0)
		return rc;
	if ((rc = owned(h, g, name, &remark, why)) != 0)
		goto out;
	if (fstatat(h->rootfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
	    !S_ISDIR(st.st_mode)) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s/%s is missing; not "
		    "recreated (tally repair does that)", h->root, name);
		goto out;
	}
	if ((rc = expected(h, name, h64, 1, &uid, &gid, &mode, why)) != 0 ||
	    (remark && (rc = mark_set(h, name, why)) != 0))
		goto out;
	rc = set_owner_mode(h, name, uid, gid, mode, why);
out:
	unguard(lock);
	return rc;
}

/*
 * Removes dfd/name and everything below it, entering directories only
 * through O_NOFOLLOW descriptors: a link is unlinked, never followed.
 */
static int
rm_tree(int dfd, const char *name, int depth)
{
	struct dirent *e;
	struct stat st;
	DIR *d;
	int fd, rc = 0;

	if (depth > DIR_DEPTH_MAX) {
		errno = ELOOP;
		return -1;
	}
	if (open_dir(dfd, name, &fd) != 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != ENOTDIR && errno != ELOOP)
			return -1;
		/* A file or a link: the name goes, not what it names. */
		if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
			return -1;
		return 0;
	}
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while (rc == 0 && (errno = 0, e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			if (errno != ENOENT)
				rc = -1;
			continue;
		}
		if (S_ISDIR(st.st_mode))
			rc = rm_tree(dirfd(d), e->d_name, depth + 1);
		else if (unlinkat(dirfd(d), e->d_name, 0) != 0 &&
		    errno != ENOENT)
			rc = -1;
	}
	if (rc == 0 && errno != 0)
		rc = -1;
	closedir(d);
	if (rc == 0 && unlinkat(dfd, name, AT_REMOVEDIR) != 0 &&
	    errno != ENOENT)
		rc = -1;
	return rc;
}

/* Empties the grant's claim: its group is never given to another. */
static int
unclaim(struct tl_drv_dir *h, const char *name, uint64_t h64, char *why)
{
	char file[32];
	gid_t gid;
	int fd, rc;

	if (!h->priv)
		return 0;
	if ((rc = claim(h, name, h64, 0, &gid, why)) == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	snprintf(file, sizeof(file), "gid-%llu", (unsigned long long)gid);
	if ((fd = openat(h->metafd, file, O_WRONLY | O_TRUNC | O_NOFOLLOW |
	    O_CLOEXEC)) < 0 || fsync(fd) != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, file, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	close(fd);
	return 0;
}

/* Removes name's mark (after a purge): the name is nobody's again. */
static int
mark_drop(struct tl_drv_dir *h, const char *name, char *why)
{
	char file[DIR_NAME_MAX + 16];

	snprintf(file, sizeof(file), DIR_MARK "%s", name);
	if (unlinkat(h->metafd, file, 0) != 0 && errno != ENOENT)
		return tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s", h->root,
		    DIR_META, file, strerror(errno));
	return 0;
}

static int
dir_revoke(void *hv, const struct tl_drv_grant *g, int drop, char *why)
{
	struct tl_drv_dir *h = hv;
	char name[DIR_NAME_MAX + 1];
	struct stat st;
	uint64_t h64;
	int fd, rc, lock, remark;

	if (tl_drv_dir_grant_dir(g, name, &h64) != 0)
		return tl_drv_why(why, TL_EINVAL, "a directory grant needs its "
		    "id");
	if ((rc = guard(h, &lock, why)) != 0)
		return rc;
	if ((rc = owned(h, g, name, &remark, why)) != 0)
		goto out;
	if (drop) {
		if (rm_tree(h->rootfd, name, 0) != 0)
			rc = tl_drv_why(why, TL_EDRIVER, "purging %s/%s: %s",
			    h->root, name, strerror(errno));
		else if ((rc = unclaim(h, name, h64, why)) == 0 &&
		    (rc = mark_drop(h, name, why)) == 0 && g->adopted) {
			char file[DIR_NAME_MAX + 16];

			/* Gone: the name may be another's to adopt. */
			snprintf(file, sizeof(file), "grant-%s", name);
			if (unlinkat(h->metafd, file, 0) != 0 &&
			    errno != ENOENT)
				rc = tl_drv_why(why, TL_EDRIVER, "%s/%s/%s: %s",
				    h->root, DIR_META, file, strerror(errno));
		}
		goto out;
	}
	/* Retain: the data stays, nobody but root reaches it. */
	if (fstatat(h->rootfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
	    errno == ENOENT)
		goto out;	/* nothing left to keep */
	if (remark && (rc = mark_set(h, name, why)) != 0)
		goto out;
	if (open_dir(h->rootfd, name, &fd) != 0) {
		rc = tl_drv_why(why, TL_EDRIVER, "%s/%s: %s", h->root, name,
		    strerror(errno));
		goto out;
	}
	if (fchmod(fd, 0) != 0)
		rc = tl_drv_why(why, TL_EDRIVER, "%s/%s: %s", h->root, name,
		    strerror(errno));
	close(fd);
out:
	unguard(lock);
	return rc;
}

/* du: the blocks of everything below dfd/name, links not followed. */
static int
du_tree(int dfd, const char *name, int depth, uint64_t *bytes)
{
	struct dirent *e;
	struct stat st;
	DIR *d;
	int fd, rc = 0;

	if (depth > DIR_DEPTH_MAX) {
		errno = ELOOP;
		return -1;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -1;
	*bytes += (uint64_t)st.st_blocks * 512;
	if (!S_ISDIR(st.st_mode))
		return 0;
	/*
	 * A directory closed to us (mode 0 and not root: a revoked grant
	 * when unprivileged) counts as its own blocks, like du's total:
	 * size must not change modes to look inside.
	 */
	if ((fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) < 0)
		return errno == ENOENT || errno == EACCES ? 0 : -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while (rc == 0 && (e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0)
			rc = du_tree(dirfd(d), e->d_name, depth + 1, bytes);
	closedir(d);
	return rc;
}

static int
dir_size(void *hv, const struct tl_drv_grant *g, uint64_t *bytes, char *why)
{
	struct tl_drv_dir *h = hv;
	char name[DIR_NAME_MAX + 1];

	*bytes = 0;
	if (tl_drv_dir_grant_dir(g, name, NULL) != 0)
		return tl_drv_why(why, TL_EINVAL, "a directory grant needs its "
		    "id");
	if (du_tree(h->rootfd, name, 0, bytes) != 0)
		return tl_drv_why(why, TL_EDRIVER, "sizing %s/%s: %s", h->root,
		    name, strerror(errno));
	return 0;
}

const struct tl_drv_ops tl_drv_directory = {
	.decl = &tl_drv_directory_decl,
	.open = dir_open,
	.close = dir_close,
	.create = dir_create,
	.check = dir_check,
	.set_password = dir_set_password,
	.fix_privileges = dir_fix_privileges,
	.revoke = dir_revoke,
	.size = dir_size,
	.fence = dir_fence,
};
