/*
 * strbuf.h - the one growable text buffer (git's strbuf is the model), and
 * the one printf into a caller's fixed-size error buffer.
 *
 * A struct strbuf owns its text: buf is always a valid NUL-terminated
 * string (the static "" until the first addition, so a strbuf from
 * STRBUF_INIT or strbuf_init can be printed at once), len is strlen(buf)
 * unless bytes holding NUL were added with strbuf_add.  Growing aborts on
 * out-of-memory (xalloc), so no function here fails.  strbuf_release frees
 * the text and leaves an empty buffer; strbuf_detach hands the text (never
 * NULL) to the caller, who frees it, and leaves an empty buffer.
 *
 * Binary framing (the envelope codec) uses struct buf of envelope.h, a
 * byte buffer that is not NUL-terminated; text uses strbuf (docs/DESIGN.md).
 */
#ifndef TRELLARA_STRBUF_H
#define TRELLARA_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

struct strbuf {
	char *buf;    /* owned when alloc > 0; the static "" otherwise */
	size_t len;   /* bytes before the terminating NUL */
	size_t alloc; /* bytes allocated at buf, 0 while buf is the static "" */
};

extern char strbuf_empty[];
#define STRBUF_INIT { .buf = strbuf_empty, .len = 0, .alloc = 0 }

void strbuf_init(struct strbuf *sb);
/* Makes room for extra more bytes (and the NUL) without changing the text. */
void strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_adds(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Empties the text, keeping the allocation. */
void strbuf_reset(struct strbuf *sb);
/* Frees the text; sb is empty (and reusable) afterwards. */
void strbuf_release(struct strbuf *sb);
/* Ownership of the text (never NULL, "" when empty) passes to the caller;
 * sb is empty afterwards. */
char *strbuf_detach(struct strbuf *sb, size_t *len);

/* A word for a POSIX shell, for the commands hints print ("trellara
 * snapshot --config PATH"): bare when it is not empty and only of
 * characters no shell treats specially (letters, digits, _-./=:,+@%),
 * else in single quotes with each quote written '\''.  Pasted into a
 * shell it gives back word exactly.  strbuf_add_shell_quoted appends it;
 * strbuf_shell_quote returns it newly allocated (the caller frees it). */
void strbuf_add_shell_quoted(struct strbuf *sb, const char *word);
char *strbuf_shell_quote(const char *word);

/* printf into err[errlen] (truncated, always terminated; nothing when err
 * is NULL or errlen is 0).  Returns -1, so "return errbuf_setf(...)" both
 * reports and fails. */
int errbuf_setf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int errbuf_vsetf(char *err, size_t errlen, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

#endif
