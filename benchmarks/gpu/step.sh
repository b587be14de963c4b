# Sourced by the device scripts here: `step LOG SECONDS COMMAND...` runs COMMAND under a time limit, its output in
# $out/LOG and its exit status as the log's last line ("rc N"), whatever the other steps do. Needs $out.
step() {
  local log=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$out/$log" 2>&1
  echo "rc $?" >> "$out/$log"
}
