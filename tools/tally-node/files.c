/*
 * files.c - what tally-node writes, through directory descriptors it
 * holds (node-internal.h).
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "node-internal.h"

#define DIRFLAGS	(O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

int
tn_name_ok(const char *name)
{
	return name[0] != '\0' && strchr(name, '/') == NULL &&
	    strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int
tn_dir_top(const char *path, mode_t mode, int search, int *fd, char *why)
{
	struct stat st;
	int d;

	*fd = -1;
	if (mkdir(path, mode) != 0 && errno != EEXIST) {
		snprintf(why, TL_WHY_MAX, "%s: %s", path, strerror(errno));
		return errno;
	}
	if ((d = open(path, DIRFLAGS)) < 0) {
		int e = errno;

		snprintf(why, TL_WHY_MAX, "%s: %s", path,
		    e == ELOOP || e == ENOTDIR ?
		    "not a directory (a symlink is not followed)" :
		    strerror(e));
		return e;
	}
	if (fstat(d, &st) != 0) {
		snprintf(why, TL_WHY_MAX, "%s: %s", path, strerror(errno));
		close(d);
		return EIO;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
		snprintf(why, TL_WHY_MAX, "%s is owned by uid %ld, mode %04o: "
		    "the agent writes only into a directory of its own that no "
		    "one else can write (chown it to uid %ld, chmod go-w)",
		    path, (long)st.st_uid, (unsigned)(st.st_mode & 07777),
		    (long)geteuid());
		close(d);
		return TL_EINVAL;
	}
	if (search && (st.st_mode & 011) != 011 &&
	    fchmod(d, (st.st_mode & 07777) | 0111) != 0) {
		snprintf(why, TL_WHY_MAX, "%s: %s", path, strerror(errno));
		close(d);
		return errno;
	}
	*fd = d;
	return 0;
}

/* dirfd/name as a directory owned uid:gid, mode; see tn_dir_module. */
static int
subdir(int dirfd, const char *name, uid_t uid, gid_t gid, mode_t mode,
    int *fd)
{
	struct stat st;
	int d, tries;

	*fd = -1;
	if (!tn_name_ok(name))
		return TL_EINVAL;
	for (tries = 0; tries < 3; tries++) {
		if ((d = openat(dirfd, name, DIRFLAGS)) >= 0)
			break;
		if (errno == ENOENT) {
			/* Made 0700: owned and opened before it is widened. */
			if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST)
				return errno;
			continue;
		}
		if (errno != ELOOP && errno != ENOTDIR)
			return errno;
		/* A symlink or a file at the name: it goes, not its target. */
		if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT)
			return errno;
	}
	if (d < 0)
		return EAGAIN;
	if (fstat(d, &st) != 0 || (st.st_uid != uid && fchown(d, uid, gid) !=
	    0) || (st.st_gid != gid && fchown(d, (uid_t)-1, gid) != 0) ||
	    ((st.st_mode & 07777) != mode && fchmod(d, mode) != 0)) {
		int e = errno;

		close(d);
		return e;
	}
	*fd = d;
	return 0;
}

int
tn_dir_module(int dirfd, const char *name, const struct tn_owner *o, int *fd)
{
	if (o == NULL || o->uid == (uid_t)-1)
		return subdir(dirfd, name, geteuid(), getegid(), 0700, fd);
	return subdir(dirfd, name, geteuid(), o->gid, 0750, fd);
}

int
tn_dir_private(int dirfd, const char *name, int *fd)
{
	return subdir(dirfd, name, geteuid(), getegid(), 0700, fd);
}

int
tn_file_put(int dirfd, const char *name, const void *data, size_t len,
    const struct tn_owner *o)
{
	char tmp[4 + 2 * 8 + 1];
	uint8_t rnd[8];
	const uint8_t *p = data;
	int fd = -1, rc = 0, tries;

	if (!tn_name_ok(name))
		return TL_EINVAL;
	for (tries = 0; fd < 0 && tries < 8; tries++) {
		randombytes_buf(rnd, sizeof(rnd));
		memcpy(tmp, ".tn-", 4);
		sodium_bin2hex(tmp + 4, sizeof(tmp) - 4, rnd, sizeof(rnd));
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return errno;
	}
	if (fd < 0)
		return EEXIST;
	/* Owned and moded before a byte is in it. */
	if (o != NULL && o->uid != (uid_t)-1) {
		if (fchown(fd, o->uid, o->gid) != 0 || fchmod(fd, 0400) != 0)
			rc = errno;
	} else if (fchmod(fd, 0600) != 0)
		rc = errno;
	while (rc == 0 && len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			rc = errno;
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (rc == 0 && fsync(fd) != 0)
		rc = errno;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	if (rc == 0 && renameat(dirfd, tmp, dirfd, name) != 0)
		rc = errno;
	if (rc == 0 && fsync(dirfd) != 0)
		rc = errno;
	if (rc != 0)
		unlinkat(dirfd, tmp, 0);
	return rc;
}

int
tn_file_del(int dirfd, const char *name)
{
	if (!tn_name_ok(name))
		return TL_EINVAL;
	if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT)
		return errno;
	return 0;
}

int
tn_dir_del(int dirfd, const char *name, int *n)
{
	DIR *d;
	struct dirent *de;
	int fd, rc = 0;

	*n = 0;
	if (!tn_name_ok(name))
		return TL_EINVAL;
	if ((fd = openat(dirfd, name, DIRFLAGS)) < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != ELOOP && errno != ENOTDIR)
			return errno;
		/* Not a directory of ours: the name goes, not its target. */
		return tn_file_del(dirfd, name);
	}
	if ((d = fdopendir(fd)) == NULL) {
		rc = errno;
		close(fd);
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") ==
		    0)
			continue;
		if (unlinkat(fd, de->d_name, 0) == 0) {
			if (de->d_name[0] != '.')
				(*n)++;
		} else if (errno != ENOENT && rc == 0)
			rc = errno;
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT &&
	    rc == 0)
		rc = errno;
	return rc;
}

int
tn_file_open(int dirfd, const char *name, FILE **fp)
{
	struct stat st;
	int fd;

	*fp = NULL;
	if (!tn_name_ok(name))
		return TL_EINVAL;
	if ((fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
	    O_NONBLOCK)) < 0)
		return errno == ELOOP ? TL_EINVAL : errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		close(fd);
		return TL_EINVAL;
	}
	if ((*fp = fdopen(fd, "r")) == NULL) {
		int e = errno;

		close(fd);
		return e;
	}
	return 0;
}

int
tn_dir_list(int dirfd, DIR **dir)
{
	int fd;

	if ((fd = openat(dirfd, ".", DIRFLAGS)) < 0)
		return errno;
	if ((*dir = fdopendir(fd)) == NULL) {
		int e = errno;

		close(fd);
		return e;
	}
	return 0;
}
