#!/bin/sh
# check-kconfig.sh <.config> <fragment>...: every option a fragment sets must
# have that value in the final .config (olddefconfig silently drops options
# whose dependencies are not met).
set -eu
config=$1; shift
bad=0
for frag in "$@"; do
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			if ! grep -qxF "$line" "$config"; then
				opt=${line%%=*}
				got=$(grep -E "^(# )?$opt[= ]" "$config" || echo "$opt absent")
				echo "kconfig: $(basename "$frag"): wanted '$line', got '$got'" >&2
				bad=1
			fi ;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }; opt=${opt%% *}
			if grep -q "^$opt=" "$config"; then
				echo "kconfig: $(basename "$frag"): wanted $opt unset, got '$(grep "^$opt=" "$config")'" >&2
				bad=1
			fi ;;
		esac
	done <"$frag"
done
exit $bad
