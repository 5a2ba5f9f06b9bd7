/*
 * tl_pemtest.c - the client certificate suites' shared helpers
 * (tl_pemtest.h).
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "tl_pemtest.h"

static void
die(const char *what)
{
	fprintf(stderr, "tl_pemtest: %s\n", what);
	abort();
}

int
tl_test_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		die("cannot list /proc/self/fd");
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

int
tl_test_fds_named(const char *pfx)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char p[300], t[4096];
	ssize_t n;
	int count = 0;

	if (d == NULL)
		die("cannot list /proc/self/fd");
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		if ((n = readlink(p, t, sizeof(t) - 1)) <= 0)
			continue;
		t[n] = '\0';
		count += strncmp(t, pfx, strlen(pfx)) == 0;
	}
	closedir(d);
	return count;
}

int
tl_test_key_in(const char *text, const char *key)
{
	const char *p = strchr(key, '\n'), *eol, *q;
	char w[17];

	if (p == NULL)
		return 0;
	for (p++; *p != '\0' && strncmp(p, "-----END", 8) != 0; p = eol + 1) {
		if ((eol = strchr(p, '\n')) == NULL)
			eol = p + strlen(p);
		for (q = p; q + 16 <= eol; q++) {
			memcpy(w, q, 16);
			w[16] = '\0';
			if (strstr(text, w) != NULL)
				return 1;
		}
		if (*eol == '\0')
			break;
	}
	return 0;
}

char *
tl_test_key_encrypted(const char *key)
{
	BIO *in = BIO_new_mem_buf(key, -1), *out = BIO_new(BIO_s_mem());
	EVP_PKEY *k = in != NULL ? PEM_read_bio_PrivateKey(in, NULL, NULL,
	    NULL) : NULL;
	char *data, *s;
	long n;

	if (k == NULL || out == NULL ||
	    PEM_write_bio_PKCS8PrivateKey(out, k, EVP_aes_256_cbc(), NULL, 0,
	    NULL, (void *)"a passphrase") != 1 ||
	    (n = BIO_get_mem_data(out, &data)) <= 0 ||
	    (s = calloc(1, (size_t)n + 1)) == NULL)
		die("cannot encrypt the key");
	memcpy(s, data, (size_t)n);
	EVP_PKEY_free(k);
	BIO_free(in);
	BIO_free(out);
	return s;
}

char *
tl_test_slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *b;
	long n;

	if (fp == NULL || fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET) != 0 ||
	    (b = calloc(1, (size_t)n + 1)) == NULL ||
	    fread(b, 1, (size_t)n, fp) != (size_t)n)
		die(path);
	fclose(fp);
	return b;
}
