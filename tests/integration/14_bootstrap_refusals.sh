#!/bin/sh
# tally bootstrap validates the whole bundle before its first write
# (issue 21, item 31): each bundle below is refused (exit 4) naming the
# file, the line and the field, and leaves no home, no node key file
# and no manifest applied: a setting with a newline, a secret placed
# under settings:, a setting the driver does not declare, a value of
# the wrong kind, a duplicate key (the first used to win silently), a
# NUL inside a value (it used to truncate it), a module its manifest
# does not declare, a manifest that does not parse, and a routable name
# that is not a host.  No server is needed: nothing may be reached.
. "$(dirname "$0")/lib.sh"

B=$W/bundle
mkdir -p "$B"
cp "$TALLY_SRC/examples/postgres.yaml" "$B/postgres.yaml"
printf 'secret\n' >"$B/admin.pw"

# bundle SETTINGS-LINES [NODE-EXTRA]: a bundle whose provider's settings
# are the lines given (each indented under settings:).
bundle() {
	cat <<YAML
node:
  name: cp
  routable-name: ${ROUTABLE:-127.0.0.1}
  key-out: $W/keys/cp.key
providers:
  - manifest: ${MANIFEST:-postgres.yaml}
    module: ${MODULE:-postgres}
    expose: network
    settings:
$1
    secrets:
      admin-password: {file: $B/admin.pw}
YAML
}

refused() {	# WHAT FILE PATTERN
	t_check "refused: $1"
	t_expect_exit 4 "$1" tly bootstrap "$2"
	grep -q -- "$3" "$W/last.err" ||
		t_fail "$1: expected '$3' in: $(cat "$W/last.err")"
	[ ! -e "$TALLY_HOME" ] || t_fail "$1: a home was created ($TALLY_HOME)"
	[ ! -e "$W/keys/cp.key" ] && [ ! -e "$W/keys/cp.key.new" ] ||
		t_fail "$1: a node key file was written"
	[ ! -e "$W/keys" ] || t_fail "$1: the key directory was created"
	t_ok "$(head -n 1 "$W/last.err")"
}

t_say "bundles refused before anything is written"
bundle '      port: "5432"
      admin-user: "post\ngres"' >"$B/newline.yaml"
refused "a setting with a newline" "$B/newline.yaml" "newline.yaml:11: providers\[0\].settings.admin-user: .*control character"

bundle '      port: "5432"
      admin-password: hunter2' >"$B/secret.yaml"
refused "a secret under settings:" "$B/secret.yaml" "secret.yaml:11: providers\[0\].settings.admin-password: .*secret.*secrets:"

bundle '      port: "5432"
      admin-usr: postgres' >"$B/unknown.yaml"
refused "a setting the driver does not declare" "$B/unknown.yaml" "unknown.yaml:11: providers\[0\].settings.admin-usr: unknown setting"

bundle '      port: "fifty"' >"$B/kind.yaml"
refused "a port that is not a port" "$B/kind.yaml" "kind.yaml:10: providers\[0\].settings.port: "

bundle '      port: "5432"
      port: "6543"' >"$B/dup.yaml"
refused "a duplicate key" "$B/dup.yaml" "dup.yaml:11: providers\[0\].settings: duplicate key 'port' (first at line 10)"

bundle '      port: "5432"
      admin-user: "post\0gres"' >"$B/nul.yaml"
refused "a NUL inside a value" "$B/nul.yaml" "nul.yaml:11: .*NUL"

MODULE=postgress bundle '      port: "5432"' >"$B/nomodule.yaml"
refused "a module its manifest does not declare" "$B/nomodule.yaml" "nomodule.yaml:7: providers\[0\].module: .*postgress"

printf 'module: x\nrequires: [\n' >"$B/broken.yaml"
MANIFEST=broken.yaml bundle '      port: "5432"' >"$B/badmf.yaml"
refused "a manifest that does not parse" "$B/badmf.yaml" "badmf.yaml:6: providers\[0\].manifest: .*broken.yaml"

printf 'not a certificate\n' >"$B/notpem.txt"
bundle "      port: \"5432\"
      ca: $B/notpem.txt" >"$B/notpem.yaml"
refused "a ca file that holds no PEM certificate" "$B/notpem.yaml" "notpem.yaml:11: providers\[0\].settings.ca: .*notpem.txt: .*not a PEM certificate"

bundle '      port: "5432"
      ca: relative/ca.pem' >"$B/relca.yaml"
refused "a ca file by a relative path" "$B/relca.yaml" "relca.yaml:11: providers\[0\].settings.ca: ca names a PEM file: give its absolute path"

ROUTABLE=db1.lan:5432 bundle '      port: "5432"' >"$B/hostport.yaml"
refused "host:port as the routable name" "$B/hostport.yaml" "hostport.yaml:3: node.routable-name: .*port"

bundle '      port: "5432"' | sed "s|key-out: .*|key-out: $TALLY_HOME/keys/cp.key|" >"$B/keyhome.yaml"
refused "a key-out under the home (which does not exist yet)" "$B/keyhome.yaml" "keyhome.yaml:4: node.key-out: .*under the tally home"
ln -s "$TALLY_HOME" "$W/home-link"
bundle '      port: "5432"' | sed "s|key-out: .*|key-out: $W/home-link/cp.key|" >"$B/keylink.yaml"
mkdir -p "$TALLY_HOME"
t_check "refused: a key-out reaching the home through a symbolic link"
t_expect_exit 4 "key-out through a link" tly bootstrap "$B/keylink.yaml"
grep -q "keylink.yaml:4: node.key-out: .*under the tally home" "$W/last.err" || t_fail "not refused as under the home: $(cat "$W/last.err")"
[ -z "$(ls -A "$TALLY_HOME")" ] || t_fail "something was written in the home: $(ls -A "$TALLY_HOME")"
t_ok "$(head -n 1 "$W/last.err")"
