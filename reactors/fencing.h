/*
 * fencing.h - each provider's fence and transport, as this build's
 * drivers declare them and the record's settings choose.
 *
 * Shared by tally status (and its replays, so that a replay's status is
 * the document status printed then) and tally-board.  Declarations and
 * the graph only: no provider session.
 */
#ifndef TL_RX_FENCING_H
#define TL_RX_FENCING_H

#include <jansson.h>

#include "projections/record.h"

/*
 * *out, a new object: {ID: [{driver, kind, how, window, transport?:
 * {host, tls (off | require | verify), ca, client_cert, mesh_ca,
 * warning?}}]} for each provider of the graph and each of its types;
 * transport only for a driver that reaches its provider over a network
 * (a setting tls), the host by the settings' use or else the node's
 * routable name, warning what would make tallyd refuse or expose the
 * admin credentials.  0, ENOMEM or the graph's errors.
 */
int	tl_rx_fencing(struct tl_txn *t, const struct tl_proj *p, json_t **out);

#endif
