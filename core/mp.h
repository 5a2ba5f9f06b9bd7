/*
 * mp.h - tally's msgpack, read and written: under the envelope, the
 * body reader and builder, the JSON renderer and the publisher.
 * Bounded, no allocation; inline, since it runs several times for every
 * event folded.  A read's payload pointers point into the caller's
 * bytes and live as long as they do; a read past end or of bytes that
 * are not msgpack returns -1 and leaves *pp where it was.  Writers
 * write into room the caller made (they cannot fail, and check
 * nothing).
 */
#ifndef TL_MP_H
#define TL_MP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * msgpack-c's unpacker allocates each container's entries before it
 * knows whether the bytes are there, so five bytes claiming a map of
 * 2^32 entries make it ask for 192 GiB.  Records and bodies are read
 * here instead, with every count bounded by the bytes left.  It accepts
 * what msgpack-c accepts, including its limit of TL_MP_DEPTH open
 * containers, so a body that passes here also passes msgpack-c, which
 * the tests use as the reference (tests/check_body.c, fuzz_body).
 */
#define TL_MP_DEPTH	32	/* msgpack-c's MSGPACK_EMBED_STACK_SIZE */

enum tl_mp_kind {
	TL_MP_NIL, TL_MP_BOOL, TL_MP_UINT, TL_MP_NINT, TL_MP_FLOAT,
	TL_MP_STR, TL_MP_BIN, TL_MP_EXT, TL_MP_ARR, TL_MP_MAP
};

struct tl_mp_item {
	enum tl_mp_kind	 kind;
	uint64_t	 u;	/* UINT: the value; ARR, MAP: the count */
	const uint8_t	*ptr;	/* STR, BIN, EXT: the payload */
	size_t		 len;
};

static inline uint64_t
tl_mp_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	while (n-- > 0)
		v = (v << 8) | *p++;
	return v;
}

/*
 * Reads one item at *pp (for str, bin and ext its payload too; for
 * containers only the header) and advances *pp past it.  -1 if it is
 * not msgpack or does not fit before end.
 */
static inline int
tl_mp_read(const uint8_t **pp, const uint8_t *end, struct tl_mp_item *it)
{
	const uint8_t *p = *pp;
	size_t left = (size_t)(end - p), hdr = 1, w = 0, n = 0;
	uint8_t c;

	if (left == 0)
		return -1;
	c = p[0];
	it->u = 0;
	it->ptr = NULL;
	it->len = 0;
	if (c <= 0x7f) {
		it->kind = TL_MP_UINT;
		it->u = c;
	} else if (c <= 0x8f) {
		it->kind = TL_MP_MAP;
		it->u = c & 0x0f;
	} else if (c <= 0x9f) {
		it->kind = TL_MP_ARR;
		it->u = c & 0x0f;
	} else if (c <= 0xbf) {
		it->kind = TL_MP_STR;
		n = c & 0x1f;
	} else if (c >= 0xe0) {
		it->kind = TL_MP_NINT;
	} else {
		switch (c) {
		case 0xc0:
			it->kind = TL_MP_NIL;
			break;
		case 0xc2: case 0xc3:
			it->kind = TL_MP_BOOL;
			it->u = c & 1;
			break;
		case 0xc4: case 0xc5: case 0xc6:	/* bin 8/16/32 */
			it->kind = TL_MP_BIN;
			w = (size_t)1 << (c - 0xc4);
			break;
		case 0xc7: case 0xc8: case 0xc9:	/* ext 8/16/32 */
			it->kind = TL_MP_EXT;
			w = (size_t)1 << (c - 0xc7);
			break;
		case 0xca:
			it->kind = TL_MP_FLOAT;
			hdr = 5;
			break;
		case 0xcb:
			it->kind = TL_MP_FLOAT;
			hdr = 9;
			break;
		case 0xcc: case 0xcd: case 0xce: case 0xcf:
			it->kind = TL_MP_UINT;
			hdr = 1 + ((size_t)1 << (c - 0xcc));
			break;
		case 0xd0: case 0xd1: case 0xd2: case 0xd3:
			it->kind = TL_MP_UINT;	/* or TL_MP_NINT, below */
			hdr = 1 + ((size_t)1 << (c - 0xd0));
			break;
		case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
			it->kind = TL_MP_EXT;	/* fixext: type, then data */
			hdr = 2;
			n = (size_t)1 << (c - 0xd4);
			break;
		case 0xd9: case 0xda: case 0xdb:	/* str 8/16/32 */
			it->kind = TL_MP_STR;
			w = (size_t)1 << (c - 0xd9);
			break;
		case 0xdc: case 0xdd:
			it->kind = TL_MP_ARR;
			w = c == 0xdc ? 2 : 4;
			break;
		case 0xde: case 0xdf:
			it->kind = TL_MP_MAP;
			w = c == 0xde ? 2 : 4;
			break;
		default:				/* 0xc1: never used */
			return -1;
		}
	}
	if (w > 0) {
		/* A length or count of w bytes follows the type byte. */
		hdr = 1 + w + (it->kind == TL_MP_EXT);
		if (left < hdr)
			return -1;
		if (it->kind == TL_MP_ARR || it->kind == TL_MP_MAP)
			it->u = tl_mp_be(p + 1, w);
		else
			n = (size_t)tl_mp_be(p + 1, w);
	} else if (left < hdr)
		return -1;
	if (c >= 0xcc && c <= 0xd3) {
		it->u = tl_mp_be(p + 1, hdr - 1);
		/* Signed and negative: msgpack-c's NEGATIVE_INTEGER. */
		if (c >= 0xd0 && (p[1] & 0x80))
			it->kind = TL_MP_NINT;
	}
	if (n > left - hdr)
		return -1;
	it->ptr = p + hdr;
	it->len = n;
	*pp = p + hdr + n;
	return 0;
}

/*
 * Skips one whole item at *pp, checking it all.  *kind (if not NULL)
 * receives the kind of the outer item.  -1 if it is not msgpack, is
 * nested too deeply or does not fit before end.
 */
static inline int
tl_mp_skip(const uint8_t **pp, const uint8_t *end, enum tl_mp_kind *kind)
{
	uint64_t stack[TL_MP_DEPTH], todo = 1;
	struct tl_mp_item it;
	int top = 0;

	for (;;) {
		if (tl_mp_read(pp, end, &it) != 0)
			return -1;
		if (kind != NULL) {
			*kind = it.kind;
			kind = NULL;
		}
		todo--;
		if (it.kind == TL_MP_ARR || it.kind == TL_MP_MAP) {
			uint64_t n = it.kind == TL_MP_MAP ? it.u * 2 : it.u;

			if (top == TL_MP_DEPTH)
				return -1;
			/* Every entry takes a byte at least. */
			if (n > (uint64_t)(end - *pp))
				return -1;
			if (n > 0) {
				stack[top++] = todo;
				todo = n;
			}
		}
		while (todo == 0) {
			if (top == 0)
				return 0;
			todo = stack[--top];
		}
	}
}


/*
 * Writing: the smallest form of every value, the same bytes msgpack-c's
 * packer writes (tests/check_body.c compares the two).  The caller has
 * made room: at most TL_MP_HDR_MAX bytes of header, then the payload.
 */
#define TL_MP_HDR_MAX	9

static inline uint8_t *
tl_mp_put_be(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
	return p + n;
}

static inline uint8_t *
tl_mp_put_uint(uint8_t *p, uint64_t v)
{
	if (v < 0x80) {
		*p++ = (uint8_t)v;
		return p;
	}
	if (v <= 0xff) {
		*p++ = 0xcc;
		return tl_mp_put_be(p, v, 1);
	}
	if (v <= 0xffff) {
		*p++ = 0xcd;
		return tl_mp_put_be(p, v, 2);
	}
	if (v <= 0xffffffffULL) {
		*p++ = 0xce;
		return tl_mp_put_be(p, v, 4);
	}
	*p++ = 0xcf;
	return tl_mp_put_be(p, v, 8);
}

/* As msgpack_pack_int64: positive values take the unsigned forms. */
static inline uint8_t *
tl_mp_put_int(uint8_t *p, int64_t v)
{
	if (v >= 0)
		return tl_mp_put_uint(p, (uint64_t)v);
	if (v >= -32) {
		*p++ = (uint8_t)(0xe0 | (v + 32));
		return p;
	}
	if (v >= INT8_MIN) {
		*p++ = 0xd0;
		return tl_mp_put_be(p, (uint64_t)v, 1);
	}
	if (v >= INT16_MIN) {
		*p++ = 0xd1;
		return tl_mp_put_be(p, (uint64_t)v, 2);
	}
	if (v >= INT32_MIN) {
		*p++ = 0xd2;
		return tl_mp_put_be(p, (uint64_t)v, 4);
	}
	*p++ = 0xd3;
	return tl_mp_put_be(p, (uint64_t)v, 8);
}

/*
 * A length in the smallest of three forms: tag8 then 1 byte, tag8 + 1
 * then 2, tag8 + 2 then 4 (str, bin and ext all number them so).
 */
static inline uint8_t *
tl_mp_put_len(uint8_t *p, uint8_t tag8, size_t n)
{
	if (n <= 0xff) {
		*p++ = tag8;
		return tl_mp_put_be(p, n, 1);
	}
	if (n <= 0xffff) {
		*p++ = (uint8_t)(tag8 + 1);
		return tl_mp_put_be(p, n, 2);
	}
	*p++ = (uint8_t)(tag8 + 2);
	return tl_mp_put_be(p, n, 4);
}

/* A str, bin or ext header for a payload of n bytes (ext: of type). */
static inline uint8_t *
tl_mp_put_str_hdr(uint8_t *p, size_t n)
{
	if (n < 32) {
		*p++ = (uint8_t)(0xa0 | n);
		return p;
	}
	return tl_mp_put_len(p, 0xd9, n);
}

static inline uint8_t *
tl_mp_put_bin_hdr(uint8_t *p, size_t n)
{
	return tl_mp_put_len(p, 0xc4, n);
}

static inline uint8_t *
tl_mp_put_ext_hdr(uint8_t *p, size_t n, int8_t type)
{
	switch (n) {
	case 1:  *p++ = 0xd4; break;
	case 2:  *p++ = 0xd5; break;
	case 4:  *p++ = 0xd6; break;
	case 8:  *p++ = 0xd7; break;
	case 16: *p++ = 0xd8; break;
	default: p = tl_mp_put_len(p, 0xc7, n); break;
	}
	*p++ = (uint8_t)type;
	return p;
}

/* A map (of n entries) or array (of n items) header. */
static inline uint8_t *
tl_mp_put_hdr(uint8_t *p, int ismap, uint32_t n)
{
	if (n < 16) {
		*p++ = (uint8_t)((ismap ? 0x80 : 0x90) | n);
		return p;
	}
	if (n <= 0xffff) {
		*p++ = ismap ? 0xde : 0xdc;
		return tl_mp_put_be(p, n, 2);
	}
	*p++ = ismap ? 0xdf : 0xdd;
	return tl_mp_put_be(p, n, 4);
}

static inline uint8_t *
tl_mp_put_str(uint8_t *p, const char *s, size_t n)
{
	p = tl_mp_put_str_hdr(p, n);
	memcpy(p, s, n);
	return p + n;
}

#endif
