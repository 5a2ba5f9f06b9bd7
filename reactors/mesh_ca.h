/*
 * mesh_ca.h - the mesh CA's certificate, as the graph records it.
 *
 * The mesh's one CA is the provider whose driver is declared
 * one-per-mesh and issues certificates (drivers/decl.h: instances,
 * TL_DRV_CRED_CERTIFICATE); its certificate is the assignment's setting
 * of use TL_DRV_USE_ADMIN_CERT.  A provider assigned tls=verify without
 * a ca of its own is verified against it (tl_rx_load_provider), its
 * consumers are given it, and tally status says so.  Declarations
 * only: the CLI links it.
 */
#ifndef TL_RX_MESH_CA_H
#define TL_RX_MESH_CA_H

#include <stddef.h>

#include "projections/record.h"

/*
 * The certificate (PEM, NUL-terminated) into out (cap bytes) in the
 * caller's transaction.  TL_ENOTFOUND: the mesh has none (out "");
 * the log's errors.
 */
int	tl_rx_mesh_ca(struct tl_txn *t, const struct tl_proj *p, char *out,
	    size_t cap);

/*
 * The mesh CA's provider id (NODE/MODULE, 130 bytes) and its type (64
 * bytes): who signs the certificates of logins by certificate
 * (reactors/issue.c).  TL_ENOTFOUND: the mesh has none.
 */
int	tl_rx_mesh_ca_provider(struct tl_txn *t, const struct tl_proj *p,
	    char id[130], char type[64]);

/*
 * The certificate, as tl_rx_mesh_ca, into *pem (malloc'd, the caller
 * frees it), NULL when the mesh has none: what a pass reads once for
 * the logins by certificate it holds a provider to (tl_drv_grant
 * cert_ca).  0, ENOMEM, or the log's errors.
 */
int	tl_rx_mesh_ca_dup(struct tl_txn *t, const struct tl_proj *p,
	    char **pem);

#endif
