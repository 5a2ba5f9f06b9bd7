/*
 * version.h - the version of tally: the one place it is written.
 *
 * TL_VERSION is the release.  The build may stamp the git description
 * of the tree it built (GNUmakefile passes -DTL_VERSION_GIT="..." from
 * `git describe --always --dirty` when git knows the tree; a tarball
 * builds without it).  TL_VERSION_STRING is what --version prints.
 */
#ifndef TL_VERSION_H
#define TL_VERSION_H

#define TL_VERSION	"0.11.0"

#ifdef TL_VERSION_GIT
#define TL_VERSION_STRING	TL_VERSION " (" TL_VERSION_GIT ")"
#else
#define TL_VERSION_STRING	TL_VERSION
#endif

#endif
