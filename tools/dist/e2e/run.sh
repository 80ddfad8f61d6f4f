#!/usr/bin/env bash
# The end-to-end packaging test (make test-dist): linux/amd64's artifacts in
# DIST_DIR installed as a user would, on a PATH without Go, in a temporary
# home with no daemon running: the platform wheel into a fresh virtual
# environment (its dependencies from PyPI), then the npm tarballs into a
# fresh project. Each side: the binary's version, a first run that starts
# savepointd on demand, kill -9 of that daemon, a second process that
# starts it again and finds everything acknowledged.
#
# usage: run.sh DIST_DIR VERSION
set -euo pipefail
dist="$(realpath "$1")"
version="$2"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d /tmp/spe2e.XXXXXX)"
state="$tmp/home/st/savepoint"
cleanup() {
	[[ -f "$tmp/pid" ]] && kill -9 "$(cat "$tmp/pid")" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/home"
python="$(command -v python3)"
python="$("$python" -c 'import sys; print(sys.executable)')" # past pyenv's shim
export HOME="$tmp/home" XDG_STATE_HOME="$tmp/home/st" PATH="/usr/bin:/bin" NPM_CONFIG_UPDATE_NOTIFIER=false
unset XDG_RUNTIME_DIR SAVEPOINT_ADDR SAVEPOINT_AUTOSTART SAVEPOINTD_PATH GOROOT GOPATH
if command -v go >/dev/null; then echo "e2e: go is on PATH=$PATH" >&2; exit 1; fi

fail() { echo "e2e: $*" >&2; [[ -f "$state/savepointd.log" ]] && tail -5 "$state/savepointd.log" >&2; exit 1; }

# kill9 kills the daemon started on demand (its pid from the client's line
# on stderr in $1) and waits until it is gone.
kill9() {
	local pid
	pid="$(sed -n 's/^savepoint: started savepointd on demand at .* (pid \([0-9]*\)).*/\1/p' "$1" | tail -1)"
	[[ -n "$pid" ]] || fail "no 'started savepointd on demand' line in $(cat "$1")"
	kill -9 "$pid"
	while kill -0 "$pid" 2>/dev/null && ! grep -q zombie "/proc/$pid/status" 2>/dev/null; do sleep 0.05; done
	echo "e2e: killed savepointd $pid with SIGKILL"
}

# started checks that the client that started a daemon said so, once, and
# records its pid for cleanup.
started() {
	[[ "$(grep -c '^savepoint: started savepointd on demand at unix:' "$1")" == 1 ]] || fail "want one started line: $(cat "$1")"
	sed -n 's/.*(pid \([0-9]*\)).*/\1/p' "$1" | tail -1 >"$tmp/pid"
}

echo "== Python: pip install the manylinux x86_64 wheel"
wheel="$(ls "$dist"/savepoint-*manylinux*x86_64*.whl)"
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check "$wheel[langgraph]" 'langgraph==1.2.22'
export PATH="$tmp/venv/bin:/usr/bin:/bin"
got="$(savepointd --version)"
[[ "$got" == *"$version"* ]] || fail "savepointd --version printed $got, want $version"
echo "savepointd --version: $got"
[[ "$(command -v savepointd)" == "$tmp/venv/bin/savepointd" ]] || fail "savepointd is not the venv's"
savepoint --version >/dev/null
python "$here/graph.py" first 2>"$tmp/err1" || fail "first run: $(cat "$tmp/err1")"
started "$tmp/err1"
info="$(savepoint --addr "unix:$state/savepoint.sock" info)"
[[ "$info" == *"started on demand"* ]] || fail "savepoint info does not say it was started on demand: $info"
kill9 "$tmp/err1"
python "$here/graph.py" resume 2>"$tmp/err2" || fail "resume: $(cat "$tmp/err2")"
started "$tmp/err2"
kill -9 "$(cat "$tmp/pid")"; rm -f "$tmp/pid"

echo "== npm: install the tarballs into a fresh project"
mkdir "$tmp/proj"
cd "$tmp/proj"
npm init -y >/dev/null
npm install --silent --no-audit --no-fund "$dist"/savepoint-dev-client-*.tgz "$dist"/savepoint-dev-savepointd-linux-x64-*.tgz
export PATH="/usr/bin:/bin" # the venv's savepointd is not the one used
got="$(npx --no-install savepointd --version)"
[[ "$got" == *"$version"* ]] || fail "npx savepointd --version printed $got, want $version"
echo "npx savepointd --version: $got"
rm -rf "$state" # a machine that never ran savepointd
cp "$here/session.mjs" .
node session.mjs first 2>"$tmp/err3" || fail "first run: $(cat "$tmp/err3")"
started "$tmp/err3"
grep -q "node_modules/@savepoint-dev/savepointd-linux-x64/bin/savepointd" "$state/savepointd.log" 2>/dev/null ||
	ps -o args= -p "$(cat "$tmp/pid")" | grep -q "@savepoint-dev/savepointd-linux-x64/bin/savepointd" ||
	fail "the daemon is not the platform package's: $(ps -o args= -p "$(cat "$tmp/pid")")"
kill9 "$tmp/err3"
node session.mjs resume 2>"$tmp/err4" || fail "resume: $(cat "$tmp/err4")"
started "$tmp/err4"
echo "e2e: ok"
