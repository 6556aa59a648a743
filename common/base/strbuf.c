/*
 * strbuf.c - the growable text buffer and the error-buffer printf
 * (contract in strbuf.h).
 */
#include "trellara/strbuf.h"

#include "trellara/xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char strbuf_empty[1];

void strbuf_init(struct strbuf *sb)
{
	sb->buf = strbuf_empty;
	sb->len = sb->alloc = 0;
}

void strbuf_grow(struct strbuf *sb, size_t extra)
{
	if (extra > SIZE_MAX - sb->len - 1)
		abort(); /* a text this long cannot be allocated anyway */
	size_t need = sb->len + extra + 1;
	if (need <= sb->alloc)
		return;
	size_t alloc = sb->alloc ? sb->alloc : 64;
	while (alloc < need)
		alloc = alloc > SIZE_MAX / 2 ? need : 2 * alloc;
	if (sb->alloc == 0) {
		sb->buf = xmalloc(alloc);
		sb->buf[0] = '\0';
	} else {
		sb->buf = xrealloc(sb->buf, alloc);
	}
	sb->alloc = alloc;
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	strbuf_grow(sb, len);
	if (len)
		memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void strbuf_adds(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, char c)
{
	strbuf_add(sb, &c, 1);
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list copy;
	va_copy(copy, ap);
	int n = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (n < 0)
		abort(); /* an invalid format is a programming error */
	strbuf_grow(sb, (size_t)n);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

void strbuf_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->alloc)
		sb->buf[0] = '\0';
}

void strbuf_release(struct strbuf *sb)
{
	if (sb->alloc)
		free(sb->buf);
	strbuf_init(sb);
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
	char *s = sb->alloc ? sb->buf : xstrdup("");
	if (len)
		*len = sb->len;
	strbuf_init(sb);
	return s;
}

int errbuf_vsetf(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (err && errlen > 0)
		vsnprintf(err, errlen, fmt, ap);
	return -1;
}

int errbuf_setf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	errbuf_vsetf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

void strbuf_add_shell_quoted(struct strbuf *sb, const char *word)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";
	if (*word && strspn(word, safe) == strlen(word)) {
		strbuf_adds(sb, word);
		return;
	}
	strbuf_addch(sb, '\'');
	for (const char *p = word; *p; p++) {
		if (*p == '\'')
			strbuf_adds(sb, "'\\''");
		else
			strbuf_addch(sb, *p);
	}
	strbuf_addch(sb, '\'');
}

char *strbuf_shell_quote(const char *word)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_add_shell_quoted(&sb, word);
	return strbuf_detach(&sb, NULL);
}
