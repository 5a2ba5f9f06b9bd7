/*
 * check_ack.c - the node's keys and the acknowledgement's proofs
 * (core/secret.h, reactors/ack.h): key files of the three formats,
 * the message each proof covers, and that a proof for anything else
 * fails; the control plane's key, derived from the master key, and the
 * signature of what it routes to a node.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/secret.h"
#include "lib/tl_test.h"
#include "reactors/ack.h"

START_TEST(test_key_files)
{
	struct tl_node_key k, back;
	uint8_t pk[TL_SIGN_PUBLEN], box_pk[TL_PUBKEY_LEN];
	char *dir = tl_test_tmpdir("check-ack"), path[4200], why[160];
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

/* The signature and the MAC hold for exactly one grant/holder/version. */
START_TEST(test_proofs)
{
	uint8_t pk[TL_SIGN_PUBLEN], sk[TL_SIGN_SECLEN], sig[TL_SIGN_LEN];
	uint8_t nonce[TL_ACK_NONCE_LEN] = { 1, 2, 3 }, msg[TL_ACK_MSG_MAX];
	uint8_t other[TL_ACK_MSG_MAX], key[TL_MAC_LEN], key2[TL_MAC_LEN];
	uint8_t mac[TL_MAC_LEN], mac2[TL_MAC_LEN], opk[TL_SIGN_PUBLEN];
	uint8_t osk[TL_SIGN_SECLEN];
	size_t len, olen;

	tl_secret_sign_keypair(pk, sk);
	tl_secret_sign_keypair(opk, osk);
	ck_assert_int_eq(tl_ack_message("game/db", "game@node-a", 2, nonce, msg,
	    &len), 0);
	tl_secret_sign(sk, msg, len, sig);
	ck_assert_int_eq(tl_secret_verify(pk, msg, len, sig), 0);
	/* Another node's key, another version, another holder split. */
	ck_assert_int_eq(tl_secret_verify(opk, msg, len, sig), TL_ESECRET);
	ck_assert_int_eq(tl_ack_message("game/db", "game@node-a", 3, nonce,
	    other, &olen), 0);
	ck_assert_int_eq(tl_secret_verify(pk, other, olen, sig), TL_ESECRET);
	ck_assert_int_eq(tl_ack_message("game/d", "bgame@node-a", 2, nonce,
	    other, &olen), 0);
	ck_assert_int_eq(tl_secret_verify(pk, other, olen, sig), TL_ESECRET);
	/* The MAC is keyed by the credential: another password, another MAC. */
	tl_ack_proof_key("password-of-v2-xxxxxxxxxxxxxxxxx", key);
	tl_ack_proof_key("password-of-v1-xxxxxxxxxxxxxxxxx", key2);
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
		ck_assert_int_eq(tl_ack_message(longg, "h@n", 1, nonce, other,
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
	char *dir = tl_test_tmpdir("check-ack-cp"), path[4200], why[160];
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

	ck_assert_int_eq(tl_cp_message("node-a", "credential.delivered", 42,
	    "box", 3, &msg, &len), 0);
	tl_secret_sign(sk, msg, len, sig);
	ck_assert_int_eq(tl_secret_verify(pk, msg, len, sig), 0);
	ck_assert_int_eq(tl_secret_verify(pk3, msg, len, sig), TL_ESECRET);
#define OTHER(n, t, q, b, bl) do { \
	ck_assert_int_eq(tl_cp_message(n, t, q, b, bl, &other, &olen), 0); \
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

static Suite *
ack_suite(void)
{
	Suite *s = suite_create("ack");
	TCase *tc = tcase_create("ack");

	tcase_add_test(tc, test_key_files);
	tcase_add_test(tc, test_proofs);
	tcase_add_test(tc, test_cp_signature);
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
