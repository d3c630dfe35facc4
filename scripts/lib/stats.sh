# shellcheck shell=bash
# The statistics the bench scripts report, one rule each. Sourced, never run; needs only awk.
# Tested by scripts/test-lib.sh.
#
#   stats NUM...   "median min max" of the numbers, space-separated
#   median NUM...  the median: the middle value of the numbers in ascending order; for an even
#                  count, the mean of the two middle values (as the conductor's
#                  regression::spread, so a script's median and compare.json's agree)
#   ratio T U      T / U
#   is_outlier VALUE MEDIAN FACTOR
#                  status 0 when VALUE is an outlier against MEDIAN: VALUE / MEDIAN is more than
#                  FACTOR or less than 1 / FACTOR (either bound itself is not an outlier); status 1
#                  when it is not. Prints nothing. MEDIAN must be above 0 and FACTOR at least 1.
#
# A number is a decimal such as 3, -2, 0.5, .5 or 1.2e-3. Anything else, no number at all, or
# U = 0 is an error: a line on stderr and status 1 (is_outlier: status 2, as 1 means "not an
# outlier"), never a figure. A result that is one of the
# numbers given (min, max, the median of an odd count) is printed as it was given; a mean or a
# ratio with 15 significant digits (%.15g: 2.5, 0.375, 12345678.5). Callers round for display.

STATS_NUMBER='^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$'

# stats_check NAME NUM...: status 1, saying so as NAME, unless there is a number and all are numbers.
stats_check() {
  local name=$1 value
  shift
  [ $# -gt 0 ] || { printf '%s: no numbers\n' "$name" >&2; return 1; }
  for value in "$@"; do
    [[ "$value" =~ $STATS_NUMBER ]] || { printf "%s: not a number: '%s'\n" "$name" "$value" >&2; return 1; }
  done
}

stats() {
  stats_check stats "$@" || return 1
  # Insertion sort (a bench has a handful of repeats) of the values, with the text each was given as.
  LC_ALL=C awk 'BEGIN {
    n = ARGC - 1
    for (i = 1; i <= n; i++) {
      x = ARGV[i] + 0
      for (j = i - 1; j >= 1 && v[j] > x; j--) { v[j + 1] = v[j]; s[j + 1] = s[j] }
      v[j + 1] = x
      s[j + 1] = ARGV[i]
    }
    if (n % 2) median = s[(n + 1) / 2]
    else median = sprintf("%.15g", (v[n / 2] + v[n / 2 + 1]) / 2)
    print median, s[1], s[n]
  }' "$@"
}

median() {
  local summary
  stats_check median "$@" || return 1
  summary=$(stats "$@") || return 1
  printf '%s\n' "${summary%% *}"
}

ratio() {
  [ $# -eq 2 ] || { printf 'ratio: give T and U, not %s\n' "$*" >&2; return 1; }
  stats_check ratio "$@" || return 1
  LC_ALL=C awk 'BEGIN {
    if (ARGV[2] + 0 == 0) { print "ratio: " ARGV[1] " / " ARGV[2] ": division by zero" > "/dev/stderr"; exit 1 }
    printf "%.15g\n", ARGV[1] / ARGV[2]
  }' "$1" "$2"
}

is_outlier() {
  [ $# -eq 3 ] || { printf 'is_outlier: give VALUE MEDIAN FACTOR, not %s\n' "$*" >&2; return 2; }
  stats_check is_outlier "$@" || return 2
  LC_ALL=C awk 'BEGIN {
    v = ARGV[1] + 0; m = ARGV[2] + 0; f = ARGV[3] + 0
    if (m <= 0) { print "is_outlier: MEDIAN " ARGV[2] " is not above 0" > "/dev/stderr"; exit 2 }
    if (f < 1) { print "is_outlier: FACTOR " ARGV[3] " is below 1" > "/dev/stderr"; exit 2 }
    r = v / m
    exit !(r > f || r < 1 / f)
  }' "$1" "$2" "$3"
}
