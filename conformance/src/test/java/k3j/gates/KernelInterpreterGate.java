package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import k3j.harness.Evidence;
import k3j.harness.KernelFixtures;
import k3j.harness.Project;
import k3j.kernels.Workers;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: the kernels give the same bits in the interpreter as after JIT compilation, transcendentals
 * included (StrictMath, never the Math intrinsics whose last bit may differ between interpreter, C1, C2 and
 * CPUs). A child JVM with -Xint runs every kernel-level fixture through both paths and prints a SHA-256 of
 * the output bits; this JVM runs the same fixtures hot (three rounds, so the loops are compiled) and the
 * digests must match, per fixture and path.
 */
@Tag("bitidentity")
@Tag("interpreter")   // a child JVM in the interpreter: -Pslow, beside the faults
@Epic("bitidentity")
class KernelInterpreterGate {
    private static final Map<String, String> INTERPRETED = new HashMap<>();

    @BeforeAll
    static void runTheInterpreter() throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(java, "-Xint", "--add-modules", "jdk.incubator.vector", "-Xss4m",
                "-Dk3.root=" + Project.root(), "-cp", System.getProperty("java.class.path"), KernelFixtures.class.getName());
        pb.redirectErrorStream(true);
        Process p = pb.start();
        byte[] all = p.getInputStream().readAllBytes();
        if (!p.waitFor(10, TimeUnit.MINUTES)) {
            p.destroyForcibly();
            fail("the -Xint child JVM did not finish in 10 minutes");
        }
        String text = new String(all, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) fail("the -Xint child JVM failed (exit " + p.exitValue() + "):\n" + text);
        for (String line : text.split("\n")) {
            String[] f = line.trim().split(" ");
            if (f.length == 3 && f[2].length() == 64) INTERPRETED.put(f[0] + " " + f[1], f[2]);
        }
    }

    static Stream<KernelFixtures.Fixture> fixtures() {
        return KernelFixtures.kernelLevel().stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fixtures")
    void interpreterGivesTheCompiledBits(KernelFixtures.Fixture fx) {
        try (Workers two = Workers.of(2)) {
            for (int round = 0; round < 3; round++) {
                KernelFixtures.run(fx, false, Workers.serial());
                KernelFixtures.run(fx, true, two);
            }
            for (String path : List.of("reference", "fast")) {
                String jit = KernelFixtures.digest(KernelFixtures.run(fx, path.equals("fast"), path.equals("fast") ? two : Workers.serial()));
                String xint = INTERPRETED.get(fx.name() + " " + path);
                assertNotNull(xint, fx.name() + " " + path + ": the -Xint child printed no digest");
                Evidence.parameter(path + " digest", jit.substring(0, 16));
                assertEquals(xint, jit, fx.name() + " " + path + ": interpreter and JIT give different bits");
            }
        }
    }
}
