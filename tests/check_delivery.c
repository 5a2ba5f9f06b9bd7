/*
 * check_delivery.c - the node's wire format of a delivery (core/
 * delivery.h): format 3 round trips every byte value in names' values,
 * truncated and overlong frames are refused at every length, the
 * format 2 text is read strictly (a value's newline cannot forge a
 * header), and env-file lines are refused or quoted by systemd's rules.
 * Format 4: files and values with references round trip and resolve;
 * hostile framing (references out of order, past the value, to a file
 * the delivery lacks; bad or repeated file names; a format 3 magic on
 * format 4 items; truncation at every byte) is refused whole.
 */
#define _GNU_SOURCE

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/delivery.h"
#include "core/error.h"

static const uint8_t proof[TL_DLV_PROOF_LEN] = {
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32
};

/* A delivery with every byte value, alone and all together. */
static void
build(struct tl_dlv_enc *e, uint8_t *all)
{
	char name[16];
	int b;

	tl_dlv_enc_begin(e, "game/db", "game@node-a", 7, proof);
	tl_dlv_enc_var(e, 1, "LOG_LEVEL", 9, "info", 4);
	for (b = 0; b < 256; b++) {
		uint8_t v = (uint8_t)b;

		all[b] = v;
		snprintf(name, sizeof(name), "V%03d", b);
		tl_dlv_enc_var(e, 0, name, 4, &v, 1);
	}
	tl_dlv_enc_var(e, 0, "ALL", 3, all, 256);
	tl_dlv_enc_var(e, 0, "EMPTY", 5, "", 0);
}

START_TEST(test_round_trip)
{
	struct tl_dlv_enc e;
	struct tl_dlv d;
	uint8_t all[256];
	const uint8_t *p;
	size_t len, i;

	build(&e, all);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	ck_assert_int_eq(tl_dlv_decode(p, len, &d), 0);
	ck_assert_int_eq(d.format, 3);
	ck_assert_str_eq(d.grant, "game/db");
	ck_assert_str_eq(d.holder, "game@node-a");
	ck_assert_uint_eq(d.version, 7);
	ck_assert_mem_eq(d.proof, proof, sizeof(proof));
	ck_assert_uint_eq(d.nvars, 1 + 256 + 2);
	ck_assert_int_eq(d.vars[0].is_default, 1);
	ck_assert_uint_eq(d.vars[0].name_len, 9);
	ck_assert_mem_eq(d.vars[0].value, "info", 4);
	for (i = 0; i < 256; i++) {
		char name[32];

		snprintf(name, sizeof(name), "V%03zu", i);
		ck_assert_int_eq(d.vars[1 + i].is_default, 0);
		ck_assert_mem_eq(d.vars[1 + i].name, name, 4);
		ck_assert_uint_eq(d.vars[1 + i].value_len, 1);
		ck_assert_uint_eq(d.vars[1 + i].value[0], i);
	}
	ck_assert_uint_eq(d.vars[257].value_len, 256);
	ck_assert_mem_eq(d.vars[257].value, all, 256);
	ck_assert_uint_eq(d.vars[258].value_len, 0);
	tl_dlv_free(&d);
	tl_dlv_enc_free(&e);
}
END_TEST

START_TEST(test_truncated_and_overlong)
{
	struct tl_dlv_enc e;
	struct tl_dlv d;
	uint8_t all[256], *buf;
	const uint8_t *p;
	size_t len, n;

	build(&e, all);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	/* Every prefix is refused: no length is trusted past the end. */
	for (n = 0; n < len; n++)
		ck_assert_int_eq(tl_dlv_decode(p, n, &d), TL_EMALFORMED);
	/* One byte more, or a whole frame more: refused. */
	ck_assert_ptr_nonnull(buf = malloc(len + 16));
	memcpy(buf, p, len);
	buf[len] = 0;
	ck_assert_int_eq(tl_dlv_decode(buf, len + 1, &d), TL_EMALFORMED);
	memcpy(buf + len, "v\0\1X\0\0\0\0", 8);
	ck_assert_int_eq(tl_dlv_decode(buf, len + 8, &d), TL_EMALFORMED);
	/* A count larger than the frames given. */
	memcpy(buf, p, len);
	buf[4 + 2 + 7 + 2 + 11 + 8 + TL_DLV_PROOF_LEN + 3] += 1;
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	/* A value's length beyond the end (the last one, "EMPTY"). */
	memcpy(buf, p, len);
	buf[len - 1] = 1;
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	/* A kind that is neither 'd' nor 'v'. */
	memcpy(buf, p, len);
	buf[4 + 2 + 7 + 2 + 11 + 8 + TL_DLV_PROOF_LEN + 4] = 'x';
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	free(buf);
	tl_dlv_enc_free(&e);
}
END_TEST

START_TEST(test_encoder_refuses)
{
	struct tl_dlv_enc e;
	const uint8_t *p;
	size_t len;

	tl_dlv_enc_begin(&e, "game/db", "game@node-a", 0, proof);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_free(&e);
	tl_dlv_enc_begin(&e, "game/db", "game@node-a", 1, proof);
	tl_dlv_enc_var(&e, 0, "A\0B", 3, "x", 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_free(&e);
	tl_dlv_enc_begin(&e, "", "game@node-a", 1, proof);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_free(&e);
}
END_TEST

#define PROOF2 "#proof 0102030405060708090a0b0c0d0e0f10" \
	"1112131415161718191a1b1c1d1e1f20\n"

START_TEST(test_v2_strict)
{
	static const char ok[] = "#tally grant=game/db holder=game@node-a "
	    "version=3\n" PROOF2 "#default LOG_LEVEL=info\nDB_URI=pg://u:p@h/d?"
	    "a=b\nEMPTY=\n";
	/* What a client id "id\n#tally ..." made of a delivery of before. */
	static const char forged[] = "#tally grant=game/db holder=game@node-a "
	    "version=3\n" PROOF2 "ID=id\n#tally grant=other/db holder="
	    "other@node-a version=99\n";
	static const char nonl[] = "#tally grant=game/db holder=game@node-a "
	    "version=3\n" PROOF2 "ID=id\nMODULE other\n";
	static const char late[] = "ID=x\n#tally grant=game/db holder="
	    "game@node-a version=3\n" PROOF2;
	static const char *bad[] = {
		"#tally grant=game/db holder=game@node-a version=0\n" PROOF2,
		"#tally grant=game/db holder=game@node-a version=3 x=1\n" PROOF2,
		"#tally grant=game/db version=3\n" PROOF2,
		"#tally grant=game/db holder=game@node-a version=3\n#proof 01\n",
		"#tally grant=game/db holder=game@node-a version=3\n" PROOF2
		    "A=1",
		"#tally grant=game/db holder=game@node-a version=3\n" PROOF2
		    "=1\n",
		"#tally grant=game/db holder=game@node-a version=3\n" PROOF2
		    PROOF2,
	};
	struct tl_dlv d;
	size_t i;

	ck_assert_int_eq(tl_dlv_decode(ok, sizeof(ok) - 1, &d), 0);
	ck_assert_int_eq(d.format, 2);
	ck_assert_str_eq(d.grant, "game/db");
	ck_assert_str_eq(d.holder, "game@node-a");
	ck_assert_uint_eq(d.version, 3);
	ck_assert_mem_eq(d.proof, proof, sizeof(proof));
	ck_assert_uint_eq(d.nvars, 3);
	ck_assert_int_eq(d.vars[0].is_default, 1);
	ck_assert_mem_eq(d.vars[1].value, "pg://u:p@h/d?a=b", 16);
	ck_assert_uint_eq(d.vars[1].value_len, 16);
	ck_assert_uint_eq(d.vars[2].value_len, 0);
	tl_dlv_free(&d);
	ck_assert_int_eq(tl_dlv_decode(forged, sizeof(forged) - 1, &d),
	    TL_EMALFORMED);
	ck_assert_int_eq(tl_dlv_decode(nonl, sizeof(nonl) - 1, &d),
	    TL_EMALFORMED);
	ck_assert_int_eq(tl_dlv_decode(late, sizeof(late) - 1, &d),
	    TL_EMALFORMED);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(tl_dlv_decode(bad[i], strlen(bad[i]), &d) ==
		    TL_EMALFORMED, "accepted: %s", bad[i]);
}
END_TEST

/* Reads back a line as systemd's EnvironmentFile= does, for our output. */
static size_t
systemd_read(const char *line, char *out)
{
	const char *p = strchr(line, '=') + 1;
	size_t o = 0;

	if (*p != '"') {
		while (*p != '\n')
			out[o++] = *p++;
		return o;
	}
	for (p++; *p != '"'; p++) {
		if (*p == '\\' && strchr("\"\\`$", p[1]) != NULL)
			p++;
		out[o++] = *p;
	}
	ck_assert_str_eq(p, "\"\n");
	return o;
}

START_TEST(test_env_lines)
{
	const char *why;
	char out[128], back[128];
	static const char *refused[] = {
		"id\nMODULE other", "a\rb", "a\0b", "\x01", "a\x7f",
		"\xff", "\xc0\x80", "\xed\xa0\x80", "\xef\xbb\xbf",
		"\xef\xb7\x90", "\xf4\x90\x80\x80", "\xe2\x82",
	};
	static const char *kept[] = {
		"", "plain", "pg://u:p@h:5432/d?sslmode=verify-full",
		" lead", "trail ", "a b", "tab\there", "q\"uote", "'single'",
		"back\\slash", "$HOME", "`cmd`", "caf\xc3\xa9", "#hash",
		"\xf0\x9f\x94\x91",
	};
	size_t i, n, lens[] = { 15, 3, 3, 1, 2, 1, 2, 3, 3, 3, 4, 2 };

	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		ck_assert_msg(tl_dlv_env_check("X", 1, refused[i], lens[i],
		    &why) == TL_EINVAL, "kept refused[%zu]", i);
	ck_assert_int_eq(tl_dlv_env_check("1X", 2, "a", 1, &why), TL_EINVAL);
	ck_assert_int_eq(tl_dlv_env_check("X-Y", 3, "a", 1, &why), TL_EINVAL);
	ck_assert_int_eq(tl_dlv_env_check("", 0, "a", 1, &why), TL_EINVAL);
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		size_t vl = strlen(kept[i]);

		ck_assert_int_eq(tl_dlv_env_check("X_1", 3, kept[i], vl, &why),
		    0);
		ck_assert_uint_le(tl_dlv_env_size(3, vl), sizeof(out));
		n = tl_dlv_env_format("X_1", 3, kept[i], vl, out);
		ck_assert_uint_eq(n, strlen(out));
		ck_assert_int_eq(strncmp(out, "X_1=", 4), 0);
		ck_assert_int_eq(out[n - 1], '\n');
		ck_assert_uint_eq(systemd_read(out, back), vl);
		ck_assert_mem_eq(back, kept[i], vl);
	}
	n = tl_dlv_env_format("X", 1, "plain", 5, out);
	ck_assert_str_eq(out, "X=plain\n");
	n = tl_dlv_env_format("X", 1, "a $b", 4, out);
	ck_assert_str_eq(out, "X=\"a \\$b\"\n");
}
END_TEST

/* --- format 4: files and references ---------------------------------- */

#define TOKEN	"0123456789abcdef0123456789abcdef"
#define CA	"ca-00112233445566778899aabbccddeeff.pem"

/* A delivery with a file, values with references, and one without. */
static void
build4(struct tl_dlv_enc *e, uint8_t *pem, size_t pemlen)
{
	static const char url[] = "postgresql://u@h:5432/d?sslmode=verify-full"
	    "&sslrootcert=" TOKEN;
	size_t i;

	for (i = 0; i < pemlen; i++)
		pem[i] = (uint8_t)(i * 7);	/* every byte value, NUL too */
	tl_dlv_enc_begin(e, "game/db", "game@node-a", 3, proof);
	tl_dlv_enc_var(e, 1, "LOG_LEVEL", 9, "info", 4);
	tl_dlv_enc_subst(e, "PGSSLROOTCERT", 13, TOKEN, strlen(TOKEN), TOKEN,
	    CA);
	tl_dlv_enc_subst(e, "URL", 3, url, strlen(url), TOKEN, CA);
	tl_dlv_enc_subst(e, "TWICE", 5, TOKEN TOKEN "x" TOKEN, 97, TOKEN, CA);
	tl_dlv_enc_subst(e, "HOST", 4, "db.mesh", 7, TOKEN, CA);
	tl_dlv_enc_file(e, CA, pem, pemlen);
}

/* x's value resolved against dir, NUL-terminated, in out. */
static const char *
resolved(const struct tl_dlv_var *x, const char *dir, char *out, size_t cap)
{
	size_t n = tl_dlv_resolved_len(x, strlen(dir));

	ck_assert_uint_lt(n, cap);
	tl_dlv_resolve(x, dir, strlen(dir), out);
	out[n] = '\0';
	return out;
}

START_TEST(test_v4_round_trip)
{
	struct tl_dlv_enc e;
	struct tl_dlv d;
	uint8_t pem[3000];
	const uint8_t *p;
	char out[512];
	size_t len;

	build4(&e, pem, sizeof(pem));
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	ck_assert_mem_eq(p, "\0TD4", 4);
	ck_assert_int_eq(tl_dlv_decode(p, len, &d), 0);
	ck_assert_int_eq(d.format, 4);
	ck_assert_uint_eq(d.nfiles, 1);
	ck_assert_uint_eq(d.files[0].name_len, strlen(CA));
	ck_assert_mem_eq(d.files[0].name, CA, strlen(CA));
	ck_assert_uint_eq(d.files[0].content_len, sizeof(pem));
	ck_assert_mem_eq(d.files[0].content, pem, sizeof(pem));
	ck_assert_uint_eq(d.nvars, 5);
	ck_assert_int_eq(d.vars[0].kind, TL_DLV_DEFAULT);
	ck_assert_int_eq(d.vars[0].is_default, 1);
	ck_assert_ptr_null(d.vars[0].refs);
	ck_assert_int_eq(d.vars[1].kind, TL_DLV_REFS);
	ck_assert_int_eq(d.vars[1].is_default, 0);
	ck_assert_uint_eq(d.vars[1].value_len, 0);	/* only the path */
	ck_assert_uint_eq(d.vars[1].nrefs, 1);
	ck_assert_str_eq(resolved(&d.vars[1], "/run/tally/game", out,
	    sizeof(out)), "/run/tally/game/" CA);
	ck_assert_str_eq(resolved(&d.vars[2], "/n", out, sizeof(out)),
	    "postgresql://u@h:5432/d?sslmode=verify-full&sslrootcert=/n/" CA);
	ck_assert_uint_eq(d.vars[3].nrefs, 3);
	ck_assert_uint_eq(d.vars[3].refs[0].offset, 0);
	ck_assert_uint_eq(d.vars[3].refs[1].offset, 0);
	ck_assert_uint_eq(d.vars[3].refs[2].offset, 1);
	ck_assert_str_eq(resolved(&d.vars[3], "/n", out, sizeof(out)),
	    "/n/" CA "/n/" CA "x/n/" CA);
	/* The token is nowhere in what was sent. */
	ck_assert_ptr_null(memmem(p, len, TOKEN, strlen(TOKEN)));
	ck_assert_int_eq(d.vars[4].kind, TL_DLV_VALUE);
	ck_assert_uint_eq(d.vars[4].nrefs, 0);
	ck_assert_str_eq(resolved(&d.vars[4], "/n", out, sizeof(out)),
	    "db.mesh");
	tl_dlv_free(&d);

	/* Restarted with no file and no token: format 3, as before. */
	tl_dlv_enc_restart(&e, "game/db", "game@node-a", 4, proof);
	tl_dlv_enc_subst(&e, "HOST", 4, "db.mesh", 7, TOKEN, CA);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	ck_assert_mem_eq(p, "\0TD3", 4);
	ck_assert_int_eq(tl_dlv_decode(p, len, &d), 0);
	ck_assert_int_eq(d.format, 3);
	ck_assert_uint_eq(d.nfiles, 0);
	ck_assert_int_eq(d.vars[0].kind, TL_DLV_VALUE);
	tl_dlv_free(&d);
	tl_dlv_enc_free(&e);
}
END_TEST

START_TEST(test_v4_truncated_and_overlong)
{
	struct tl_dlv_enc e;
	struct tl_dlv d;
	uint8_t pem[100], *buf;
	const uint8_t *p;
	size_t len, n;

	build4(&e, pem, sizeof(pem));
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	for (n = 0; n < len; n++)
		ck_assert_msg(tl_dlv_decode(p, n, &d) == TL_EMALFORMED,
		    "a prefix of %zu bytes of %zu read", n, len);
	ck_assert_ptr_nonnull(buf = malloc(len + 1));
	memcpy(buf, p, len);
	buf[len] = 0;
	ck_assert_int_eq(tl_dlv_decode(buf, len + 1, &d), TL_EMALFORMED);
	/* Format 4 items under format 3's magic: refused, not skipped. */
	buf[3] = '3';
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	free(buf);
	tl_dlv_enc_free(&e);
}
END_TEST

/* Hand-made frames, for what the encoder never writes. */
struct raw {
	uint8_t	b[200000];
	size_t	n;
};

static void
raw_be(struct raw *r, uint64_t v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		r->b[r->n++] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static void
raw_str(struct raw *r, const char *s, size_t len, size_t lenbytes)
{
	raw_be(r, len, lenbytes);
	memcpy(r->b + r->n, s, len);
	r->n += len;
}

static void
raw_begin(struct raw *r, char format, uint32_t count)
{
	r->n = 0;
	memcpy(r->b, "\0TD", 3);
	r->b[3] = (uint8_t)format;
	r->n = 4;
	raw_str(r, "g", 1, 2);
	raw_str(r, "m@n", 3, 2);
	raw_be(r, 1, 8);
	memcpy(r->b + r->n, proof, TL_DLV_PROOF_LEN);
	r->n += TL_DLV_PROOF_LEN;
	raw_be(r, count, 4);
}

static void
raw_file(struct raw *r, const char *name, size_t nl, size_t clen)
{
	raw_be(r, 'f', 1);
	raw_str(r, name, nl, 2);
	raw_be(r, clen, 4);
	memset(r->b + r->n, 'P', clen);
	r->n += clen;
}

/* An 'r' item: value "abcdef", refs (offset, file) pairs. */
static void
raw_refs(struct raw *r, size_t nrefs, const size_t *off, const char **file)
{
	size_t i;

	raw_be(r, 'r', 1);
	raw_str(r, "X", 1, 2);
	raw_str(r, "abcdef", 6, 4);
	raw_be(r, nrefs, 2);
	for (i = 0; i < nrefs; i++) {
		raw_be(r, off[i], 4);
		raw_str(r, file[i], strlen(file[i]), 2);
	}
}

static int
raw_decode(const struct raw *r)
{
	struct tl_dlv d;
	int rc = tl_dlv_decode(r->b, r->n, &d);

	if (rc == 0)
		tl_dlv_free(&d);
	else
		ck_assert_uint_eq(d.nvars + d.nfiles + d.nrefs, 0);
	return rc;
}

START_TEST(test_v4_hostile)
{
	static struct raw r;
	static const char *bad_names[] = {
		"CA.pem", "-a.pem", "a.PEM", "a/b.pem", ".pem", "a_b.pem",
		"a.pem.pem", "a.crt", "a b.pem", "../a.pem",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.pem",
	};
	const char *f1[] = { "a.pem" }, *f2[] = { "a.pem", "a.pem" },
	    *fx[] = { "b.pem" };
	size_t o0[] = { 0 }, o6[] = { 6 }, o7[] = { 7 }, o31[] = { 3, 1 },
	    o33[] = { 3, 3 };
	size_t i;
	char name[80];

	/* Well formed, to show the frames below fail for their one fault. */
	raw_begin(&r, '4', 2);
	raw_file(&r, "a.pem", 5, 3);
	raw_refs(&r, 1, o6, f1);
	ck_assert_int_eq(raw_decode(&r), 0);
	raw_begin(&r, '4', 2);
	raw_refs(&r, 2, o33, f2);	/* the file after: fine */
	raw_file(&r, "a.pem", 5, 3);
	ck_assert_int_eq(raw_decode(&r), 0);
	memset(name, 'a', sizeof(name));
	memcpy(name + 60, ".pem", 4);	/* 64 bytes: the longest */
	raw_begin(&r, '4', 1);
	raw_file(&r, name, 64, 0);
	ck_assert_int_eq(raw_decode(&r), 0);

	/* An offset past the value's end. */
	raw_begin(&r, '4', 2);
	raw_file(&r, "a.pem", 5, 3);
	raw_refs(&r, 1, o7, f1);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* Offsets out of order. */
	raw_begin(&r, '4', 2);
	raw_file(&r, "a.pem", 5, 3);
	raw_refs(&r, 2, o31, f2);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* A reference to a file the delivery does not hold. */
	raw_begin(&r, '4', 2);
	raw_file(&r, "a.pem", 5, 3);
	raw_refs(&r, 1, o0, fx);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	raw_begin(&r, '4', 1);
	raw_refs(&r, 1, o0, f1);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* No reference at all. */
	raw_begin(&r, '4', 2);
	raw_file(&r, "a.pem", 5, 3);
	raw_refs(&r, 0, NULL, NULL);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* A count of references beyond the bytes. */
	raw_begin(&r, '4', 2);
	raw_file(&r, "a.pem", 5, 3);
	raw_refs(&r, 1, o0, f1);
	r.b[r.n - 5 - 2 - 4 - 2] = 0xff;
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* Bad file names, as a file and as a reference. */
	for (i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		const char *fb[1];

		fb[0] = bad_names[i];
		ck_assert_int_eq(tl_dlv_file_name_ok(bad_names[i],
		    strlen(bad_names[i])), 0);
		raw_begin(&r, '4', 1);
		raw_file(&r, bad_names[i], strlen(bad_names[i]), 3);
		ck_assert_msg(raw_decode(&r) == TL_EMALFORMED, "file %s",
		    bad_names[i]);
		raw_begin(&r, '4', 2);
		raw_file(&r, "a.pem", 5, 3);
		raw_refs(&r, 1, o0, fb);
		ck_assert_msg(raw_decode(&r) == TL_EMALFORMED, "ref %s",
		    bad_names[i]);
	}
	raw_begin(&r, '4', 1);
	raw_file(&r, "a.p\0m", 5, 3);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* Two files of one name. */
	raw_begin(&r, '4', 2);
	raw_file(&r, "a.pem", 5, 3);
	raw_file(&r, "a.pem", 5, 4);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* A file too big; too many files. */
	raw_begin(&r, '4', 1);
	raw_file(&r, "a.pem", 5, TL_DLV_FILE_MAX + 1);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	raw_begin(&r, '4', 1);
	raw_file(&r, "a.pem", 5, TL_DLV_FILE_MAX);
	ck_assert_int_eq(raw_decode(&r), 0);
	raw_begin(&r, '4', TL_DLV_FILES_MAX + 1);
	for (i = 0; i <= TL_DLV_FILES_MAX; i++) {
		snprintf(name, sizeof(name), "f%zu.pem", i);
		raw_file(&r, name, strlen(name), 1);
	}
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* Format 3 knows neither kind. */
	raw_begin(&r, '3', 1);
	raw_file(&r, "a.pem", 5, 3);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	raw_begin(&r, '3', 1);
	raw_refs(&r, 1, o0, f1);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
	/* A magic of no format. */
	raw_begin(&r, '5', 0);
	ck_assert_int_eq(raw_decode(&r), TL_EMALFORMED);
}
END_TEST

START_TEST(test_v4_encoder_refuses)
{
	struct tl_dlv_enc e = TL_DLV_ENC_INIT;
	struct tl_dlv_ref ref = { 0, "a.pem", 5 }, two[2] = {
		{ 3, "a.pem", 5 }, { 1, "a.pem", 5 } };
	static uint8_t big[TL_DLV_FILE_MAX + 1];
	const uint8_t *p;
	size_t len, i;
	char name[16];

	/* A reference to a file never encoded. */
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_refs(&e, "X", 1, "abc", 3, &ref, 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_subst(&e, "X", 1, "a" TOKEN, 33, TOKEN, "a.pem");
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	/* With it: fine. */
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_refs(&e, "X", 1, "abc", 3, &ref, 1);
	tl_dlv_enc_file(&e, "a.pem", "x", 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	/* Two files of one name. */
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_file(&e, "a.pem", "x", 1);
	tl_dlv_enc_file(&e, "a.pem", "y", 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	/* Out of order, past the end, none, a bad name, an empty token. */
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_refs(&e, "X", 1, "abc", 3, two, 2);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	ref.offset = 4;
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_refs(&e, "X", 1, "abc", 3, &ref, 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_refs(&e, "X", 1, "abc", 3, &ref, 0);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_file(&e, "A.pem", "x", 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_subst(&e, "X", 1, "abc", 3, "", "a.pem");
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_subst(&e, "X", 1, "abc", 3, TOKEN, "a/b.pem");
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	/* Too big, too many. */
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	tl_dlv_enc_file(&e, "a.pem", big, sizeof(big));
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_ETOOBIG);
	tl_dlv_enc_restart(&e, "g", "m@n", 1, proof);
	for (i = 0; i <= TL_DLV_FILES_MAX; i++) {
		snprintf(name, sizeof(name), "f%zu.pem", i);
		tl_dlv_enc_file(&e, name, "x", 1);
	}
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_ETOOBIG);
	tl_dlv_enc_free(&e);
}
END_TEST

/*
 * A 'k' item: read back whole; references to its two files resolve
 * like any file's; every prefix and a format 3 magic are refused; a
 * second 'k', a file of one of its names, a bad cn or san refused by
 * the encoder or the decoder.
 */
START_TEST(test_v4_keyreq)
{
	static const char *const sans[] = { "app.example", "10.0.0.7" };
	struct tl_dlv_enc e;
	struct tl_dlv d;
	const uint8_t *p;
	uint8_t *buf;
	size_t len, n;
	char out[200];

	tl_dlv_enc_begin(&e, "app/tls", "app@node-a", 3, proof);
	tl_dlv_enc_keyreq(&e, "key-1.pem", "cert-1.pem", "app-tls_v3", sans,
	    2);
	tl_dlv_enc_subst(&e, "TLS_KEY", 7, "TOK", 3, "TOK", "key-1.pem");
	tl_dlv_enc_subst(&e, "TLS_CERT", 8, "TOK", 3, "TOK", "cert-1.pem");
	{
		/* One value naming both files, each token its own. */
		static const char *const toks[] = { "KT", "CT" };
		static const char *const files[] = { "key-1.pem",
		    "cert-1.pem" };

		tl_dlv_enc_subst_n(&e, "URL", 3, "x?c=CT&k=KT&c2=CT", 17,
		    toks, files, 2);
	}
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	ck_assert_int_eq(tl_dlv_decode(p, len, &d), 0);
	ck_assert_int_eq(d.format, 4);
	ck_assert(d.has_keyreq);
	ck_assert_int_eq(d.nfiles, 0);
	ck_assert_uint_eq(d.nvars, 3);
	n = tl_dlv_resolved_len(&d.vars[2], 4);
	ck_assert_uint_lt(n, sizeof(out));
	tl_dlv_resolve(&d.vars[2], "/run", 4, out);
	out[n] = '\0';
	ck_assert_str_eq(out, "x?c=/run/cert-1.pem&k=/run/key-1.pem&c2="
	    "/run/cert-1.pem");
	ck_assert_uint_eq(d.keyreq.cn_len, 10);
	ck_assert(memcmp(d.keyreq.cn, "app-tls_v3", 10) == 0);
	ck_assert(memcmp(d.keyreq.key_file, "key-1.pem", 9) == 0);
	ck_assert(memcmp(d.keyreq.cert_file, "cert-1.pem", 10) == 0);
	ck_assert_uint_eq(d.keyreq.nsans, 2);
	ck_assert(memcmp(d.keyreq.sans[1], "10.0.0.7", 8) == 0);
	n = tl_dlv_resolved_len(&d.vars[1], 4);
	ck_assert_uint_lt(n, sizeof(out));
	tl_dlv_resolve(&d.vars[1], "/run", 4, out);
	out[n] = '\0';
	ck_assert_str_eq(out, "/run/cert-1.pem");
	tl_dlv_free(&d);
	ck_assert_ptr_nonnull(buf = malloc(len));
	memcpy(buf, p, len);
	for (n = 0; n < len; n++)
		ck_assert_int_eq(tl_dlv_decode(buf, n, &d), TL_EMALFORMED);
	buf[3] = '3';
	ck_assert_int_eq(tl_dlv_decode(buf, len, &d), TL_EMALFORMED);
	free(buf);

	/* Refused: a second 'k'; an 'f' of the key's name; bad names. */
	tl_dlv_enc_restart(&e, "app/tls", "app@node-a", 3, proof);
	tl_dlv_enc_keyreq(&e, "key-1.pem", "cert-1.pem", "cn", NULL, 0);
	tl_dlv_enc_keyreq(&e, "key-2.pem", "cert-2.pem", "cn", NULL, 0);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "app/tls", "app@node-a", 3, proof);
	tl_dlv_enc_keyreq(&e, "key-1.pem", "cert-1.pem", "cn", NULL, 0);
	tl_dlv_enc_file(&e, "key-1.pem", "x", 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "app/tls", "app@node-a", 3, proof);
	tl_dlv_enc_keyreq(&e, "key-1.pem", "key-1.pem", "cn", NULL, 0);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_restart(&e, "app/tls", "app@node-a", 3, proof);
	tl_dlv_enc_keyreq(&e, "key-1.pem", "cert-1.pem", "a\nb", NULL, 0);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	{
		static const char *const bad[] = { "a,DNS:evil.example" };

		tl_dlv_enc_restart(&e, "app/tls", "app@node-a", 3, proof);
		tl_dlv_enc_keyreq(&e, "key-1.pem", "cert-1.pem", "cn", bad,
		    1);
		ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	}
	tl_dlv_enc_free(&e);
}
END_TEST

/*
 * An 'n' item (the 'k' certificate's not-after, filled by the reader):
 * read back as a variable of its kind with no value; refused without a
 * 'k' item, and with a value (one byte, its length said); every prefix
 * refused.
 */
START_TEST(test_v4_not_after)
{
	struct tl_dlv_enc e;
	struct tl_dlv d;
	const uint8_t *p;
	uint8_t *buf;
	size_t len, n, at;

	tl_dlv_enc_begin(&e, "app/tls", "app@node-a", 3, proof);
	tl_dlv_enc_not_after(&e, "TLS_NOT_AFTER", 13);
	tl_dlv_enc_keyreq(&e, "key-1.pem", "cert-1.pem", "app-tls_v3", NULL,
	    0);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), 0);
	ck_assert_int_eq(tl_dlv_decode(p, len, &d), 0);
	ck_assert_int_eq(d.format, 4);
	ck_assert_uint_eq(d.nvars, 1);
	ck_assert_int_eq(d.vars[0].kind, TL_DLV_NOT_AFTER);
	ck_assert_uint_eq(d.vars[0].value_len, 0);
	ck_assert(memcmp(d.vars[0].name, "TLS_NOT_AFTER", 13) == 0);
	ck_assert(!d.vars[0].is_default);
	tl_dlv_free(&d);
	ck_assert_ptr_nonnull(buf = malloc(len + 1));
	memcpy(buf, p, len);
	for (n = 0; n < len; n++)
		ck_assert_int_eq(tl_dlv_decode(buf, n, &d), TL_EMALFORMED);
	/* The u32 length after the name: 1, and one byte of value. */
	for (at = 0; at + 13 <= len; at++)
		if (memcmp(buf + at, "TLS_NOT_AFTER", 13) == 0)
			break;
	ck_assert_uint_lt(at + 13 + 4, len);
	memmove(buf + at + 13 + 5, buf + at + 13 + 4, len - at - 13 - 4);
	buf[at + 13 + 3] = 1;
	buf[at + 13 + 4] = 'x';
	ck_assert_int_eq(tl_dlv_decode(buf, len + 1, &d), TL_EMALFORMED);
	free(buf);

	/*
	 * No 'k' item: refused (finish reads its bytes back with the
	 * decoder, whose TL_EMALFORMED it turns into TL_EINVAL).
	 */
	tl_dlv_enc_restart(&e, "app/tls", "app@node-a", 3, proof);
	tl_dlv_enc_not_after(&e, "TLS_NOT_AFTER", 13);
	tl_dlv_enc_var(&e, 0, "A", 1, "b", 1);
	ck_assert_int_eq(tl_dlv_enc_finish(&e, &p, &len), TL_EINVAL);
	tl_dlv_enc_free(&e);
}
END_TEST

START_TEST(test_path_ok)
{
	static const char *ok[] = { "/run/tally/app/ca-0a.pem", "a", "/_.-/" };
	static const char *bad[] = { "", "/run/t ally", "/run/'x", "/run/\"x",
	    "/a$b", "/a\nb", "/a%20", "/a?b", "/a&b", "/caf\xc3\xa9" };
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		ck_assert_int_eq(tl_dlv_path_ok(ok[i], strlen(ok[i])), 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!tl_dlv_path_ok(bad[i], strlen(bad[i])),
		    "path %zu kept", i);
	ck_assert_int_eq(tl_dlv_path_ok("/a\0b", 4), 0);
}
END_TEST

static Suite *
delivery_suite(void)
{
	Suite *s = suite_create("delivery");
	TCase *tc = tcase_create("codec");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_truncated_and_overlong);
	tcase_add_test(tc, test_encoder_refuses);
	tcase_add_test(tc, test_v2_strict);
	tcase_add_test(tc, test_env_lines);
	tcase_add_test(tc, test_v4_round_trip);
	tcase_add_test(tc, test_v4_truncated_and_overlong);
	tcase_add_test(tc, test_v4_hostile);
	tcase_add_test(tc, test_v4_encoder_refuses);
	tcase_add_test(tc, test_v4_keyreq);
	tcase_add_test(tc, test_v4_not_after);
	tcase_add_test(tc, test_path_ok);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(delivery_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
