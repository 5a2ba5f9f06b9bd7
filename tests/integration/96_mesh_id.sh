#!/bin/sh
# A mesh has an identity (issue 22, item 1): tally init draws a mesh id
# (32 hex digits) recorded as the log's first event, mesh.created; tally
# mesh and tally status show it; a new tally bootstrap mesh draws its
# own; a home made before ids (by the last tally without them, built
# from git here: 2c38aa5) gets one with its first write, and a leader
# tallyd of such a home records one at start.  No server: the provider
# is a directory.
. "$(dirname "$0")/lib.sh"

OLD_COMMIT=2c38aa5	# the last commit whose tally init records no mesh id

jget() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }

t_say "two tally init homes: two different ids, each event 1"
A=$W/a
B=$W/b
tly init --home "$A" >"$W/init-a.out" || t_fail "tally init a failed"
tly init --home "$B" --json >"$W/init-b.out" || t_fail "tally init b failed"
MA=$(tly mesh --home "$A" --json | jget mesh)
MB=$(jget mesh <"$W/init-b.out")
t_check "each id is 32 lowercase hex digits"
for m in "$MA" "$MB"; do
	printf '%s' "$m" | grep -Eqx '[0-9a-f]{32}' ||
		t_fail "mesh id '$m' is not 32 hex digits"
done
[ "$MA" != "$MB" ] || t_fail "two homes drew the same id $MA"
grep -q "$MA" "$W/init-a.out" || t_fail "tally init does not say the id: $(cat "$W/init-a.out")"
t_ok "$MA, $MB"
t_check "tally log: event 1 is mesh.created {mesh} on control-plane"
tly log --home "$A" --json >"$W/log-a.json"
[ "$(wc -l <"$W/log-a.json")" -eq 1 ] || t_fail "a new home holds $(wc -l <"$W/log-a.json") events"
head -n 1 "$W/log-a.json" | grep -q '"seq":1,' || t_fail "not seq 1: $(head -n 1 "$W/log-a.json")"
[ "$(head -n 1 "$W/log-a.json" | jget type)" = mesh.created ] ||
	t_fail "event 1 is not mesh.created: $(head -n 1 "$W/log-a.json")"
[ "$(head -n 1 "$W/log-a.json" | jget stream)" = control-plane ] ||
	t_fail "mesh.created not on control-plane: $(head -n 1 "$W/log-a.json")"
head -n 1 "$W/log-a.json" | grep -q "\"mesh\":\"$MA\"" ||
	t_fail "event 1 does not carry $MA: $(head -n 1 "$W/log-a.json")"
t_ok "event 1 mesh.created {mesh: $MA}"

t_say "tally mesh and tally status on the leader"
tly mesh --home "$A" >"$W/mesh.out" || t_fail "tally mesh failed"
cat "$W/mesh.out"
grep -qx "mesh $MA" "$W/mesh.out" || t_fail "tally mesh does not name $MA"
grep -q "^epoch 1, leader [0-9a-f]\{32\}$" "$W/mesh.out" || t_fail "no epoch/leader line"
grep -qx "standing leader" "$W/mesh.out" || t_fail "not the leader"
grep -q "publishes no replication stream" "$W/mesh.out" || t_fail "no stream line"
tly mesh --home "$A" --json >"$W/mesh.json"
cat "$W/mesh.json"
[ "$(jget standing <"$W/mesh.json")" = leader ] || t_fail "--json standing"
grep -q '"epoch":1,' "$W/mesh.json" || t_fail "--json epoch"
printf '%s' "$(jget leader <"$W/mesh.json")" | grep -Eqx '[0-9a-f]{32}' || t_fail "--json leader"
grep -q '"stream":null' "$W/mesh.json" || t_fail "--json stream"
LEADER=$(jget leader <"$W/mesh.json")
t_check "each home's epoch 1 has its own leader"
[ "$(tly mesh --home "$B" --json | jget leader)" != "$LEADER" ] ||
	t_fail "homes a and b name the same leader $LEADER"
tly --home "$A" publish configure --url amqp://127.0.0.1:1/ --user u \
	--stream tally.repl --no-acks --no-node-queues >/dev/null 2>&1 ||
	t_fail "tally publish configure --stream failed"
tly mesh --home "$A" | grep -q "^publishes stream tally.repl at amqp://127.0.0.1:1/" ||
	t_fail "tally mesh does not name the stream it publishes: $(tly mesh --home "$A")"
tly mesh --home "$A" --json | grep -q '"stream":{"name":"tally.repl","url":"amqp://127.0.0.1:1/","direction":"publishes"}' ||
	t_fail "--json stream: $(tly mesh --home "$A" --json)"
t_ok "mesh, epoch 1, leader $LEADER, standing leader, stream tally.repl"
tly status --home "$A" >"$W/status.out" || true
grep -qx "mesh $MA" "$W/status.out" || t_fail "tally status does not show the id: $(cat "$W/status.out")"
tly status --home "$A" --json | grep -q "\"mesh\":\"$MA\"" || t_fail "tally status --json: no mesh"
t_ok "tally status: mesh $MA"

t_say "a standby's home has no id of its own"
tly init --home "$W/s" --standby >/dev/null
tly mesh --home "$W/s" --json >"$W/s.json"
grep -q '"standing":"standby"' "$W/s.json" || t_fail "standby standing: $(cat "$W/s.json")"
grep -q '"mesh":null' "$W/s.json" || t_fail "a standby drew its own id: $(cat "$W/s.json")"
[ "$(tly log --home "$W/s" --json | wc -l)" -eq 0 ] || t_fail "a standby's log is not empty"
t_ok "standby: no mesh until it copies the leader's event 1"

t_say "tally bootstrap of a new mesh draws a new id"
mkdir -p "$W/bs" "$W/bsroot"
cat >"$W/bs/bundle.yaml" <<EOF
node: {name: cp, routable-name: 127.0.0.1, key-out: $W/bs/cp.key}
providers:
  - manifest: $TALLY_SRC/examples/download.yaml
    module: download
    settings: {root: $W/bsroot}
EOF
for h in bs1 bs2; do
	tly bootstrap --home "$W/$h" "$W/bs/bundle.yaml" >"$W/$h.out" 2>&1 || {
		cat "$W/$h.out" >&2
		t_fail "tally bootstrap $h failed"
	}
	rm -f "$W/bs/cp.key"
done
M1=$(tly mesh --home "$W/bs1" --json | jget mesh)
M2=$(tly mesh --home "$W/bs2" --json | jget mesh)
printf '%s' "$M1" | grep -Eqx '[0-9a-f]{32}' || t_fail "bootstrap mesh '$M1'"
[ "$M1" != "$M2" ] && [ "$M1" != "$MA" ] && [ "$M1" != "$MB" ] ||
	t_fail "bootstrap ids not new: $M1 $M2 ($MA $MB)"
[ "$(tly log --home "$W/bs1" --json | head -n 1 | jget type)" = mesh.created ] ||
	t_fail "bootstrap's event 1 is not mesh.created"
t_ok "$M1, $M2"

t_say "a home made before ids (tally built from $OLD_COMMIT) gets one on its first write"
OLD=$TALLY_TMP/old-tally-$OLD_COMMIT
if [ ! -x "$OLD/build/bin/tally" ]; then
	rm -rf "$OLD"
	mkdir -p "$OLD"
	git -C "$TALLY_SRC" archive "$OLD_COMMIT" | tar -x -C "$OLD" ||
		t_fail "cannot extract $OLD_COMMIT from $TALLY_SRC's history"
	t_note "building the old tally in $OLD (once; kept for the next run)"
	nice make -C "$OLD" -j2 build/bin/tally >"$OLD/make.log" 2>&1 || {
		tail -n 20 "$OLD/make.log" >&2
		t_fail "cannot build tally at $OLD_COMMIT"
	}
fi
H=$W/old
"$OLD/build/bin/tally" init --home "$H" >/dev/null || t_fail "old tally init failed"
"$OLD/build/bin/tally" node add n1 --home "$H" --routable-name 127.0.0.1 \
	--key-out "$W/n1.key" >/dev/null || t_fail "old tally node add failed"
tly log --home "$H" --json >"$W/old.json"
grep -q mesh.created "$W/old.json" && t_fail "the old tally recorded a mesh"
N=$(wc -l <"$W/old.json")
tly mesh --home "$H" | grep -q "^mesh: none recorded" || t_fail "tally mesh on an old home: $(tly mesh --home "$H")"
t_ok "an old home of $N event(s), no mesh.created; tally mesh says none"
t_check "a reading command appends nothing"
tly status --home "$H" >/dev/null 2>&1 || true
[ "$(tly log --home "$H" --json | wc -l)" -eq "$N" ] || t_fail "tally status appended"
t_check "the first write appends mesh.created before its own events"
tly node add n2 --home "$H" --routable-name 127.0.0.1 --key-out "$W/n2.key" --json >"$W/add.json" ||
	t_fail "tally node add on the old home failed"
grep -q '"type":"mesh.created"' "$W/add.json" || t_fail "--json does not list mesh.created: $(cat "$W/add.json")"
tly log --home "$H" --json >"$W/old2.json"
L=$(sed -n "$((N + 1))p" "$W/old2.json")
[ "$(printf '%s' "$L" | jget type)" = mesh.created ] || t_fail "event $((N + 1)) is not mesh.created: $L"
MO=$(printf '%s' "$L" | jget mesh)
printf '%s' "$MO" | grep -Eqx '[0-9a-f]{32}' || t_fail "old home's id '$MO'"
[ "$(tly mesh --home "$H" --json | jget mesh)" = "$MO" ] || t_fail "tally mesh does not read $MO"
tly node add n3 --home "$H" --routable-name 127.0.0.1 --key-out "$W/n3.key" >/dev/null
[ "$(tly log --home "$H" --json | grep -c mesh.created)" -eq 1 ] || t_fail "a second write appended another mesh.created"
tly verify --home "$H" >/dev/null || t_fail "the old home does not verify after"
t_ok "event $((N + 1)): mesh.created $MO, once; verifies"

t_check "a leader tallyd of an old home records one at start"
H2=$W/old2
"$OLD/build/bin/tally" init --home "$H2" >/dev/null
"$OLD/build/bin/tally" node add n1 --home "$H2" --routable-name 127.0.0.1 \
	--key-out "$W/m1.key" >/dev/null
"$TALLY_BIN/tallyd" --home "$H2" --once --once-timeout 30 2>>"$T_DLOG" ||
	t_fail "tallyd --once on the old home failed: $(tail -n 5 "$T_DLOG")"
[ "$(tly log --home "$H2" --json | grep -c '"type":"mesh.created"')" -eq 1 ] ||
	t_fail "tallyd did not record a mesh"
grep -q "mesh $(tly mesh --home "$H2" --json | jget mesh)" "$T_DLOG" || t_fail "tallyd does not log its mesh"
t_ok "tallyd: mesh.created once, logged"
