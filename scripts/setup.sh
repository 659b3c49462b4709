#!/usr/bin/env bash
# One-time (and idempotent) set-up for real2sim on Debian/Ubuntu.
#   - system libraries: Mesa EGL (MuJoCo and moderngl headless rendering), Chromium (browser tests), Mesa Vulkan >= 24.3
#     (SAPIEN CPU rendering through lavapipe; on Debian 12 from bookworm-backports)
#   - .venv with the project and the extras named in $REAL2SIM_EXTRAS
#     (default all,test; 'all' includes 'record': pyarrow + PyAV for 'real2sim eval --record lerobot DIR', and 'scan':
#     open3d-cpu + scikit-image for 'real2sim scan')
# Re-running is fast: each step is skipped when its stamp file says it is current.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS="${REAL2SIM_EXTRAS:-all,test}"
STAMP_DIR=.venv/.real2sim-stamps
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

need_apt=0
for pkg in libegl1 libgl1-mesa-dri libgl1 libglib2.0-0 libusb-1.0-0 mesa-vulkan-drivers chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt=1
done
mesa_version() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | sed -E 's/^[0-9]+://; s/^([0-9]+\.[0-9]+).*/\1/'; }
mesa_ok() { local v; v=$(mesa_version); [ -n "$v" ] && printf '%s\n24.3\n' "$v" | sort -V -C -r 2>/dev/null; }
mesa_ok || need_apt=1

if [ "$need_apt" = 1 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[setup] installing system packages (Mesa EGL + Vulkan, libusb)"
  if grep -qs 'bookworm' /etc/os-release && ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" | $SUDO tee /etc/apt/sources.list.d/real2sim-backports.list >/dev/null
  fi
  $SUDO apt-get update -qq
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq --no-install-recommends libegl1 libgl1 libgl1-mesa-dri libglib2.0-0 libusb-1.0-0 chromium >/dev/null
  if grep -qs 'bookworm' /etc/os-release; then
    $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports mesa-vulkan-drivers libgl1-mesa-dri libegl-mesa0 >/dev/null
  else
    $SUDO apt-get install -y -qq --no-install-recommends mesa-vulkan-drivers >/dev/null
  fi
  mesa_ok || echo "[setup] warning: Mesa $(mesa_version) < 24.3: SAPIEN rendering will be unavailable (physics still works)"
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
mkdir -p "$STAMP_DIR"
want=$(cat pyproject.toml | sha256sum | cut -c1-16)-$EXTRAS
if [ "$(cat "$STAMP_DIR/pip" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing real2sim[$EXTRAS] into .venv"
  .venv/bin/pip install -q -e ".[$EXTRAS]"
  echo "$want" > "$STAMP_DIR/pip"
fi
