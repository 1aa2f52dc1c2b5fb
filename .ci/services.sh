#!/usr/bin/env bash
# The services CI provides to the suite, on a bare machine of CI's kind (Debian, root):
#
#   .ci/services.sh install   # apt-get whatever of them is missing, in one call; exits 1 naming
#                             # the packages and apt's own last lines if that fails
#   .ci/services.sh missing   # print the packages that would be installed (one per line)
#
# Each service is found by the programs it needs, and each program comes from one Debian package
# (on Debian 12 `slurmdbd` is a package of its own: neither slurm-wlm nor mariadb-server pulls it
# in, and without it every SLURM test would find no cluster). Under CI (CI=true) a test that needs
# one of them and finds it missing fails instead of skipping (tests/conftest.py, SERVICES).
set -euo pipefail

# program  package   (the service: what its tests are)
PROGRAMS=(
  "chromium chromium"             # Chromium: the report rendered headless (tests/test_report.py)
  "slurmctld slurm-wlm"           # SLURM: smoke stages as jobs, time limits, srun (test_slurm.py)
  "slurmd slurm-wlm"
  "sbatch slurm-wlm"
  "slurmdbd slurmdbd"             #   its accounting daemon (sacct: the executor's job status)
  "munged munge"                  #   its authentication
  "mariadbd mariadb-server"       #   slurmdbd's database
  "sshd openssh-server"           # sshd: the SSH DVC remote (tests/test_remote.py)
)

log() { echo "services.sh: $*" >&2; }

found() {  # found PROGRAM: on PATH (.ci/run puts the sbin directories on it)
  command -v "$1" >/dev/null 2>&1
}

missing() {
  local entry program package seen=" "
  for entry in "${PROGRAMS[@]}"; do
    read -r program package <<<"$entry"
    if ! found "$program" && [[ $seen != *" $package "* ]]; then
      seen+="$package "
      echo "$package"
    fi
  done
}

install() {
  local want
  mapfile -t want < <(missing)
  if ((${#want[@]} == 0)); then
    log "every service's programs are here"
    return 0
  fi
  [[ $EUID -eq 0 ]] || { log "cannot install ${want[*]}: apt-get needs root"; exit 1; }
  log "installing ${want[*]}"
  local out
  out=$(mktemp)
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}"; } \
      >"$out" 2>&1; then
    log "could not install ${want[*]}; apt-get said:"
    tail -n 15 "$out" >&2
    rm -f "$out"
    exit 1
  fi
  rm -f "$out"
  mapfile -t want < <(missing)
  if ((${#want[@]})); then  # installed, yet a program is still not where it was looked for
    log "installed, but still missing the programs of: ${want[*]}"
    exit 1
  fi
}

case "${1:-}" in
  install) install ;;
  missing) missing ;;
  *) log "usage: $0 install|missing"; exit 2 ;;
esac
