package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.lang.EvaluationResult;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.nio.file.Path;
import java.util.List;
import k3j.harness.FileDoorsRule;
import k3j.harness.planted.DoorBreaker;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Claim: outside {@code k3j.io} no class of the engine opens a file for writing or reads one by itself (the JDK calls
 * {@link FileDoorsRule#FORBIDDEN} lists): every output goes through the one output door (inputs refused by identity,
 * links and special files refused, written atomically) and every file read through the one bounded input door. The
 * rule runs over the engine's compiled classes (found by the code source of {@code k3j.io.Outputs}: main classes only),
 * and must fail on {@link DoorBreaker}, a planted class in the test sources that breaks it four ways.
 */
@Tag("doors")
@Epic("doors")
class FileDoorsGate {
    static Path engineClasses() throws Exception {
        return Path.of(k3j.io.Outputs.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    }

    @Test
    @Feature("one way out, one way in")
    @DisplayName("no engine class opens a file for writing, or reads one, outside k3j.io")
    void engineKeepsToTheDoors() throws Exception {
        Path where = engineClasses();
        JavaClasses engine;
        if (java.nio.file.Files.isRegularFile(where)) {
            try (java.util.jar.JarFile jar = new java.util.jar.JarFile(where.toFile())) {
                engine = new ClassFileImporter().importJar(jar);
            }
        } else {
            engine = new ClassFileImporter().importPath(where);
        }
        // a rule over nothing proves nothing: the engine's classes, the doors among them, must be there
        assertTrue(engine.size() > 300, "the engine's classes were not found at " + engineClasses() + " (" + engine.size() + " imported)");
        assertTrue(engine.contain(k3j.io.Outputs.class) && engine.contain(k3j.io.SafeFiles.class), "the doors themselves were not imported");
        assertTrue(engine.contain("k3j.fleet.ShardFolder") && engine.contain("k3j.cli.CompareLogitsCommand"), "the new doors' users were not imported");
        EvaluationResult r = FileDoorsRule.RULE.evaluate(engine);
        assertTrue(!r.hasViolation(), "files opened outside k3j.io:\n" + String.join("\n", r.getFailureReport().getDetails()));
    }

    @Test
    @Feature("one way out, one way in")
    @DisplayName("the rule fails on a planted class that writes, opens for writing, reads and prints to a file around the doors")
    void ruleFailsOnAPlantedViolation() {
        JavaClasses planted = new ClassFileImporter().importClasses(DoorBreaker.class);
        EvaluationResult r = FileDoorsRule.RULE.evaluate(planted);
        List<String> details = r.getFailureReport().getDetails();
        assertTrue(r.hasViolation(), "the rule let the planted class pass");
        for (String want : List.of("java.nio.file.Files.writeString", "java.nio.channels.FileChannel.open", "java.io.RandomAccessFile.<init>",
                "java.nio.file.Files.readAllBytes", "opens a java.io.PrintWriter on a file")) {
            assertTrue(details.stream().anyMatch(d -> d.contains(want)), "the planted " + want + " was not caught:\n" + String.join("\n", details));
        }
        assertEquals(5, details.size(), "one violation per planted call:\n" + String.join("\n", details));
    }
}
