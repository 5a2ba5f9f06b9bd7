#!/bin/sh
# 76_publish_status: `tally publish status` says why publishing lags.
#
# Against a real RabbitMQ (tests/harness/rabbit.sh): tallyd publishing
# with a wrong password is refused by the broker; status must name the
# failure and since when (human and --json), and once the right password
# is configured, say that publishing resumed, with the lag back to 0.
# Then a disk alarm (the free-disk limit raised above what there is):
# the broker blocks publishing, and status must say so, with the
# broker's reason, until the alarm clears.
. "$(dirname "$0")/lib.sh"

R_DIR=$W/rmq
. "$(dirname "$0")/rabbit-lib.sh"

# until_status SECONDS PATTERN: polls tally publish status for PATTERN.
until_status() {
	_u_end=$(($(t_now_ms) + $1 * 1000))
	until tly publish status >"$W/st.txt" 2>&1 && grep -q "$2" "$W/st.txt"; do
		[ "$(t_now_ms)" -lt "$_u_end" ] || {
			cat "$W/st.txt" >&2
			tail -n 10 "$T_DLOG" >&2
			t_fail "tally publish status does not say '$2' after $1 s"
		}
		sleep 0.2
	done
}

t_say "RabbitMQ on loopback; tallyd publishing with a wrong password"
r_start
URL=$AMQP_URL
t_init
t_node node-a 127.0.0.1
echo "not-the-password" | tly publish configure --url "$URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
t_tallyd_start --interval 1

t_check "status names the refusal and since when"
until_status 30 "failing since"
grep -qi "refused\|auth\|login" "$W/st.txt" || t_fail "the reason does not say the login was refused: $(cat "$W/st.txt")"
grep -q "not-the-password" "$W/st.txt" && t_fail "status prints the password"
t_ok "$(grep 'failing since' "$W/st.txt")"

t_check "--json has the state: failing, error, since, at"
tly publish status --json >"$W/st.json" || t_fail "publish status --json failed"
grep -q '"failing":true' "$W/st.json" || t_fail "no failing state: $(cat "$W/st.json")"
grep -q '"since":"20[0-9][0-9]-' "$W/st.json" || t_fail "no time: $(cat "$W/st.json")"
t_ok "failing, with its time"

t_check "the right password: publishing resumes, and status says so"
printf '%s\n' "$TALLY_TEST_AMQP_PASSWORD" | tly publish configure --url "$URL" \
	--user "$TALLY_TEST_AMQP_USER" --secret password >/dev/null ||
	t_fail "tally publish configure failed"
until_status 30 "publishing again since"
until_status 30 "lag 0"
t_ok "$(tail -n 1 "$W/st.txt")"

t_say "a disk alarm on the broker"
sh "$RMQSH" ctl "$R_DIR" -q set_disk_free_limit 100000GB >/dev/null ||
	t_fail "rabbitmqctl set_disk_free_limit failed"
t_node node-b b.lan	# something to publish
t_check "status says the broker blocked publishing, and why"
until_status 60 "failing since"
grep -q "blocked publishing" "$W/st.txt" ||
	t_fail "the reason is not the block: $(cat "$W/st.txt")"
grep -qi "disk" "$W/st.txt" || t_fail "the reason does not name the disk: $(cat "$W/st.txt")"
t_ok "$(grep 'failing since' "$W/st.txt" | cut -c1-160)"
t_check "the alarm clears: publishing again, lag 0"
sh "$RMQSH" ctl "$R_DIR" -q set_disk_free_limit 1MB >/dev/null ||
	t_fail "rabbitmqctl set_disk_free_limit failed"
until_status 60 "publishing again since"
until_status 30 "lag 0"
t_ok "resumed"
t_tallyd_stop
