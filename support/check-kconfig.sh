#!/bin/sh
# check-kconfig.sh <.config> <fragment>...: every option a fragment sets must
# have that value in the final .config (olddefconfig silently drops options
# whose dependencies are not met). A later fragment may override an option
# of an earlier one (the debug kernel's on top of the appliance's), as
# merge_config.sh does: only the last fragment that names it is checked.
set -eu
config=$1; shift
bad=0
# named_later <option> <fragment>...: does a fragment after the current one name it?
named_later() {
	opt=$1; shift
	[ $# -gt 0 ] && grep -qE "^($opt=|# $opt is not set)" "$@"
}
while [ $# -gt 0 ]; do
	frag=$1; shift
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			named_later "${line%%=*}" "$@" && continue
			if ! grep -qxF "$line" "$config"; then
				opt=${line%%=*}
				got=$(grep -E "^(# )?$opt[= ]" "$config" || echo "$opt absent")
				echo "kconfig: $(basename "$frag"): wanted '$line', got '$got'" >&2
				bad=1
			fi ;;
		"# CONFIG_"*" is not set")
			opt=${line#\# }; opt=${opt%% *}
			named_later "$opt" "$@" && continue
			if grep -q "^$opt=" "$config"; then
				echo "kconfig: $(basename "$frag"): wanted $opt unset, got '$(grep "^$opt=" "$config")'" >&2
				bad=1
			fi ;;
		esac
	done <"$frag"
done
exit $bad
