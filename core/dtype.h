/* SPDX-License-Identifier: Apache-2.0 */
/* Names and validity of datatypes, reductions, collectives and memory types
 * (dtype.c): a leaf the collective modules share. */
#ifndef WEFT_CORE_DTYPE_H
#define WEFT_CORE_DTYPE_H

/* 1 when the value is a datatype / reduction weft.h names, else 0. */
int weft__dtype_valid(int t);
int weft__redop_valid(int op);
/* "allreduce", ...; "host", "cuda", "hip": an "unknown ..." string otherwise. */
const char *weft__coll_name(int c);
const char *weft__mem_name(int m);

#endif
