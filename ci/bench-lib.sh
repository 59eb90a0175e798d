# Sourced by the ci/bench* scripts (with $root set): a JDK >= 25 in $JAVA_HOME, then the engine's main, test and
# JMH classes compiled and their classpath in $cp. Build output goes to stderr; the classpath file to $out.
. "$root/ci/jdk.sh"
k3_find_jdk || exit 1
out=$root/engine/target/bench
mkdir -p "$out"
# one reactor with -am: the engine's picocli is a module of this build (picocli/), never fetched; the engine, built
# last, writes the classpath file last
"$root/ci/mvn" -B -ntp --quiet -Pbench -pl engine -am test-compile dependency:build-classpath -Dmdep.includeScope=test \
  -Dmdep.outputFile="$out/cp.txt" >&2
cp="$root/engine/target/test-classes:$root/engine/target/classes:$(cat "$out/cp.txt")"
