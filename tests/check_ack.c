/*
 * check_ack.c - the node's keys and the acknowledgement's proofs
 * (core/secret.h, reactors/ack.h): key files of the three formats,
 * the message each proof covers, and that a proof for anything else
 * fails; the control plane's key, derived from the master key, and the
 * signature of what it routes to a node; the scratch tables of refused
 * input (counts per queue, node and kind; the log's rate limit) and of
 * the agents' last-seen times.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/bytes.h"
#include "core/error.h"
#include "core/kv.h"
#include "core/nodewire.h"
#include "core/secret.h"
#include "lib/tl_test.h"
#include "reactors/ack.h"
#include "reactors/rx.h"

/*
 * A header's hex: exactly 2n digits and nothing else (the hand-written
 * copies in follow.c and publish.c it replaced took ':' for a digit of
 * value 10, and ';' .. '?' for 11 .. 15).
 */
START_TEST(test_unhex)
{
	uint8_t b[4];

	ck_assert_int_eq(tl_secret_unhex("00ff7a10", b, 4), 0);
	ck_assert_int_eq(b[1], 0xff);
	ck_assert_int_eq(b[2], 0x7a);
	ck_assert_int_eq(tl_secret_unhex("0:ff7a10", b, 4), TL_EINVAL);
	ck_assert_int_eq(tl_secret_unhex("00ff7a1", b, 4), TL_EINVAL);
	ck_assert_int_eq(tl_secret_unhex("00ff7a100", b, 4), TL_EINVAL);
	ck_assert_int_eq(tl_secret_unhex("00ff7a1g", b, 4), TL_EINVAL);
	ck_assert_int_eq(tl_secret_unhex("", b, 4), TL_EINVAL);
}
END_TEST

START_TEST(test_key_files)
{
	struct tl_node_key k, back;
	uint8_t pk[TL_SIGN_PUBLEN], box_pk[TL_PUBKEY_LEN];
	char *dir = tl_test_tmpdir("check-ack"), path[4200], why[TL_WHY_MAX];
	FILE *fp;

	memset(&k, 0, sizeof(k));
	tl_secret_node_keypair(box_pk, k.box_sk);
	tl_secret_sign_keypair(pk, k.sign_sk);
	k.has_sign = 1;
	snprintf(path, sizeof(path), "%s/new.key", dir);
	ck_assert_int_eq(tl_secret_node_key_write(path, &k), 0);
	ck_assert_int_eq(tl_secret_node_key_load(path, &back, why), 0);
	ck_assert_int_eq(back.has_sign, 1);
	ck_assert(memcmp(&k.box_sk, back.box_sk, sizeof(k.box_sk)) == 0);
	ck_assert(memcmp(&k.sign_sk, back.sign_sk, sizeof(k.sign_sk)) == 0);
	{
		uint8_t again[TL_PUBKEY_LEN], spk[TL_SIGN_PUBLEN];

		ck_assert_int_eq(tl_secret_node_public(back.box_sk, again), 0);
		ck_assert(memcmp(again, box_pk, sizeof(again)) == 0);
		tl_secret_sign_public(back.sign_sk, spk);
		ck_assert(memcmp(spk, pk, sizeof(spk)) == 0);
	}
	ck_assert_int_eq(back.has_cp, 0);	/* 96 bytes: no cp key */
	/* With the control plane's key: 128 bytes, all three back. */
	memset(k.cp_pk, 7, sizeof(k.cp_pk));
	k.has_cp = 1;
	snprintf(path, sizeof(path), "%s/cp.key", dir);
	ck_assert_int_eq(tl_secret_node_key_write(path, &k), 0);
	{
		struct stat st;

		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_size, TL_NODE_KEYFILE_LEN);
		ck_assert_int_eq(TL_NODE_KEYFILE_LEN, 128);
	}
	ck_assert_int_eq(tl_secret_node_key_load(path, &back, why), 0);
	ck_assert_int_eq(back.has_sign, 1);
	ck_assert_int_eq(back.has_cp, 1);
	ck_assert(memcmp(k.cp_pk, back.cp_pk, sizeof(k.cp_pk)) == 0);
	ck_assert(memcmp(&k.sign_sk, back.sign_sk, sizeof(k.sign_sk)) == 0);
	k.has_cp = 0;
	/* A key file of before: the sealing key alone, still read. */
	k.has_sign = 0;
	snprintf(path, sizeof(path), "%s/old.key", dir);
	ck_assert_int_eq(tl_secret_node_key_write(path, &k), 0);
	ck_assert_int_eq(tl_secret_node_key_load(path, &back, why), 0);
	ck_assert_int_eq(back.has_sign, 0);
	ck_assert(memcmp(&k.box_sk, back.box_sk, sizeof(k.box_sk)) == 0);
	/* Another length, or readable by others: refused, with why. */
	snprintf(path, sizeof(path), "%s/bad.key", dir);
	ck_assert((fp = fopen(path, "w")) != NULL);
	fputs("not a key", fp);
	fclose(fp);
	chmod(path, 0600);
	ck_assert_int_eq(tl_secret_node_key_load(path, &back, why), TL_ESECRET);
	ck_assert(strstr(why, "not a node key") != NULL);
	snprintf(path, sizeof(path), "%s/new.key", dir);
	chmod(path, 0644);
	ck_assert_int_eq(tl_secret_node_key_load(path, &back, why), TL_ESECRET);
	ck_assert(strstr(why, "chmod 600") != NULL);
	tl_secret_wipe(&k, sizeof(k));
	tl_secret_wipe(&back, sizeof(back));
	tl_test_tmpdir_done(dir);
}
END_TEST

/*
 * The node's wire (core/nodewire.h) is pinned byte for byte: an agent
 * and a control plane of different builds must sign the same bytes,
 * so a change to the framing is a new tag, never a silent edit.  The
 * proof key is checked against BLAKE2b-256 keyed by "tally-ack-proof1"
 * as Python's hashlib computes it.
 */
START_TEST(test_wire_pinned)
{
	static const uint8_t ack[] = "tally-ack/1\0g/r\0m@n\0"
	    "\0\0\0\0\0\0\1\2" "\x10\x11\x12\x13\x14\x15\x16\x17"
	    "\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f";
	static const uint8_t rep[] = "tally-report/1\0n\0{}";
	static const uint8_t cp[] = "tally-cp/1\0n\0t\0\1\2\3\4\5\6\7\x08" "b";
	static const char proof[] = "4d48c6856c68df7033dc19ee36426a49"
	    "309f874880fff960fdf4f8a187026474";
	uint8_t nonce[TL_NW_NONCE_LEN], msg[TL_NW_MSG_MAX], key[TL_MAC_LEN];
	uint8_t *m;
	char hex[2 * TL_MAC_LEN + 1];
	size_t len, i;

	for (i = 0; i < sizeof(nonce); i++)
		nonce[i] = (uint8_t)(0x10 + i);
	ck_assert_int_eq(tl_nw_ack_message("g/r", "m@n", 0x102, nonce, msg,
	    &len), 0);
	ck_assert_uint_eq(len, sizeof(ack) - 1);
	ck_assert(memcmp(msg, ack, len) == 0);
	ck_assert_int_eq(tl_nw_report_message("n", "{}", &m, &len), 0);
	ck_assert_uint_eq(len, sizeof(rep) - 1);
	ck_assert(memcmp(m, rep, len) == 0);
	free(m);
	ck_assert_int_eq(tl_nw_cp_message("n", "t", 0x0102030405060708ull,
	    "b", 1, &m, &len), 0);
	ck_assert_uint_eq(len, sizeof(cp) - 1);
	ck_assert(memcmp(m, cp, len) == 0);
	free(m);
	ck_assert_int_eq(tl_nw_cp_message("n", "t", 0x0102030405060708ull,
	    NULL, 0, &m, &len), 0);
	ck_assert_uint_eq(len, sizeof(cp) - 2);
	ck_assert(memcmp(m, cp, len) == 0);
	free(m);
	tl_nw_proof_key("password-of-v2-xxxxxxxxxxxxxxxxx", key);
	for (i = 0; i < sizeof(key); i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	ck_assert_str_eq(hex, proof);
}
END_TEST

/* The signature and the MAC hold for exactly one grant/holder/version. */
START_TEST(test_proofs)
{
	uint8_t pk[TL_SIGN_PUBLEN], sk[TL_SIGN_SECLEN], sig[TL_SIGN_LEN];
	uint8_t nonce[TL_NW_NONCE_LEN] = { 1, 2, 3 }, msg[TL_NW_MSG_MAX];
	uint8_t other[TL_NW_MSG_MAX], key[TL_MAC_LEN], key2[TL_MAC_LEN];
	uint8_t mac[TL_MAC_LEN], mac2[TL_MAC_LEN], opk[TL_SIGN_PUBLEN];
	uint8_t osk[TL_SIGN_SECLEN];
	size_t len, olen;

	tl_secret_sign_keypair(pk, sk);
	tl_secret_sign_keypair(opk, osk);
	ck_assert_int_eq(tl_nw_ack_message("game/db", "game@node-a", 2, nonce, msg,
	    &len), 0);
	tl_secret_sign(sk, msg, len, sig);
	ck_assert_int_eq(tl_secret_verify(pk, msg, len, sig), 0);
	/* Another node's key, another version, another holder split. */
	ck_assert_int_eq(tl_secret_verify(opk, msg, len, sig), TL_ESECRET);
	ck_assert_int_eq(tl_nw_ack_message("game/db", "game@node-a", 3, nonce,
	    other, &olen), 0);
	ck_assert_int_eq(tl_secret_verify(pk, other, olen, sig), TL_ESECRET);
	ck_assert_int_eq(tl_nw_ack_message("game/d", "bgame@node-a", 2, nonce,
	    other, &olen), 0);
	ck_assert_int_eq(tl_secret_verify(pk, other, olen, sig), TL_ESECRET);
	/* The MAC is keyed by the credential: another password, another MAC. */
	tl_nw_proof_key("password-of-v2-xxxxxxxxxxxxxxxxx", key);
	tl_nw_proof_key("password-of-v1-xxxxxxxxxxxxxxxxx", key2);
	ck_assert(memcmp(key, key2, sizeof(key)) != 0);
	ck_assert_int_eq(tl_secret_mac(key, sizeof(key), msg, len, mac), 0);
	ck_assert_int_eq(tl_secret_mac(key2, sizeof(key2), msg, len, mac2), 0);
	ck_assert(memcmp(mac, mac2, sizeof(mac)) != 0);
	ck_assert_int_eq(tl_secret_mac(key, 8, msg, len, mac2), TL_EINVAL);
	/* A name too long for the message is refused, not cut. */
	{
		char longg[600];

		memset(longg, 'g', sizeof(longg) - 1);
		longg[sizeof(longg) - 1] = '\0';
		ck_assert_int_eq(tl_nw_ack_message(longg, "h@n", 1, nonce, other,
		    &olen), TL_EINVAL);
	}
}
END_TEST

/*
 * The control plane's key is the master key's (one key, however often
 * derived; another master key, another key), and its signature of a
 * node's message holds for that node, type, seq and body only.
 */
START_TEST(test_cp_signature)
{
	struct tl_key mk = { NULL }, mk2 = { NULL };
	uint8_t pk[TL_SIGN_PUBLEN], pk2[TL_SIGN_PUBLEN], pk3[TL_SIGN_PUBLEN];
	uint8_t sk[TL_SIGN_SECLEN], sig[TL_SIGN_LEN], *msg, *other;
	char *dir = tl_test_tmpdir("check-ack-cp"), path[4200], why[TL_WHY_MAX];
	size_t len, olen;

	snprintf(path, sizeof(path), "%s/master.key", dir);
	ck_assert_int_eq(tl_secret_keygen(path), 0);
	ck_assert_int_eq(tl_secret_load(path, &mk, why), 0);
	snprintf(path, sizeof(path), "%s/other.key", dir);
	ck_assert_int_eq(tl_secret_keygen(path), 0);
	ck_assert_int_eq(tl_secret_load(path, &mk2, why), 0);
	tl_secret_cp_keypair(&mk, pk, sk);
	tl_secret_cp_keypair(&mk, pk2, NULL);
	ck_assert(memcmp(pk, pk2, sizeof(pk)) == 0);
	tl_secret_cp_keypair(&mk2, pk3, NULL);
	ck_assert(memcmp(pk, pk3, sizeof(pk)) != 0);

	ck_assert_int_eq(tl_nw_cp_message("node-a", "credential.delivered", 42,
	    "box", 3, &msg, &len), 0);
	tl_secret_sign(sk, msg, len, sig);
	ck_assert_int_eq(tl_secret_verify(pk, msg, len, sig), 0);
	ck_assert_int_eq(tl_secret_verify(pk3, msg, len, sig), TL_ESECRET);
#define OTHER(n, t, q, b, bl) do { \
	ck_assert_int_eq(tl_nw_cp_message(n, t, q, b, bl, &other, &olen), 0); \
	ck_assert_int_eq(tl_secret_verify(pk, other, olen, sig), TL_ESECRET); \
	free(other); \
} while (0)
	OTHER("node-b", "credential.delivered", 42, "box", 3);	/* another node */
	OTHER("node-a", "assignment.removed", 42, "box", 3);	/* another type */
	OTHER("node-a", "credential.delivered", 43, "box", 3);	/* another seq */
	OTHER("node-a", "credential.delivered", 42, "bot", 3);	/* another body */
	OTHER("node-a", "credential.delivered", 42, "bo", 2);
	OTHER("node-", "acredential.delivered", 42, "box", 3);	/* a shifted split */
#undef OTHER
	free(msg);
	tl_secret_wipe(sk, sizeof(sk));
	tl_secret_key_free(&mk);
	tl_secret_key_free(&mk2);
	tl_test_tmpdir_done(dir);
}
END_TEST

static int log_lines;
static char log_last[1024];

static void
count_log(int level, const char *fmt, va_list ap)
{
	(void)level;
	vsnprintf(log_last, sizeof(log_last), fmt, ap);
	log_lines++;
}

struct refused_arg {
	int		n;
	uint64_t	unsigned_n, badsig_n;
	char		why[TL_WHY_MAX], node[64], via[32];
};

static int
each_refused(const char *via, const char *node, const char *kind,
    uint64_t count, uint64_t last_ns, const char *why, void *arg)
{
	struct refused_arg *ra = arg;

	ck_assert(last_ns > 0);
	ra->n++;
	if (strcmp(kind, TL_REFUSED_UNSIGNED) == 0) {
		ra->unsigned_n = count;
		snprintf(ra->node, sizeof(ra->node), "%s", node);
		snprintf(ra->via, sizeof(ra->via), "%s", via);
	} else if (strcmp(kind, TL_REFUSED_BADSIG) == 0) {
		ra->badsig_n = count;
		snprintf(ra->why, sizeof(ra->why), "%s", why);
	}
	return 0;
}

static int
refuse_many(struct tl_txn *t, void *arg)
{
	struct tl_rx *rx = arg;
	int i, rc;

	for (i = 0; i < 100; i++)
		if ((rc = tl_ack_refused(rx, t, "tally.acks", "node-a",
		    TL_REFUSED_UNSIGNED, "no proof")) != 0)
			return rc;
	for (i = 0; i < 7; i++)
		if ((rc = tl_ack_refused(rx, t, "tally.acks", "node-a",
		    TL_REFUSED_BADSIG, i < 6 ? "older" : "the last")) != 0)
			return rc;
	return 0;
}

/* The rate limit's last line, moved 11 s into the past. */
static int
age_limit(struct tl_txn *t, void *arg)
{
	const void *v;
	uint8_t nv[16];
	size_t vl;
	tl_kv kv;
	int rc;

	(void)arg;
	if ((rc = tl_kv_open_scratch(t, TL_REFUSED_TABLE, &kv)) != 0 ||
	    (rc = tl_kv_get(t, kv, TL_REFUSED_LOG, strlen(TL_REFUSED_LOG), &v,
	    &vl)) != 0)
		return rc;
	ck_assert_uint_eq(vl, 16);
	memcpy(nv, v, 16);
	tl_put_be64(nv, tl_get_be64(nv) - 11000000000ull);
	return tl_kv_put(t, kv, TL_REFUSED_LOG, strlen(TL_REFUSED_LOG), nv, 16);
}

static int
seen_put(struct tl_txn *t, void *arg)
{
	(void)arg;
	return tl_nw_seen(t, "node-b", 1234567890123ull);
}

/*
 * Refused input is counted per queue, node and kind, with the last
 * reason; tallyd's log gets one line, then (once 10 s have passed) one
 * line with the count of what it held back; the rate limit's own row is
 * not a count.  Last-seen times are kept per node.
 */
START_TEST(test_refused_counts)
{
	char *home = tl_test_tmpdir("check-ack-refused");
	char *dir = tl_test_path(home, "log");
	struct tl_log *log;
	struct tl_txn *t;
	struct tl_rx rx;
	struct refused_arg ra;
	uint64_t ns;

	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(tl_log_open_opts(dir, &(struct tl_log_opts){
	    .flags = TL_LOG_CREATE | TL_LOG_NOSYNC, .mapsize = 16u << 20 },
	    &log), 0);
	tl_rx_init(&rx);
	rx.log = log;
	rx.logf = count_log;
	log_lines = 0;

	/* Nothing refused yet: a read finds no table and no count. */
	memset(&ra, 0, sizeof(ra));
	ck_assert_int_eq(tl_log_begin(log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_ack_refused_each(t, each_refused, &ra), 0);
	ck_assert_int_eq(tl_nw_seen_get(t, "node-b", &ns), TL_ENOTFOUND);
	tl_log_abort(t);
	ck_assert_int_eq(ra.n, 0);

	ck_assert_int_eq(tl_log_write(log, refuse_many, &rx), 0);
	ck_assert_int_eq(log_lines, 1);
	ck_assert_ptr_nonnull(strstr(log_last, "claiming node node-a"));
	ck_assert_ptr_null(strstr(log_last, "suppressed"));

	memset(&ra, 0, sizeof(ra));
	ck_assert_int_eq(tl_log_begin(log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_ack_refused_each(t, each_refused, &ra), 0);
	tl_log_abort(t);
	ck_assert_int_eq(ra.n, 2);
	ck_assert_uint_eq(ra.unsigned_n, 100);
	ck_assert_uint_eq(ra.badsig_n, 7);
	ck_assert_str_eq(ra.why, "the last");
	ck_assert_str_eq(ra.node, "node-a");
	ck_assert_str_eq(ra.via, "tally.acks");

	/* Within the 10 s: the flush says nothing yet. */
	ck_assert_int_eq(tl_ack_refused_flush(&rx), 0);
	ck_assert_int_eq(log_lines, 1);
	ck_assert_int_eq(tl_log_write(log, age_limit, NULL), 0);
	ck_assert_int_eq(tl_ack_refused_flush(&rx), 0);
	ck_assert_int_eq(log_lines, 2);
	ck_assert_ptr_nonnull(strstr(log_last, "106 more suppressed"));
	/* Said once. */
	ck_assert_int_eq(tl_ack_refused_flush(&rx), 0);
	ck_assert_int_eq(log_lines, 2);

	ck_assert_int_eq(tl_log_write(log, seen_put, NULL), 0);
	ck_assert_int_eq(tl_log_begin(log, TL_TXN_RDONLY, &t), 0);
	ck_assert_int_eq(tl_nw_seen_get(t, "node-b", &ns), 0);
	ck_assert_uint_eq(ns, 1234567890123ull);
	ck_assert_int_eq(tl_nw_seen_get(t, "node-c", &ns), TL_ENOTFOUND);
	tl_log_abort(t);

	rx.log = NULL;
	tl_rx_free(&rx);
	tl_log_close(log);
	free(dir);
	tl_test_tmpdir_done(home);
}
END_TEST

static Suite *
ack_suite(void)
{
	Suite *s = suite_create("ack");
	TCase *tc = tcase_create("ack");

	tcase_add_test(tc, test_unhex);
	tcase_add_test(tc, test_key_files);
	tcase_add_test(tc, test_proofs);
	tcase_add_test(tc, test_wire_pinned);
	tcase_add_test(tc, test_cp_signature);
	tcase_add_test(tc, test_refused_counts);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(ack_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
