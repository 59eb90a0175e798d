# Sourced by bin/k3, ci/mvn and .ci/run: exports JAVA_HOME as a JDK >= 25, or fails in one line.
# Order: $JAVA_HOME if it is >= 25, then the Temurin 25 this machine kind ships, then any JDK under /usr/lib/jvm.
k3_jdk_major() {  # prints the feature version of the JDK at $1, or nothing
  [ -x "$1/bin/java" ] && [ -x "$1/bin/javac" ] || return 0
  if [ -f "$1/release" ]; then
    sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$1/release"
  else
    "$1/bin/java" -XshowSettings:properties -version 2>&1 | sed -n 's/.*java.specification.version = \([0-9]*\).*/\1/p'
  fi
}
k3_find_jdk() {
  local cand major
  for cand in "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25-jdk* /usr/lib/jvm/*; do
    [ -n "$cand" ] && [ -d "$cand" ] || continue
    major=$(k3_jdk_major "$cand")
    if [ -n "$major" ] && [ "$major" -ge 25 ]; then
      JAVA_HOME=$(cd "$cand" && pwd -P); export JAVA_HOME
      return 0
    fi
  done
  echo "k3j: no JDK >= 25 found (JAVA_HOME=${JAVA_HOME:-unset}, nothing suitable under /usr/lib/jvm); install Temurin 25 or set JAVA_HOME" >&2
  return 1
}
