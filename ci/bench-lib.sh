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

# bench_kernels ROUNDS "THREADS ..." KERNEL ...: the C peer (bench/peer/peer.c, built once into $out/peer), then its
# Java twin PeerBench on the same inputs, per round and thread count, both appended to $out/kernels.txt (read by
# ci/peer_kernels.py). PeerBench checks every output bit for bit against the peer's dump before timing it and exits 1
# on a difference: that is a "JAVA FAILED" line, never a quiet gap. Kernels: stream fma_peak bf16 mxfp4 kda_hot
# kda_dram lmhead (stream and fma_peak are the peer's roof probes; PeerBench ignores them).
bench_kernels() {
  local rounds=$1 threads=$2 r t java_kernels=()
  shift 2
  for k in "$@"; do case $k in stream|fma_peak) ;; *) java_kernels+=("$k") ;; esac; done
  if [ ! -x "$out/peer" ] || [ "$root/bench/peer/peer.c" -nt "$out/peer" ]; then
    gcc -O3 -march=native -ffp-contract=off -fopenmp "$root/bench/peer/peer.c" -o "$out/peer" -lm 2>"$out/peer-build.log" \
      || { echo "NOPEER $(head -c 300 "$out/peer-build.log" | tr '\n' ' ')" >>"$out/kernels.txt"; return 0; }
  fi
  mkdir -p "$out/peer-out"
  for r in $(seq "$rounds"); do
    for t in $threads; do
      echo "== kernels, round $r, $t thread(s): C then Java ($*)" >&2
      "$out/peer" "$out/peer-out" "$t" "$@" | tee -a "$out/kernels.txt" >&2 || echo "PEER FAILED $t" >>"$out/kernels.txt"
      [ ${#java_kernels[@]} -eq 0 ] && continue
      "$JAVA_HOME/bin/java" --add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED -Xmx1g -cp "$cp" k3j.kernels.PeerBench \
        "$out/peer-out" "$t" "${java_kernels[@]}" 2>"$out/java-$r-$t.err" | tee -a "$out/kernels.txt" >&2 \
        || echo "JAVA FAILED $t (see $out/java-$r-$t.err)" >>"$out/kernels.txt"
    done
  done
}
