#include "trellara/stream_exit.h"

#include "trellara/defaults.h"
#include "trellara/stream.h"

int stream_exit_code(int status, enum stream_origin origin)
{
	switch (status) {
	case STREAM_OK:
	case STREAM_END:
		return EXIT_OK;
	case STREAM_ECORRUPT:
		return EXIT_DATAERR;
	case STREAM_EIO:
	case STREAM_ENOSPC:
		return EXIT_CANTCREAT;
	case STREAM_ELOCKED:
		return EXIT_TEMPFAIL;
	case STREAM_EUNAVAILABLE:
		return EXIT_UNAVAILABLE;
	case STREAM_EINVAL:
		return origin == STREAM_FROM_ARGUMENT ? EXIT_USAGE : origin == STREAM_FROM_CONFIG ? EXIT_CONFIG : EXIT_DATAERR;
	case STREAM_ERANGE:
		return origin == STREAM_FROM_ARGUMENT ? EXIT_USAGE : EXIT_DATAERR;
	default:
		return EXIT_DATAERR;
	}
}
