/* SPDX-License-Identifier: Apache-2.0 */
/* The comm's progress thread: it drives the transports while it has users
 * (threads waiting in the bootstrap, port channels) and drains what the
 * module above registered (the port channels' FIFOs). */
#ifndef WEFT_CORE_PROGRESS_H
#define WEFT_CORE_PROGRESS_H

#include "base.h"

/* Drains every port channel of comm once: how many triggers it ran, or a
 * negative error that fails the comm; *pending is set when work is in flight
 * (a flush not yet complete). Called by the progress thread only. */
typedef int (*weft__drain_fn)(weft_comm_t *comm, int *pending);
/* Sets the drain the progress thread calls on each round (port.c does, at its
 * first port channel). Thread safety: any thread. */
void weft__progress_set_drain(weft_comm_t *comm, weft__drain_fn drain);
/* The same for the receive side of staged connections (stage.c). */
void weft__progress_set_stage_drain(weft_comm_t *comm, weft__drain_fn drain);

/* Around waits in the bootstrap, and for each port channel: the progress
 * thread runs (started at the first hold) and progresses the transports
 * meanwhile. hold returns 0 or an error; release undoes one successful hold. */
int weft__progress_hold(weft_comm_t *comm);
void weft__progress_release(weft_comm_t *comm);
/* Stops the progress thread (after every port is gone and no hold is left). */
void weft__proxy_stop(weft_comm_t *comm);

#endif
