#!/usr/bin/env bash
# Sourced by run.sh and smoke.sh: sets RATELIMIT_BIN to envoyproxy/ratelimit's
# service_cmd at the pinned version below, installed from the module proxy
# (go install, about 30 s the first time) into a cache directory of its own,
# outside every go.mod of this repository. RATELIMIT_BIN set beforehand is
# used as it is.
RATELIMIT_VERSION=v1.4.1-0.20260122083618-3fb702589d36
if [[ -z ${RATELIMIT_BIN:-} ]]; then
	ratelimit_dir=${XDG_CACHE_HOME:-$HOME/.cache}/hotlimit/ratelimit@$RATELIMIT_VERSION
	RATELIMIT_BIN=$ratelimit_dir/service_cmd
	if [[ ! -x $RATELIMIT_BIN ]]; then
		echo "installing envoyproxy/ratelimit $RATELIMIT_VERSION into $ratelimit_dir" >&2
		GOWORK=off GOFLAGS= GOBIN=$ratelimit_dir go install "github.com/envoyproxy/ratelimit/src/service_cmd@$RATELIMIT_VERSION"
	fi
fi
export RATELIMIT_BIN
