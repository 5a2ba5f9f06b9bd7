/*
 * standing.c - what the log says of leadership: the epoch, its leader,
 * whether this home is a standby, whether it was deposed, and what a
 * standby follows (epoch.h).  Reads and writes of the log's tables
 * only: the CLI links it, and no provider is reached from here (the
 * fences are epoch.c's, tallyd's).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/body.h"
#include "core/bytes.h"
#include "core/json.h"
#include "core/error.h"
#include "core/kv.h"
#include "projections/events.h"
#include "epoch.h"

#define DEPOSED_TABLE	"control-plane"
#define DEPOSED_KEY	"deposed"
#define FOLLOW_KEY	"following"
#define FOLLOW_V1	"follow/1"
#define CLUSTER_KEY	"cluster"
#define FOLLOWERS_KEY	"followers"

int
tl_ep_current(struct tl_txn *t, uint64_t *epochp, uint64_t *atp)
{
	struct tl_filter f = { 0 };
	struct tl_iter *it = NULL;
	struct tl_event ev;
	struct tl_bview v;
	uint64_t epoch = 1, at = 0, e;
	int rc;

	f.stream = TL_CP_STREAM;
	f.type = TL_EV_CP_PROMOTED;
	if ((rc = tl_iter_open(t, &f, &it)) != 0)
		return rc;
	while ((rc = tl_iter_next(it, &ev)) == 0) {
		if (tl_bview_open(&v, ev.body, ev.body_len) != 0)
			continue;
		e = tl_bn_getu64(v.root, "epoch", 0);
		tl_bview_close(&v);
		/* Only ever up: a promotion to a lower epoch is ignored. */
		if (e > epoch) {
			epoch = e;
			at = ev.seq;
		}
	}
	tl_iter_close(it);
	if (rc != TL_EEOF && rc != TL_ENOTFOUND)
		return rc;
	*epochp = epoch;
	if (atp != NULL)
		*atp = at;
	return 0;
}

int
tl_ep_leader(struct tl_txn *t, uint64_t *epochp, char *leader)
{
	static const char hx[] = "0123456789abcdef";
	struct tl_event ev;
	uint64_t at = 0;
	int rc, i;

	leader[0] = '\0';
	if ((rc = tl_ep_current(t, epochp, &at)) != 0)
		return rc;
	rc = tl_log_get(t, at != 0 ? at : 1, &ev);
	if (rc == TL_ENOTFOUND)
		return 0;
	if (rc != 0)
		return rc;
	for (i = 0; i < 16; i++) {
		leader[2 * i] = hx[ev.hash[i] >> 4];
		leader[2 * i + 1] = hx[ev.hash[i] & 15];
	}
	leader[32] = '\0';
	return 0;
}

int
tl_ep_is_standby(const char *home)
{
	char path[1200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/" TL_STANDBY_FILE, home);
	return stat(path, &st) == 0;
}

/* "standby", or "leader SEQ": the promotion that ended it. */
#define STANDING_KEY	"standing"

int
tl_ep_standing(struct tl_txn *t, const char *home, int *standby,
    uint64_t *promoted)
{
	char buf[64];
	const void *v;
	size_t len;
	tl_kv kv;
	int rc;

	*standby = 0;
	if (promoted != NULL)
		*promoted = 0;
	rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv);
	if (rc == 0)
		rc = tl_kv_get(t, kv, STANDING_KEY, strlen(STANDING_KEY), &v, &len);
	if (rc == TL_ENOTFOUND) {
		/* A home of before: its marker file is all there is. */
		*standby = tl_ep_is_standby(home);
		return 0;
	}
	if (rc != 0)
		return rc;
	if (len >= sizeof(buf))
		return TL_ECORRUPT;
	memcpy(buf, v, len);
	buf[len] = '\0';
	if (strcmp(buf, "standby") == 0) {
		*standby = 1;
		return 0;
	}
	if (strncmp(buf, "leader ", 7) != 0)
		return TL_ECORRUPT;
	if (promoted != NULL)
		*promoted = strtoull(buf + 7, NULL, 10);
	return 0;
}

int
tl_ep_standing_put(struct tl_txn *t, int standby, uint64_t promoted)
{
	char buf[64];
	tl_kv kv;
	int n, rc;

	n = standby ? snprintf(buf, sizeof(buf), "standby") :
	    snprintf(buf, sizeof(buf), "leader %llu",
	    (unsigned long long)promoted);
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc;
	return tl_kv_put(t, kv, STANDING_KEY, strlen(STANDING_KEY), buf, (size_t)n);
}

/* --- fences ------------------------------------------------------- */

int
tl_ep_deposed(struct tl_txn *t, char *msg, size_t cap)
{
	tl_kv kv;
	const void *v;
	size_t len;
	int rc;

	msg[0] = '\0';
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	if ((rc = tl_kv_get(t, kv, DEPOSED_KEY, strlen(DEPOSED_KEY), &v,
	    &len)) != 0)
		return rc == TL_ENOTFOUND ? 0 : rc;
	if (len >= cap)
		len = cap - 1;
	memcpy(msg, v, len);
	msg[len] = '\0';
	return 1;
}

/* --- a cluster's control plane --------------------------------------- */

int
tl_ep_cluster_put(struct tl_txn *t, const char *standing)
{
	tl_kv kv;
	int rc;

	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc;
	/*
	 * Elected or following again: what deposed it is history, and so
	 * are the followers it saw when it last led.
	 */
	if ((rc = tl_kv_del(t, kv, DEPOSED_KEY, strlen(DEPOSED_KEY))) != 0 &&
	    rc != TL_ENOTFOUND)
		return rc;
	if ((rc = tl_kv_del(t, kv, FOLLOWERS_KEY, strlen(FOLLOWERS_KEY))) != 0 &&
	    rc != TL_ENOTFOUND)
		return rc;
	return tl_kv_put(t, kv, CLUSTER_KEY, strlen(CLUSTER_KEY), standing,
	    strlen(standing));
}

int
tl_ep_cluster_get(struct tl_txn *t, char *standing, size_t cap)
{
	const void *v;
	size_t len;
	tl_kv kv;
	int rc;

	standing[0] = '\0';
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0 ||
	    (rc = tl_kv_get(t, kv, CLUSTER_KEY, strlen(CLUSTER_KEY), &v,
	    &len)) != 0)
		return rc;
	if (len >= cap)
		len = cap - 1;
	memcpy(standing, v, len);
	standing[len] = '\0';
	return 0;
}

/* --- what a standby follows --------------------------------------- */

/*
 * One line per field, after a version line: URLs, stream names and the
 * reasons written here hold no newline (the reasons are ours).
 */
int
tl_ep_follow_put(struct tl_txn *t, const struct tl_ep_follow *f)
{
	char buf[1400];
	tl_kv kv;
	int n, rc;

	n = snprintf(buf, sizeof(buf), FOLLOW_V1 "\n%s\n%s\n%llu\n%lld\n%s",
	    f->url, f->stream, (unsigned long long)f->passed,
	    (long long)f->last_offset, f->last_why);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return TL_EINVAL;
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc;
	return tl_kv_put(t, kv, FOLLOW_KEY, strlen(FOLLOW_KEY), buf,
	    (size_t)n);
}

/* The next line of *p (to end) into out, cut to fit. */
static void
line(const char **p, const char *end, char *out, size_t cap)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = (size_t)((nl ? nl : end) - *p);

	if (n >= cap)
		n = cap - 1;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p = nl ? nl + 1 : end;
}

int
tl_ep_follow_get(struct tl_txn *t, struct tl_ep_follow *f)
{
	const char *p, *end;
	char num[32];
	const void *v;
	size_t len;
	tl_kv kv;
	int rc;

	memset(f, 0, sizeof(*f));
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0 ||
	    (rc = tl_kv_get(t, kv, FOLLOW_KEY, strlen(FOLLOW_KEY), &v,
	    &len)) != 0)
		return rc;
	p = v;
	end = p + len;
	line(&p, end, num, sizeof(num));
	if (strcmp(num, FOLLOW_V1) != 0)
		return TL_ENOTFOUND;	/* a newer tally's: not ours to read */
	line(&p, end, f->url, sizeof(f->url));
	line(&p, end, f->stream, sizeof(f->stream));
	line(&p, end, num, sizeof(num));
	f->passed = strtoull(num, NULL, 10);
	line(&p, end, num, sizeof(num));
	f->last_offset = strtoll(num, NULL, 10);
	line(&p, end, f->last_why, sizeof(f->last_why));
	return 0;
}

/* The followers: at (8), head (8), then each id (64) and applied (8). */
#define FOLLOWER_LEN	(TL_EP_FOLLOWER_ID + 8)
#define FOLLOWERS_MAX	32

int
tl_ep_followers_put(struct tl_txn *t, uint64_t at_ns, uint64_t head,
    const struct tl_ep_follower *f, unsigned n)
{
	uint8_t buf[16 + FOLLOWERS_MAX * FOLLOWER_LEN], *p;
	unsigned i;
	tl_kv kv;
	int rc;

	if (n > FOLLOWERS_MAX)
		n = FOLLOWERS_MAX;
	memset(buf, 0, sizeof(buf));
	tl_put_be64(buf, at_ns);
	tl_put_be64(buf + 8, head);
	for (i = 0, p = buf + 16; i < n; i++, p += FOLLOWER_LEN) {
		memcpy(p, f[i].id, strnlen(f[i].id, TL_EP_FOLLOWER_ID - 1));
		tl_put_be64(p + TL_EP_FOLLOWER_ID, f[i].applied);
	}
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc;
	return tl_kv_put(t, kv, FOLLOWERS_KEY, strlen(FOLLOWERS_KEY), buf,
	    16 + (size_t)n * FOLLOWER_LEN);
}

int
tl_ep_followers_get(struct tl_txn *t, uint64_t *at_ns, uint64_t *head,
    struct tl_ep_follower *f, unsigned cap, unsigned *n)
{
	const uint8_t *p;
	const void *v;
	size_t len, i;
	tl_kv kv;
	int rc;

	*n = 0;
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0 ||
	    (rc = tl_kv_get(t, kv, FOLLOWERS_KEY, strlen(FOLLOWERS_KEY), &v,
	    &len)) != 0)
		return rc;
	if (len < 16 || (len - 16) % FOLLOWER_LEN != 0)
		return TL_EMALFORMED;
	p = v;
	*at_ns = tl_get_be64(p);
	*head = tl_get_be64(p + 8);
	for (i = 0, p += 16; i < (len - 16) / FOLLOWER_LEN && *n < cap; i++,
	    p += FOLLOWER_LEN) {
		memcpy(f[*n].id, p, TL_EP_FOLLOWER_ID - 1);
		f[*n].id[TL_EP_FOLLOWER_ID - 1] = '\0';
		f[*n].applied = tl_get_be64(p + TL_EP_FOLLOWER_ID);
		(*n)++;
	}
	return 0;
}

json_t *
tl_ep_followers_doc(struct tl_txn *t)
{
	struct tl_ep_follower f[FOLLOWERS_MAX];
	uint64_t at = 0, head = 0;
	unsigned i, n;
	json_t *doc, *arr;
	char when[64];

	if (tl_ep_followers_get(t, &at, &head, f, FOLLOWERS_MAX, &n) != 0)
		return NULL;
	tl_json_time(at, when);
	if ((arr = json_array()) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		json_array_append_new(arr, json_pack("{s:s,s:I,s:I}", "id",
		    f[i].id, "applied", (json_int_t)f[i].applied, "behind",
		    (json_int_t)(head > f[i].applied ? head - f[i].applied :
		    0)));
	doc = json_pack("{s:s,s:I,s:o}", "as_of", when, "head",
	    (json_int_t)head, "followers", arr);
	return doc;
}

#define STANDBY_PFX	"standby/"

static int
count_one(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	(void)k;
	(void)kl;
	(void)v;
	(void)vl;
	(*(unsigned *)arg)++;
	return 0;
}

int
tl_ep_standby_put(struct tl_txn *t, const char *name, uint64_t seq,
    uint64_t at_ns)
{
	char key[sizeof(STANDBY_PFX) + TL_EP_STANDBY_NAME];
	uint8_t v[16];
	const void *old;
	size_t len;
	unsigned n = 0;
	tl_kv kv;
	int rc;

	if (strlen(name) > TL_EP_STANDBY_NAME)
		return TL_EINVAL;
	snprintf(key, sizeof(key), STANDBY_PFX "%s", name);
	if ((rc = tl_kv_open_scratch(t, DEPOSED_TABLE, &kv)) != 0)
		return rc;
	if ((rc = tl_kv_get(t, kv, key, strlen(key), &old, &len)) ==
	    TL_ENOTFOUND) {
		if ((rc = tl_kv_scan(t, kv, STANDBY_PFX, strlen(STANDBY_PFX),
		    count_one, &n)) != 0)
			return rc;
		if (n >= TL_EP_STANDBYS_MAX)
			return 0;
	} else if (rc != 0)
		return rc;
	tl_put_be64(v, seq);
	tl_put_be64(v + 8, at_ns);
	return tl_kv_put(t, kv, key, strlen(key), v, sizeof(v));
}

struct sby_arg {
	json_t		*arr;
	uint64_t	 head;
};

static int
standby_one(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	struct sby_arg *sa = arg;
	char name[TL_EP_STANDBY_NAME + 1], when[64];
	uint64_t seq;
	size_t n = kl - strlen(STANDBY_PFX);

	if (vl != 16 || n > TL_EP_STANDBY_NAME)
		return 0;
	memcpy(name, (const char *)k + strlen(STANDBY_PFX), n);
	name[n] = '\0';
	seq = tl_get_be64(v);
	tl_json_time(tl_get_be64((const uint8_t *)v + 8), when);
	json_array_append_new(sa->arr, json_pack("{s:s,s:I,s:I,s:s}", "name",
	    name, "applied", (json_int_t)seq, "behind", (json_int_t)(sa->head >
	    seq ? sa->head - seq : 0), "heard", when));
	return 0;
}

json_t *
tl_ep_standbys_doc(struct tl_txn *t)
{
	struct sby_arg sa = { NULL, 0 };
	tl_kv kv;

	if (tl_kv_open_scratch(t, DEPOSED_TABLE, &kv) != 0 ||
	    tl_log_last(t, &sa.head, NULL) != 0 ||
	    (sa.arr = json_array()) == NULL)
		return NULL;
	if (tl_kv_scan(t, kv, STANDBY_PFX, strlen(STANDBY_PFX), standby_one,
	    &sa) != 0 || json_array_size(sa.arr) == 0) {
		json_decref(sa.arr);
		return NULL;
	}
	return json_pack("{s:o}", "standbys", sa.arr);
}
