/*
 * banned.h - functions that are easy to misuse, made compile errors
 * (git does the same).  Use snprintf, strbuf-style helpers, memcpy with
 * explicit lengths.
 */
#ifndef TRELLARA_BANNED_H
#define TRELLARA_BANNED_H

#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)
#undef strcat
#define strcat(x, y) BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) BANNED(strncpy)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef gets
#define gets(x) BANNED(gets)

#endif
