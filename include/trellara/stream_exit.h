/*
 * stream_exit.h - the one map from a stream status (stream.h) to a
 * program's exit code (defaults.h, DESIGN §10).  Pure; tested by
 * tests/unit/test_stream_exit.c.
 *
 * Most statuses mean one thing wherever they come from:
 *
 *   STREAM_OK, STREAM_END   0   (EXIT_OK)
 *   STREAM_ECORRUPT        65   (EXIT_DATAERR: an invalid frame before the tail,
 *                                a malformed group file)
 *   STREAM_EIO             73   (EXIT_CANTCREAT: a system call on the stream failed)
 *   STREAM_ENOSPC          73   (EXIT_CANTCREAT: below min_free_bytes)
 *   STREAM_ELOCKED         75   (EXIT_TEMPFAIL: another writer holds the lock)
 *   STREAM_EUNAVAILABLE    69   (EXIT_UNAVAILABLE: a JetStream stream's servers
 *                                do not answer, or have no quorum)
 *
 * STREAM_EINVAL and STREAM_ERANGE say that something the caller handed to
 * the stream was wrong; whose mistake that is depends on where the value
 * came from, so the caller names it:
 *
 *                            EINVAL            ERANGE
 *   STREAM_FROM_ARGUMENT     64 (EXIT_USAGE)   64     a directory or offset given on
 *                                                     the command line (no stream there,
 *                                                     an offset removed or not written)
 *   STREAM_FROM_CONFIG       78 (EXIT_CONFIG)  65     a configured stream a writer opens
 *                                                     (meta unreadable, another flow)
 *   STREAM_FROM_DATA         65 (EXIT_DATAERR) 65     frames and positions the program
 *                                                     read or was fed (an oversized or
 *                                                     unknown frame, an offset a
 *                                                     checkpoint needs that the stream
 *                                                     no longer holds)
 *
 * Any other value is 65: fail closed, never success.
 */
#ifndef TRELLARA_STREAM_EXIT_H
#define TRELLARA_STREAM_EXIT_H

enum stream_origin { STREAM_FROM_ARGUMENT = 0, STREAM_FROM_CONFIG, STREAM_FROM_DATA };

int stream_exit_code(int status, enum stream_origin origin);

#endif
