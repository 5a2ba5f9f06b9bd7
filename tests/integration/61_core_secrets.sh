#!/bin/sh
# Decrypted secrets stay out of core dumps: tallyd holds a grant's
# password (and the provider's admin password) in libsodium's guarded
# memory (core/secret.h tl_secret_alloc: MADV_DONTDUMP), so a core of
# the daemon taken while a driver call is in flight holds no copy of
# tally's; libpq's own (its SCRAM state, one per open session) is the
# known rest, allowed once below.
# The fault driver delays every check by 8 s (TALLY_FAULT), so with
# --verify-interval 1 the verifier is inside check, the password
# decrypted, when gcore runs.  Control: the daemon's environment holds
# the password reversed (ordinary memory, on its stack): the scan must
# find that in the same core, so it can see a secret that is not
# guarded.  On main before the guard, the password was once and the
# admin password five times in such a core.
# The daemon is the plain build ($TALLY_BIN): a sanitized one's core is
# its shadow memory (64 GB); gcore runs under ulimit -f all the same.
. "$(dirname "$0")/lib.sh"

t_say "throwaway PostgreSQL, one grant provisioned"
t_pg_start
t_init
t_node node-a 127.0.0.1
t_provider node-a local
tly apply "$(t_consumer app shared)" >/dev/null
tly assign app node-a >/dev/null
t_tallyd_once
PW=$(t_envget "$(t_envfile node-a app)" DB_PASSWORD)
ADMIN=$(cat "$TALLY_TEST_PG_PWFILE")
LOGIN=$(t_envget "$(t_envfile node-a app)" DB_USER)
[ ${#PW} -ge 24 ] || t_fail "the delivered password is only ${#PW} characters"
[ -n "$ADMIN" ] && [ -n "$LOGIN" ] || t_fail "no admin password or login"
t_ok "delivered password (${#PW} characters), login $LOGIN"

t_check "a core of tallyd while a check is in flight"
RPW=$(printf '%s' "$PW" | rev)
T_CONTROL=$RPW TALLY_FAULT="check:delay=8000" t_tallyd_start --verify-interval 1 --interval 1
# The first verify pass starts within a second; its check sleeps 8 s.
sleep 3
CORE=$W/core
( ulimit -f 4194304; gcore -o "$CORE" "$T_DPID" >"$W/gcore.out" 2>&1 ) ||
	{ cat "$W/gcore.out" >&2; t_fail "gcore of tallyd $T_DPID failed"; }
C=$CORE.$T_DPID
[ -s "$C" ] || t_fail "no core at $C"
t_ok "core of $(du -k "$C" | cut -f1) KiB"
kill -TERM "$T_DPID" 2>/dev/null || true
t_wait_exit "$T_DPID" 30

# found WHAT STRING: how many times STRING is in the core.
found() { grep -a -F -o -- "$2" "$C" | wc -l; }
n=$(found control "$RPW")
[ "$n" -gt 0 ] || t_fail "control: the reversed password (tallyd's environment) is not in the core: the scan is blind"
t_ok "control: the reversed password from tallyd's environment is $n time(s) in the core"
n=$(found password "$PW")
p=$(found admin "$ADMIN")
rm -f "$C"
[ "$n" -eq 0 ] || t_fail "the grant's decrypted password is $n time(s) in a core of tallyd"
t_ok "the grant's password is not in the core"
# One copy of the admin password is libpq's: the SCRAM exchange keeps
# its SASLprep'd password in the session's state (fe-auth-scram.c),
# freed only when the connection closes, and libpq has no call to
# scrub it.  One provider, one admin session open: at most one copy;
# any copy of tally's own (the pass's providers, the driver's handle,
# libpq's conn->pgpass) makes two or more (five on main).
[ "$p" -le 1 ] || t_fail "the admin password is $p time(s) in a core of tallyd (libpq's session state accounts for one)"
t_ok "the admin password is in the core $p time(s): libpq's SCRAM state of the open session only"
